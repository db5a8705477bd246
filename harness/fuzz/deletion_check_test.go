package fuzz

import (
	"slices"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// The real GC's worker checks whether an item's node is being deleted
// when it takes the item, at once on upstream-stepped, and holds its
// GET at the proxy after that; the model's pass checks when it is taken.
// So the generator draws no delivery that marks being deleted the node
// of a queued item (cm/a, queued as the virtual owner of pod/b, then
// observed, then deleted with a finalizer holding it): after it the
// model's pass would return at once while the real one goes on
// (`--checks 200 --seed 11`, run 184). The pass itself is drawn, and
// after it the delivery.
func TestUpstreamSteppedDrawsNoDeliveryPastTheDeletionCheck(t *testing.T) {
	r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
	r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
	r.sys = upstreamSystem{r: r, failures: map[string]int{}}
	apply := func(lines ...string) {
		t.Helper()
		for _, line := range lines {
			st, err := model.ParseStep(line)
			if err != nil {
				t.Fatal(err)
			}
			if r.s, _, err = r.m.Apply(r.s, st); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
		}
	}
	enabled := func(line string) model.Step {
		t.Helper()
		for _, st := range r.m.Enabled(r.s, r.opts) {
			if st.String() == line {
				return st
			}
		}
		t.Fatalf("the model does not offer %q", line)
		return model.Step{}
	}
	apply("create cm/a finalizers=cascade.dev/hold", "create pod/b owner=cm/a", "gc deliver pod/b", "delete cm/a", "gc deliver cm/a")
	if r.steppable(enabled("gc deliver cm/a")) {
		t.Error(`"gc deliver cm/a", cm/a's deletion while its pass is queued, is drawn on upstream-stepped`)
	}
	pass := enabled("gc attemptToDelete cm/a")
	if !r.steppable(pass) {
		t.Fatal(`"gc attemptToDelete cm/a" is not drawn`)
	}
	apply(pass.String())
	if !r.steppable(enabled("gc deliver cm/a")) {
		t.Error(`after cm/a's pass, its deletion's delivery is not drawn`)
	}
}

// The rule reads only the passes the real worker is in: an item of a
// stale virtual identity (ns/default/a, a namespace named from default,
// whose node is ns/a) makes no request the delivery could change, so
// ns/a's deletion is drawn and taken in lockstep before the settle.
// (Held back, it went to the real GC's own order at the settle, and the
// real orphan pass kept ns/a's reference to itself where the model's
// removed it: `--checks 200 --seed 12`, run 16.)
func TestDeletionCheckPassesOverStaleItems(t *testing.T) {
	m, s := beforeSettle(t, "testdata/upstream-stepped-stale-item-deletion.trace")
	st, err := model.ParseStep("gc deliver ns/a")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(s.GC.AttemptToDelete, func(id model.Identity) bool { return id.Kind == "Namespace" && id.Namespace == "default" }) {
		t.Fatalf("no stale item ns/default/a queued: %v", s.GC.AttemptToDelete)
	}
	if pastDeletionCheck(m, s, st) {
		t.Error(`"gc deliver ns/a" is held back for the stale item ns/default/a`)
	}
}
