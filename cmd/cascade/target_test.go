package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/target"
)

// TestTargetUsageErrors: a wrong target, flag, kubeconfig or bug exits 2
// with one line naming what is wrong, before any control plane starts.
func TestTargetUsageErrors(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.kubeconfig")
	// port 1 on the loopback address refuses connections at once
	if _, err := target.WriteKubeconfig(dead, target.Context{Name: "dead", Config: &rest.Config{
		Host: "https://127.0.0.1:1", BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}}); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.kubeconfig")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--target", "kind", "race/orphan-adoption"}, `unknown target "kind" (valid: model, upstream, impl, impl-stepped, upstream-stepped, kubeconfig)`},
		{[]string{"conform", "--target", "kind"}, `unknown target "kind"`},
		{[]string{"conform", "--target", "kubeconfig", "--kubeconfig", missing}, missing},
		{[]string{"conform", "--target", "kubeconfig", "--kubeconfig", dead}, `cannot reach the cluster of context "dead" in kubeconfig ` + dead + " at https://127.0.0.1:1"},
		{[]string{"replay", "--target", "kubeconfig", "--kubeconfig", dead, "--context", "other", "scenario/background"}, `context "other" in kubeconfig ` + dead},
		{[]string{"replay", "--target", "impl", "--inject", "nope", "scenario/background"}, `unknown bug "nope"`},
		{[]string{"replay", "--target", "impl", "--inject", "finalizer-after-deletion", "scenario/background"}, "only the model can inject it"},
		{[]string{"conform", "--target", "upstream", "--inject", "no-cycle-unblock"}, "impl and impl-stepped only"},
		{[]string{"conform", "--target", "upstream", "--kubeconfig", dead}, "kubeconfig target"},
		{[]string{"conform", "--target", "model", "--labels", "nope"}, `no trace is labelled "nope"`},
		{[]string{"replay", "--target", "upstream", "race/orphan-adoption"}, "none of the traces can run on upstream"},
		{[]string{"replay", "--target", "upstream-stepped", "race/orphan-adoption"}, "none of the traces can run on upstream-stepped"},
		{[]string{"replay", "--target", "upstream", "race/nope"}, "race/nope: no such trace file, and no embedded trace"},
		{[]string{"cluster", "--target", "kubeconfig"}, "cluster runs upstream or impl"},
		{[]string{"cluster", "--target", "upstream", "--inject", "no-cycle-unblock"}, "impl and impl-stepped only"},
		{[]string{"conform", "--target", "upstream", "--datastore", "sqlite"}, `unknown datastore "sqlite" (want etcd or kine)`},
		{[]string{"conform", "--target", "model", "--datastore", "kine"}, "a datastore is chosen for the envtest targets (upstream, impl, impl-stepped), not model"},
		{[]string{"fuzz", "--target", "impl", "--datastore", "sqlite"}, `unknown datastore "sqlite"`},
		{[]string{"fuzz", "--target", "upstream-stepped", "--kinds", "cm,herd"}, "upstream-stepped cannot fuzz custom kinds (herd)"},
		{[]string{"fuzz", "--target", "upstream-stepped", "--inject", "no-cycle-unblock"}, "impl and impl-stepped only"},
		{[]string{"cluster", "--target", "upstream", "--datastore", "sqlite"}, `unknown datastore "sqlite"`},
		{[]string{"gc", "--kubeconfig", dead}, `cannot reach the cluster of context "dead" in kubeconfig ` + dead},
	}
	for _, c := range cases {
		begin := time.Now()
		out, code := cascade(t, c.args...)
		msg := out[strings.Index(out, "error: ")+1:]
		if code != 2 || !strings.Contains(out, "error: ") || !strings.Contains(out, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, want 2 with one line naming %q:\n%s", c.args, code, c.want, out)
		}
		if d := time.Since(begin); d > 15*time.Second {
			t.Errorf("%v: took %s; a usage error must not start anything", c.args, d)
		}
	}
}

// TestConformModelReports: conform on the model passes every scenario and
// race trace and writes a JSON summary and a JUnit report that agree.
// The progress stream ends by saying where the reports are.
func TestConformSaysWhereTheReportsAre(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "j.xml")
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"conform", "--target", "model", "--labels", "orphan", "--junit", junit, "--out", dir})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	want := "conform: reports: JUnit in " + junit + "; summary.json and each failed trace's output in " + dir + "\n"
	if !strings.HasSuffix(errb.String(), want) {
		t.Fatalf("progress does not end with %q:\n%s", want, errb.String())
	}
}

func TestConformModelReports(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	out, code := cascade(t, "conform", "--target", "model", "--json", "-q", "--junit", junit, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var rep conformReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	all, err := suiteTraces()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Target != "model" || rep.Passed != len(all) || rep.Failed+rep.Errors+rep.Skipped != 0 || len(rep.Cases) != len(all) {
		t.Fatalf("summary %+v, want %d passed", rep, len(all))
	}
	var doc junitSuites
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 1 || doc.Suites[0].Name != "cascade conform model" || doc.Tests != len(all) || len(doc.Suites[0].Cases) != len(all) {
		t.Fatalf("junit: %+v", doc)
	}
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err != nil {
		t.Fatal(err)
	}
	// the table names every trace with its result, and --labels selects
	// exactly the traces that carry the label
	protection := 0
	for _, tr := range all {
		if slices.Contains(traceLabels(tr), "protection") {
			protection++
		}
	}
	out, code = cascade(t, "conform", "--target", "model", "-q", "--labels", "protection")
	if code != 0 || protection < 4 || !strings.Contains(out, "scenario/protection-always") || !strings.Contains(out, fmt.Sprintf("model: %d passed, 0 failed, 0 errors, 0 skipped", protection)) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestJUnitFailureAndSkip: a failure carries the diff and the target's
// output, a skip its reason.
func TestJUnitFailureAndSkip(t *testing.T) {
	rep := &conformReport{summary: summary{Target: "upstream"}, Started: time.Unix(0, 0)}
	rep.add(caseResult{Phase: "traces", Name: "scenario/a", Result: resultFail, Message: "a.trace:3: stanza 1 differs\n- cm/a live\n+ cm/a gone", Output: [][]string{{"cm/a gone"}}})
	rep.add(caseResult{Phase: "traces", Name: "race/b", Result: resultSkip, Message: "it takes GC steps"})
	rep.add(caseResult{Phase: "traces", Name: "scenario/c", Result: resultPass, Seconds: 1.5})
	var b strings.Builder
	if err := writeJUnit(&b, rep); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	s := doc.Suites[0]
	if s.Tests != 3 || s.Failures != 1 || s.Skipped != 1 || s.Errors != 0 {
		t.Fatalf("counts: %+v", s)
	}
	f := s.Cases[0]
	if f.Failure == nil || f.Failure.Message != "a.trace:3: stanza 1 differs" || !strings.Contains(f.Failure.Text, "+ cm/a gone") || !strings.Contains(f.SystemOut, "stanza 1:\n  cm/a gone") {
		t.Fatalf("failure: %+v", f)
	}
	if sk := s.Cases[1].Skipped; sk == nil || sk.Message != "it takes GC steps" {
		t.Fatalf("skip: %+v", s.Cases[1])
	}
	if c := s.Cases[2]; c.Failure != nil || c.Skipped != nil || c.Time != "1.500" || c.Classname != "cascade.upstream.traces" {
		t.Fatalf("pass: %+v", c)
	}
}

// TestReplayEmbedded: a built-in trace replays by name from anywhere.
func TestReplayEmbedded(t *testing.T) {
	out, code := cascade(t, "replay", "race/orphan-adoption", "traces/scenarios/background.trace")
	if code != 0 || !strings.Contains(out, "ok   traces/races/orphan-adoption.trace") || !strings.Contains(out, "2 passed, 0 failed, 0 skipped on model") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestFuzzUsesImplsAdopter: cascade fuzz on impl runs impl's own adopter
// for the built-in workloads, as impl-stepped does; on the other targets
// there is none to ask for.
func TestFuzzUsesImplsAdopter(t *testing.T) {
	for name, want := range map[string]bool{target.Impl: true, target.Upstream: false, target.ImplStepped: false, target.Kubeconfig: false} {
		f := &fuzzFlags{target: name}
		if got := f.spec(nil, nil).Adopter; got != want {
			t.Errorf("fuzz --target %s: Adopter = %v, want %v", name, got, want)
		}
	}
}

// TestFuzzRunsUpstreamSteppedGCOnly: cascade fuzz on upstream-stepped
// starts kube-controller-manager's GC without the workload controllers:
// its runs draw no controller step and their model has no controller,
// so the real ones would adopt and release the runs' objects at the
// settle where the model does not (seed 1 run 5: the Deployment
// controller released rs/a, whose labels did not match deploy/b's
// selector). Trace replays keep them (controller steps).
func TestFuzzRunsUpstreamSteppedGCOnly(t *testing.T) {
	for name, want := range map[string]bool{target.UpstreamStepped: true, target.Upstream: false, target.Impl: false, target.ImplStepped: false} {
		f := &fuzzFlags{target: name}
		if got := f.spec(nil, nil).GCOnly; got != want {
			t.Errorf("fuzz --target %s: GCOnly = %v, want %v", name, got, want)
		}
	}
}
