package fuzz

import (
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/cascade-k8s/cascade/harness/lin"
)

// TestUndecidedHistoryIsNoFailure: a history the checker could not decide
// in time (issue 20: a kubeconfig run's check ran out of its minute) is
// no verdict on the target. The run does not fail, so rapid has nothing
// to shrink, and it is kept as inconclusive with the checker's summary;
// an illegal history fails the run.
func TestUndecidedHistoryIsNoFailure(t *testing.T) {
	var failed []string
	r := &concurrentRun{fail: func(kind, _ string, _ func(string) (string, error)) { failed = append(failed, kind) }}
	undecided := "Inconclusive: the checker could not decide within 1m0s whether the 240 operations are linearizable; this is no verdict on the system under test."
	r.judge(lin.Result{Verdict: porcupine.Unknown, Summary: undecided})
	if len(failed) != 0 || r.undecided != undecided {
		t.Fatalf("an undecided history: want no failure and the run inconclusive, got failures %v, undecided %q", failed, r.undecided)
	}
	r = &concurrentRun{fail: r.fail}
	r.judge(lin.Result{Verdict: porcupine.Illegal, Summary: "Illegal: op 3 ..."})
	if !slices.Equal(failed, []string{"linearizability"}) || r.undecided != "" {
		t.Fatalf("an illegal history: want a linearizability failure, got failures %v, undecided %q", failed, r.undecided)
	}
}
