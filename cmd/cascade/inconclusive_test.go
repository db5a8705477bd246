package main

import (
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/harness/fuzz"
)

// TestFuzzInconclusiveIsNoFailure: a run whose history the checker could
// not decide is printed as inconclusive, with no FAILED line and no
// shrink line (issue 20 printed "FAILED (error) ... shrunk to 164 steps"
// after no shrinking), and exits 3, apart from a failure's 1.
func TestFuzzInconclusiveIsNoFailure(t *testing.T) {
	rep := &fuzz.Report{Target: "kubeconfig", Mode: "concurrent", Checks: 4, Steps: 120, Ops: 900,
		Undecided: []string{"run 2 (31 steps, 240 ops): Inconclusive: the checker could not decide within 1m0s whether the 240 operations are linearizable; this is no verdict on the system under test."}}
	var b strings.Builder
	if err := printFuzz(&b, summary{Reproduce: "cascade fuzz --seed 1"}, rep, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "INCONCLUSIVE run 2 (31 steps, 240 ops): Inconclusive: the checker could not decide") ||
		strings.Contains(out, "FAILED") || strings.Contains(out, "shrunk") {
		t.Errorf("want the run inconclusive, without FAILED or shrunk, got:\n%s", out)
	}
	if code := fuzzResult(rep).(*exitError).code; code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if s := newFuzzSummary(summary{}, rep); s.Result != summaryInconclusive || len(s.Inconclusive) != 1 {
		t.Errorf("--json: result %q, inconclusive runs %v", s.Result, s.Inconclusive)
	}
	rep.Failure = &fuzz.Failure{Kind: "liveness", Summary: "stuck"}
	if code := fuzzResult(rep).(*exitError).code; code != 1 {
		t.Errorf("with a failure too: exit code %d, want 1", code)
	}
}
