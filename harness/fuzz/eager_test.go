package fuzz

import (
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// eagerModel is the model standing in for a system that takes virtual
// delete events by itself, as upstream-stepped's real GC does: it takes
// them when the lockstep's model does (eager), not as steps of its own.
type eagerModel struct{ *modelSystem }

func (e eagerModel) takes(st model.Step) bool { return st.Op != model.OpDeliverVirtual }
func (e eagerModel) eager(st model.Step) bool { return st.Op == model.OpDeliverVirtual }

// internal takes st and then, by itself, the virtual delete events it
// queued.
func (e eagerModel) internal(st model.Step, line string) (model.Result, error, error) {
	res, notEnabled, err := e.modelSystem.internal(st, line)
	for _, v := range e.m.Enabled(e.s, e.opts) {
		if v.Op == model.OpDeliverVirtual {
			if _, ne, err := e.modelSystem.internal(v, v.String()); ne != nil || err != nil {
				return res, ne, err
			}
		}
	}
	return res, notEnabled, err
}

// A virtual delete event the system takes by itself is taken on the
// model right after the attemptToDelete that queued it, and named in the
// run's trace, so that the failure trace replays on the model.
func TestEagerVirtualDeliveryIsTakenAndTraced(t *testing.T) {
	opts := model.Options{}
	l := &lockstep{m: &model.Model{}, s: model.NewState(), opts: opts}
	sys := &modelSystem{m: &model.Model{}, s: model.NewState(), opts: opts}
	l.sys = eagerModel{sys}
	l.fail = func(kind, summary string) { t.Fatalf("%s: %s", kind, summary) }
	l.client("create pod/a owner=cm/x,uid=ghost-x")
	for range 20 {
		var next *model.Step
		for _, st := range l.m.Enabled(l.s, opts) {
			if st.Internal() && st.Op != model.OpDeliverVirtual {
				next = &st
				break
			}
		}
		if next == nil {
			break
		}
		l.take(*next)
		if len(l.s.GC.VirtualEvents) > 0 {
			t.Fatalf("after %q a virtual delete event is still queued: eager steps were not taken", next)
		}
	}
	var lines []string
	for _, w := range l.done {
		lines = append(lines, w.Commands...)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "gc deliver-virtual") {
		t.Fatalf("the trace names no virtual delivery:\n%s", strings.Join(lines, "\n"))
	}
	tr, err := traces.Parse("eager.trace", strings.NewReader(traces.Format(nil, nil, l.done)))
	if err != nil {
		t.Fatal(err)
	}
	results, _, err := traces.Replay(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := traces.Diff(tr, results); err != nil {
		t.Fatalf("the trace does not replay on the model: %v", err)
	}
}

// TestLockstepRecordsKnownRaces: a stepped run that passes through a
// known upstream race (kubernetes#26120's unobserved dependent, as
// races/kubernetes-26120.trace takes it) records the race, in
// fuzz.Report.Known's form, where it used to drop it: the run passes, and
// the report names what it passed through.
func TestLockstepRecordsKnownRaces(t *testing.T) {
	opts := model.Options{}
	l := &lockstep{m: &model.Model{}, s: model.NewState(), opts: opts}
	l.sys = &modelSystem{m: &model.Model{}, s: model.NewState(), opts: opts}
	if failed := l.guard(func() {
		l.script([]string{
			"create rc/owner replicas=1 selector=app=unseen",
			"create pod/unseen labels=app=unseen owner=rc/owner,controller",
			"gc deliver rc/owner",
			"delete rc/owner propagation=Orphan",
			"gc deliver rc/owner",
			"gc attemptToOrphan rc/owner",
		})
	}); failed != nil {
		t.Fatalf("%s: %s", failed.kind, failed.summary)
	}
	if len(l.known) == 0 || !strings.HasPrefix(l.known[0], model.KnownUnobservedDependent+" (on lockstep): ") || !slices.Equal(l.knownIDs, []string{model.KnownUnobservedDependent}) {
		t.Fatalf("known: %q, races %q", l.known, l.knownIDs)
	}
}
