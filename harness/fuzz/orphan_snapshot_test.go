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
// deleted it once sts/a was gone; `cascade fuzz --target upstream-stepped
// --seed 2`, run 2.)
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

func (o orphanFirst) settleBegun(model.Step) bool { return false }

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

// begunOrphan is the model standing in for upstream-stepped at a settle,
// with the orphan passes begun and left to its own settle.
type begunOrphan struct{ *modelSystem }

func (begunOrphan) settlesAlone() bool { return true }

func (begunOrphan) settleFirst(model.Step) bool { return false }

func (b begunOrphan) settleBegun(st model.Step) bool { return st.Op == model.OpAttemptToOrphan }

// An orphan pass the proxy cannot step (job/d is queued in both work
// queues) is the real worker's already: at the final settle the model
// takes it first, on its own, with the dependents the real worker read
// (pod/p), and cm/n, whose event names job/d but came after, is deleted
// once job/d is gone, as on the real GC. The model's settle path alone
// delivers cm/n first and orphans it. (seed 1: rs/ns3/a, live on the
// model, gone on kube-controller-manager.)
func TestUpstreamSteppedSettleTakesBegunOrphanPassOnTheModel(t *testing.T) {
	r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
	r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
	r.sys = upstreamSystem{r: r, failures: map[string]int{}}
	for _, line := range []string{"create job/d owner=rs/c,uid=ghost-c", "create pod/p owner=job/d", "gc deliver job/d", "gc deliver pod/p",
		"gc attemptToDelete rs/c", "gc deliver-virtual rs/c", "delete job/d propagation=Orphan", "gc deliver job/d", "create cm/n owner=job/d"} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.s, _, err = r.m.Apply(r.s, st); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	orphan, err := model.ParseStep("gc attemptToOrphan job/d")
	if err != nil {
		t.Fatal(err)
	}
	us := r.sys.(upstreamSystem)
	if us.settleFirst(orphan) || !us.settleBegun(orphan) {
		t.Fatalf("the orphan pass of job/d, queued in both work queues: taken in lockstep %v, begun %v; want false, true", us.settleFirst(orphan), us.settleBegun(orphan))
	}
	alone, _, err := r.m.Settle(r.s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(alone.Dump(), "cm/n live") {
		t.Fatalf("the model's settle path alone: want cm/n orphaned and live, got %v", alone.Dump())
	}
	ms := &modelSystem{m: r.m, s: r.s, opts: r.opts}
	l := &lockstep{m: r.m, s: r.s, opts: r.opts, sys: begunOrphan{ms}, fail: func(kind, summary string) { t.Fatalf("%s: %s", kind, summary) }}
	l.takeFirst()
	if !slices.Equal(l.steps, []string{"gc attemptToOrphan job/d"}) {
		t.Errorf("steps before the settle path: %v, want the orphan pass of job/d", l.steps)
	}
	end, _, err := r.m.Settle(l.s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(end.Dump(), "cm/n gone") || !slices.Contains(end.Dump(), "pod/p live") {
		t.Errorf("after the settle: want pod/p orphaned and cm/n gone, got %v", end.Dump())
	}
}
