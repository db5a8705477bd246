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
// binaries in dir make. kube-apiserver and kube-controller-manager come
// from one `make kube` build, so one answers for both.
func BinaryVersion(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bin := filepath.Join(dir, APIServerBinary)
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
