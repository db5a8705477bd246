package controlplane

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BinaryVersion runs `kube-apiserver --version` from dir and returns the
// release it reports ("v1.33.13"): the release of the control plane the
// binaries in dir make. kube-apiserver and kube-controller-manager of one
// `make kube` build are of one release; a directory may pair them across
// releases, as a control plane does in the middle of an upgrade
// (BinaryVersionOf asks kube-controller-manager).
func BinaryVersion(dir string) (string, error) { return BinaryVersionOf(dir, APIServerBinary) }

// BinaryVersionOf runs `NAME --version` from dir (kube-apiserver or
// kube-controller-manager) and returns the release it reports.
func BinaryVersionOf(dir, name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bin := filepath.Join(dir, name)
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("controlplane: %s --version: %v", bin, err)
	}
	// "Kubernetes v1.33.13"
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != "Kubernetes" || !strings.HasPrefix(f[1], "v") {
		return "", fmt.Errorf("controlplane: %s --version answered %q, not \"Kubernetes vX.Y.Z\"", bin, strings.TrimSpace(string(out)))
	}
	return f[1], nil
}
