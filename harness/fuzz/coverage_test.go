package fuzz

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestCoverageCountsTraceLanguage: each step counts under its verb and
// kind, its options, its policy; Missed names what no step reached.
func TestCoverageCountsTraceLanguage(t *testing.T) {
	c := NewCoverage()
	c.record([]string{
		"create cm/a labels=policy.kruise.io/delete-protection=Cascading finalizers=cascade.dev/hold",
		"create pod/ns2/p owner=cm/a,controller=unset,block=unset owner=pv/v,block owner=Frob/f,uid=ghost as=limited",
		"delete cm/a orphan=false if-uid=cm/a dry-run",
		"add-owner cm/a cm/a,controller",
		"gc attemptToDelete cm/a",
		"settle",
	})
	if c.Runs != 1 || c.Steps != 5 {
		t.Fatalf("runs %d steps %d, want 1 and 5", c.Runs, c.Steps)
	}
	for _, want := range []string{"create protection=Cascading", "create finalizers=", "owner ,controller=unset", "owner ,block=unset",
		"owner other namespace", "owner cluster-scoped", "owner unserved kind", "owner self", "owner ,uid=SYMBOL", "as=limited",
		"delete if-uid=", "delete dry-run"} {
		if c.option[want] != 1 {
			t.Errorf("option %q counted %d times, want 1", want, c.option[want])
		}
	}
	if c.policy["orphan=false"] != 1 || c.internal["gc attemptToDelete"] != 1 || c.verbKind[[2]string{"create", "pod"}] != 1 {
		t.Errorf("policy, internal step or verb × kind not counted: %v %v %v", c.policy, c.internal, c.verbKind)
	}
	missed := c.Missed(true)
	for _, want := range []string{"scale", "create rs", "delete pod", "owner same namespace", "delete propagation=Foreground", "gc sync"} {
		if !slices.Contains(missed, want) {
			t.Errorf("Missed() lacks %q: %v", want, missed)
		}
	}
	for _, reached := range []string{"create cm", "delete cm", "create pod", "as=limited"} {
		if slices.Contains(missed, reached) {
			t.Errorf("Missed() names %q, which a step reached", reached)
		}
	}
	var b strings.Builder
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "coverage: 1 runs, 5 steps") || !strings.Contains(b.String(), "not reached (") {
		t.Errorf("table:\n%s", b.String())
	}
}

// faultOnly are internal steps a default run cannot take: informer faults
// that only their switches enable, and the controllers' informer relist,
// which no run offers.
var faultOnly = []string{"gc coalesce", "gc lose", "controller coalesce"}

// TestGeneratorCoverage: default generation reaches every client verb,
// every kind (created and deleted), every option and policy of the trace
// language, in the programs of a default 200-run concurrent campaign
// (drawn without a cluster: DrawConcurrent) and in 200 stepped runs on
// the model, which also reach every internal step but the faults'.
// Concurrent runs do not delete CRDs (their histories cannot span it).
// CASCADE_COVERAGE=1 logs both tables.
func TestGeneratorCoverage(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs *= 5 // rapid runs a fifth of its checks under -short (and halves their steps)
	}
	conc := NewCoverage()
	cfg := Config{Checks: runs, Steps: 30, Seed: 1, Clients: 4, Universe: DefaultUniverse, Coverage: conc}
	if err := DrawConcurrent(ConcurrentEnv{Limited: &rest.Config{}}, cfg); err != nil {
		t.Fatal(err)
	}
	stepped := NewCoverage()
	env := SteppedEnv{Target: "model", AdopterKinds: SteppedAdopterKinds}
	rep, err := RunStepped(context.Background(), env, Config{Checks: runs, Steps: 30, Seed: 1, ShrinkTime: time.Millisecond, Universe: DefaultUniverse, Coverage: stepped})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("a stepped run of the model against itself failed: %s", rep.Failure.Summary)
	}
	for _, c := range []struct {
		name     string
		cov      *Coverage
		internal bool
		cannot   []string
	}{
		// a concurrent run's history cannot span a CRD's delete, whose
		// removal of its resources the audit log does not record
		{"concurrent", conc, false, []string{"delete crd"}},
		{"stepped", stepped, true, faultOnly},
	} {
		if os.Getenv("CASCADE_COVERAGE") != "" {
			var b strings.Builder
			_ = c.cov.Write(&b)
			t.Logf("%s:\n%s", c.name, b.String())
		}
		missed := slices.DeleteFunc(c.cov.Missed(c.internal), func(m string) bool { return slices.Contains(c.cannot, m) })
		if len(missed) > 0 {
			t.Errorf("%s generation never reached: %s", c.name, strings.Join(missed, "; "))
		}
	}
}
