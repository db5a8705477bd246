package fuzz

import (
	"slices"
	"strings"
	"testing"
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
