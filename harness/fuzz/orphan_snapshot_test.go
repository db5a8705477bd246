package fuzz

import (
	"slices"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// orphanQueued is a run on upstream-stepped whose model has sts/a, being
// deleted with the orphan policy, queued for attemptToOrphan, while the
// event that makes cm/a its dependent is not yet delivered.
func orphanQueued(t *testing.T) *steppedRun {
	t.Helper()
	r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
	r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
	r.sys = upstreamSystem{r: r, failures: map[string]int{}}
	for _, line := range []string{"create sts/a", "create cm/a", "create pod/b", "gc deliver sts/a", "gc deliver cm/a",
		"add-owner cm/a sts/a,block", "delete sts/a propagation=Orphan", "gc deliver sts/a"} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.s, _, err = r.m.Apply(r.s, st); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	if !slices.ContainsFunc(r.m.Enabled(r.s, r.opts), func(st model.Step) bool { return st.String() == "gc attemptToOrphan sts/a" }) {
		t.Fatal("the model has not queued sts/a for attemptToOrphan")
	}
	return r
}

// The real GC's attemptToOrphanWorker reads the owner's dependents from
// its graph when it takes the owner from the queue, which on
// upstream-stepped (idle workers) is the moment the owner's deletion
// reaches the graph builder; the proxy holds only its requests after
// that. The model's attemptToOrphan step reads them when it is taken. So
// the generator draws no delivery that changes the dependents of an
// owner queued for attemptToOrphan: here cm/a's update that names sts/a.
// (A run that delivered it diverged at its settle: the model orphaned
// cm/a, the real GC, which had not seen cm/a as sts/a's dependent,
// deleted it once sts/a was gone; testdata/open/seed2-run2.trace.)
// Another object's delivery is drawn.
func TestUpstreamSteppedDrawsNoDeliveryPastTheOrphanSnapshot(t *testing.T) {
	r := orphanQueued(t)
	enabled := func(line string) model.Step {
		i := slices.IndexFunc(r.m.Enabled(r.s, r.opts), func(st model.Step) bool { return st.String() == line })
		if i < 0 {
			t.Fatalf("the model does not offer %q", line)
		}
		return r.m.Enabled(r.s, r.opts)[i]
	}
	if r.steppable(enabled("gc deliver cm/a")) {
		t.Error(`"gc deliver cm/a", which makes cm/a a dependent of sts/a queued for orphaning, is drawn on upstream-stepped`)
	}
	if !r.steppable(enabled("gc deliver pod/b")) {
		t.Error(`"gc deliver pod/b", no dependent of sts/a, is not drawn`)
	}
	if !r.steppable(enabled("gc attemptToOrphan sts/a")) {
		t.Error(`"gc attemptToOrphan sts/a" is not drawn`)
	}
}

// orphanFirst is the model standing in for upstream-stepped at a settle:
// it settles by itself and has begun the queued orphan passes.
type orphanFirst struct{ *modelSystem }

func (orphanFirst) settlesAlone() bool { return true }

func (o orphanFirst) settleFirst(st model.Step) bool { return st.Op == model.OpAttemptToOrphan }

// A run's final settle on upstream-stepped takes the steps the proxy can
// produce first, in lockstep, the queued orphan passes among them, and
// then the model's settle path:
// the real worker orphans the dependents it read when sts/a was queued
// (none), and cm/a, delivered after, names an owner that is gone and is
// deleted. The model's settle path alone delivers cm/a first and orphans
// it.
func TestUpstreamSteppedSettleTakesBegunOrphanPassesFirst(t *testing.T) {
	r := orphanQueued(t)
	st, err := model.ParseStep("gc attemptToOrphan sts/a")
	if err != nil {
		t.Fatal(err)
	}
	us := r.sys.(upstreamSystem)
	if !us.settleFirst(st) {
		t.Fatal("upstream-stepped does not take the queued orphan pass of sts/a first at a settle")
	}
	// every other step the proxy can produce is taken in lockstep too, in
	// the model's order, rather than in the real GC's own (a settle of
	// seed 2 ended apart from the model's: the real GC's unblock of pod/a,
	// built from a graph that had not seen the orphaning, put back the
	// reference the orphaning removed, the known stale-graph race, where
	// the model's order left it removed)
	for line, want := range map[string]bool{"gc deliver pod/b": true, "gc deliver cm/a": false} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if us.settleFirst(st) != want {
			t.Errorf("%q taken in lockstep before the settle: %v, want %v", line, !want, want)
		}
	}
	alone, _, err := r.m.Settle(r.s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(alone.Dump(), "cm/a live") {
		t.Fatalf("the model's settle path alone: want cm/a orphaned and live, got %v", alone.Dump())
	}
	ms := &modelSystem{m: r.m, s: r.s, opts: r.opts}
	l := &lockstep{m: r.m, s: r.s, opts: r.opts, sys: orphanFirst{ms}, fail: func(kind, summary string) { t.Fatalf("%s: %s", kind, summary) }}
	l.settle()
	if len(l.steps) == 0 || l.steps[0] != "gc attemptToOrphan sts/a" {
		t.Errorf("steps before the settle: want the orphan pass of sts/a, got %v", l.steps)
	}
	if slices.Contains(l.s.Dump(), "cm/a live") {
		t.Errorf("after the settle cm/a is live (orphaned): %v", l.s.Dump())
	}
}
