package target

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/model"
)

// binDirAnswering is a directory whose kube-apiserver and
// kube-controller-manager answer --version with the releases given, for
// the release detection (nothing is started).
func binDirAnswering(t *testing.T, apiserver, kcm string) string {
	dir := t.TempDir()
	for name, v := range map[string]string{controlplane.APIServerBinary: apiserver, controlplane.ControllerManagerBinary: kcm} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho Kubernetes "+v+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDetectReleaseSkew: a target that starts kube-controller-manager
// judges the release of each binary it starts: a v1.33.13
// kube-controller-manager beside a v1.34.4 kube-apiserver makes a skewed
// release, taken where the release named says nothing of
// kube-controller-manager and refused where it names another; a target
// that starts none judges kube-apiserver's release alone.
func TestDetectReleaseSkew(t *testing.T) {
	v133, v134 := model.Release{Major: 1, Minor: 33, Patch: 13}, model.Release{Major: 1, Minor: 34, Patch: 4}
	dir := binDirAnswering(t, "v1.34.4", "v1.33.13")
	skew := v134.WithKCM(v133)
	for _, c := range []struct {
		name     string
		spec     Spec
		kcm      bool
		want     model.Release
		refusing string
	}{
		{"nothing named", Spec{}, true, skew, ""},
		{"kube-apiserver named", Spec{Release: v134}, true, skew, ""},
		{"both named", Spec{Release: skew, KCMNamed: true}, true, skew, ""},
		{"no kube-controller-manager started", Spec{Release: v134}, false, v134, ""},
		{"another kube-controller-manager named", Spec{Release: v134, KCMNamed: true}, true, model.Release{}, "are Kubernetes v1.34.4 (kube-controller-manager v1.33.13), not v1.34.4"},
		{"a skewed release another kube-controller-manager", Spec{Release: v134.WithKCM(model.Release{Major: 1, Minor: 33}), KCMNamed: true}, true, model.Release{}, "not v1.34.4 (kube-controller-manager v1.33.0)"},
		{"another kube-apiserver named", Spec{Release: v133}, true, model.Release{}, "(kube-controller-manager v1.33.13), not v1.33.13"},
	} {
		tg := &Target{Spec: c.spec}
		err := tg.detectRelease(dir, c.kcm)
		switch {
		case c.refusing != "" && (err == nil || !strings.Contains(err.Error(), c.refusing)):
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.refusing)
		case c.refusing == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.refusing == "" && tg.Spec.Release != c.want:
			t.Errorf("%s: judged %v, want %v", c.name, tg.Spec.Release, c.want)
		}
	}
	// impl runs cascade's GC: no kube-controller-manager release applies
	for _, name := range []string{Impl, ImplStepped} {
		if err := (Spec{Name: name, Release: skew, KCMNamed: true}).Validate(); err == nil {
			t.Errorf("%s accepts a kube-controller-manager release", name)
		}
	}
	if err := (Spec{Name: Upstream, Release: skew, KCMNamed: true}).Validate(); err != nil {
		t.Errorf("upstream refuses a skewed release: %v", err)
	}
}
