package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/model"
)

// TestKubeVersionGarbage: a --kube-version or --kcm-version that is no
// release is one line naming the flag, exit 2, on every command that
// takes it, before anything starts.
func TestKubeVersionGarbage(t *testing.T) {
	for _, flag := range []string{"--kube-version", "--kcm-version"} {
		for _, args := range [][]string{
			{"check", "--preset", "owner-swap", "--out", t.TempDir()},
			{"replay", "race/kubernetes-114603"},
			{"replay", "--target", "upstream", "race/kubernetes-114603"},
			{"conform", "--target", "upstream", "--out", t.TempDir()},
			{"fuzz", "--target", "upstream", "--checks", "1", "--out", t.TempDir()},
		} {
			out, code := cascade(t, append(args, flag, "garbage")...)
			msg := strings.TrimPrefix(out, "error: ")
			if code != 2 || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, flag+`: "garbage" is not a Kubernetes release`) {
				t.Errorf("%v: exit %d, want 2 and one line naming %s:\n%s", args, code, flag, out)
			}
		}
	}
}

// TestCheckKnownPerRelease: in the owner-swap preset the GC's DELETE of
// the dependent whose owner moved is kubernetes#114603 on v1.33.13, a
// known race (exit 0, 1 with --strict), and does not happen on v1.37.2,
// whose GC sends the resourceVersion precondition.
func TestCheckKnownPerRelease(t *testing.T) {
	out, code := cascade(t, "check", "--preset", "owner-swap", "--kube-version", "v1.33.13", "-q", "--out", t.TempDir())
	if code != 0 || !strings.Contains(out, "violated, known upstream race kubernetes#114603") {
		t.Fatalf("v1.33.13: exit %d, want 0 with kubernetes#114603 known:\n%s", code, out)
	}
	if _, code := cascade(t, "check", "--preset", "owner-swap", "--kube-version", "v1.33.13", "-q", "--strict", "--out", t.TempDir()); code != 1 {
		t.Errorf("v1.33.13 --strict: exit %d, want 1", code)
	}
	out, code = cascade(t, "check", "--preset", "owner-swap", "--kube-version", "v1.37.2", "-q", "--out", t.TempDir())
	if code != 0 || strings.Contains(out, "violated") {
		t.Fatalf("v1.37.2: exit %d, want 0 and no violation:\n%s", code, out)
	}
}

// fakeBinDir is a directory whose kube-apiserver answers --version as
// release v does, for the release detection (no control plane starts).
func fakeBinDir(t *testing.T, v string) string {
	dir := t.TempDir()
	script := "#!/bin/sh\necho Kubernetes " + v + "\n"
	if err := os.WriteFile(filepath.Join(dir, controlplane.APIServerBinary), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestKubeVersionFromBinaries: without --kube-version the release is that
// of the kube-apiserver in use ($KUBEBUILDER_ASSETS here), the help texts
// say so, the --json summary names it (and the command to reproduce
// names it too), and a --kube-version those binaries contradict is exit 2.
func TestKubeVersionFromBinaries(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", fakeBinDir(t, "v1.33.13"))
	out, code := cascade(t, "check", "--preset", "owner-swap", "-q", "--out", t.TempDir())
	if code != 0 || !strings.Contains(out, "kubernetes#114603") {
		t.Fatalf("exit %d, want the v1.33.13 known race:\n%s", code, out)
	}
	out, _ = cascade(t, "check", "--preset", "owner-swap", "-q", "--json", "--out", t.TempDir())
	m := sharedSummary(t, "check", out)
	if m["kube_version"] != "v1.33.13" || !strings.HasSuffix(m["command_to_reproduce"].(string), " --kube-version v1.33.13") {
		t.Errorf("the summary does not name the detected release: %v, %v", m["kube_version"], m["command_to_reproduce"])
	}
	out, code = cascade(t, "fuzz", "--target", "upstream", "--kube-version", "v1.37.2", "--checks", "1", "--out", t.TempDir())
	if code != 2 || !strings.Contains(out, "--kube-version v1.37.2, but the kube-apiserver in") || !strings.Contains(out, "is v1.33.13") {
		t.Fatalf("exit %d, want 2 naming both releases:\n%s", code, out)
	}
	for _, c := range []string{"check", "conform", "fuzz", "replay"} {
		out, _ := cascade(t, c, "--help")
		if !strings.Contains(out, "here and now: v1.33.13") && !strings.Contains(out, "Here and now: v1.33.13") {
			t.Errorf("%s --help does not name the release in use:\n%s", c, out)
		}
		if strings.Contains(out, releaseInUse) {
			t.Errorf("%s --help shows the placeholder %s", c, releaseInUse)
		}
	}
}

// TestDefaultReleaseIsBuilt: the model's default release is the one
// 'make kube' builds by default.
func TestDefaultReleaseIsBuilt(t *testing.T) {
	if model.DefaultRelease.String() != controlplane.KubeVersion {
		t.Errorf("model.DefaultRelease %s, controlplane.KubeVersion %s", model.DefaultRelease, controlplane.KubeVersion)
	}
}

// TestConformReportsKnownPerRelease: conform names the known upstream
// races its passing traces showed, with the release a race is bounded
// to: on v1.33.13 the trace of kubernetes#114603 runs and the summary
// reports the race as present in that release; on v1.37.2 the trace is
// skipped and the race is not reported.
func TestConformReportsKnownPerRelease(t *testing.T) {
	const want = "known upstream race kubernetes#114603, present in v1.33.13: shown by trace race/kubernetes-114603"
	out, code := cascade(t, "conform", "--target", "model", "--kube-version", "v1.33.13", "--labels", "background", "-q")
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("v1.33.13: exit %d, want 0 and %q:\n%s", code, want, out)
	}
	out, code = cascade(t, "conform", "--target", "model", "--kube-version", "v1.33.13", "--labels", "background", "-q", "--json")
	var rep conformReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("v1.33.13 --json: exit %d, %v:\n%s", code, err, out)
	}
	if !slices.ContainsFunc(rep.Known, func(k knownShown) bool {
		return k.ID == model.KnownOwnerChangeBeforeDelete && slices.Equal(k.ShownBy, []string{"trace race/kubernetes-114603"})
	}) {
		t.Fatalf("v1.33.13 --json: known_races %+v lack kubernetes#114603 shown by its trace", rep.Known)
	}
	out, code = cascade(t, "conform", "--target", "model", "--kube-version", "v1.37.2", "--labels", "background", "-q")
	if code != 0 || strings.Contains(out, "kubernetes#114603,") || strings.Contains(out, "race kubernetes#114603") {
		t.Fatalf("v1.37.2: exit %d, want 0 without kubernetes#114603 reported:\n%s", code, out)
	}
}

// TestFuzzKnownRaces: the known races fuzz runs passed through are
// grouped by race in one schema with conform's (knownRaces): what showed
// each, how many times, and one message; a campaign's merge adds its
// shards' up.
func TestFuzzKnownRaces(t *testing.T) {
	got := fuzzKnownRaces([]string{
		"kubernetes#114603 (on recorded-reads): gc deleted pv/x-d, which has no ownerReferences",
		"relist-uid-change: rs/x-ns2/d is garbage (every owner is absent)",
		"kubernetes#114603 (on recorded-reads): gc deleted pv/y-d, which has no ownerReferences",
		"kubernetes#114603: pv/z-d is garbage",
	})
	want := knownRaces{
		{ID: "kubernetes#114603", FiledUpstream: true, ShownBy: []string{"fuzz (on recorded-reads)", "fuzz (liveness)"}, Times: 3, Example: "gc deleted pv/x-d, which has no ownerReferences"},
		{ID: "relist-uid-change", FiledUpstream: true, ShownBy: []string{"fuzz (liveness)"}, Times: 1, Example: "rs/x-ns2/d is garbage (every owner is absent)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fuzzKnownRaces = %+v\nwant %+v", got, want)
	}
	merged := knownRaces{}
	merged.merge(got)
	merged.merge(knownRaces{{ID: "kubernetes#114603", FiledUpstream: true, ShownBy: []string{"trace race/kubernetes-114603"}, Times: 1}})
	if k := merged[0]; k.Times != 4 || len(k.ShownBy) != 3 || k.Example != want[0].Example || merged[1].Times != 1 {
		t.Fatalf("merged = %+v", merged)
	}
	lines := got.lines("v1.33.13")
	if len(lines) != 4 || lines[0] != "known upstream race kubernetes#114603, present in v1.33.13: shown by fuzz (on recorded-reads), fuzz (liveness) (3 times)" ||
		lines[1] != "  e.g. gc deleted pv/x-d, which has no ownerReferences" {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
}

// TestKCMVersion: --kcm-version judges a skewed control plane, the GC by
// kube-controller-manager's release and the API by kube-apiserver's:
// v1.34.4 with a v1.33.13 kube-controller-manager carries
// kubernetes#114603 (the v1.33 GC's DELETE has no resourceVersion
// precondition), and the counterexample's headers and command say both
// releases; v1.33.13 with a v1.34.4 kube-controller-manager does not.
// impl, whose GC is cascade's, refuses one (TestKubeVersionGarbage has
// the malformed flag).
func TestKCMVersion(t *testing.T) {
	dir := t.TempDir()
	out, code := cascade(t, "check", "--preset", "owner-swap", "--kube-version", "v1.34.4", "--kcm-version", "v1.33.13", "-q", "--json", "--out", dir)
	m := sharedSummary(t, "check", out)
	if code != 0 || m["kube_version"] != "v1.34.4" || m["kcm_version"] != "v1.33.13" || !strings.Contains(out, "kubernetes#114603") {
		t.Fatalf("v1.34.4 with kube-controller-manager v1.33.13: exit %d, want 0 with kubernetes#114603 known and both releases in the summary:\n%s", code, out)
	}
	text, err := os.ReadFile(filepath.Join(dir, "owner-swap-no-solid-owner-collected.trace"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--kube-version v1.34.4 --kcm-version v1.33.13\n", "# releases: v1.34..v1.34\n", "# kcm-releases: v1.33..v1.33\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the counterexample lacks %q:\n%s", want, text)
		}
	}
	if out, code := cascade(t, "replay", filepath.Join(dir, "owner-swap-no-solid-owner-collected.trace")); code != 0 {
		t.Errorf("the counterexample does not replay on its releases: exit %d\n%s", code, out)
	}
	out, code = cascade(t, "check", "--preset", "owner-swap", "--kube-version", "v1.33.13", "--kcm-version", "v1.34.4", "-q", "--out", t.TempDir())
	if code != 0 || strings.Contains(out, "violated") {
		t.Fatalf("v1.33.13 with kube-controller-manager v1.34.4: exit %d, want 0 and no violation:\n%s", code, out)
	}
	out, code = cascade(t, "replay", "--target", "impl", "--kcm-version", "v1.33.13", "race/kubernetes-114603")
	if code != 2 || !strings.Contains(out, "cascade's own garbage collector") {
		t.Errorf("impl with --kcm-version: exit %d, want 2 saying impl runs no kube-controller-manager:\n%s", code, out)
	}
}

// TestKCMVersionFromBinaries: upstream and upstream-stepped take
// kube-controller-manager's release from the binary beside
// kube-apiserver, a skewed one included, and refuse a --kcm-version it
// contradicts before anything starts; impl, whose GC is cascade's, judges
// kube-apiserver's release alone.
func TestKCMVersionFromBinaries(t *testing.T) {
	dir := fakeBinDir(t, "v1.34.4")
	if err := os.WriteFile(filepath.Join(dir, controlplane.ControllerManagerBinary), []byte("#!/bin/sh\necho Kubernetes v1.33.13\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	out, code := cascade(t, "fuzz", "--target", "upstream", "--kcm-version", "v1.34.4", "--checks", "1", "--out", t.TempDir())
	if code != 2 || !strings.Contains(out, "--kcm-version v1.34.4, but the kube-controller-manager in") || !strings.Contains(out, "is v1.33.13") {
		t.Fatalf("exit %d, want 2 naming both releases:\n%s", code, out)
	}
	v134, v133 := model.Release{Major: 1, Minor: 34, Patch: 4}, model.Release{Major: 1, Minor: 33, Patch: 13}
	if rel, _, err := resolveRelease("", "", "", true); err != nil || rel != v134.WithKCM(v133) {
		t.Errorf("upstream judges %v, %v; want %v", rel, err, v134.WithKCM(v133))
	}
	if rel, _, err := resolveRelease("", "v1.33.13", "", true); err != nil || rel != v134.WithKCM(v133) {
		t.Errorf("upstream with --kcm-version v1.33.13 judges %v, %v; want %v", rel, err, v134.WithKCM(v133))
	}
	if rel, _, err := resolveRelease("", "", "", false); err != nil || rel != v134 {
		t.Errorf("impl judges %v, %v; want kube-apiserver's %v alone", rel, err, v134)
	}
}
