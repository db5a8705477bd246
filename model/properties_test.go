package model

import (
	"slices"
	"testing"
)

// TestAlwaysForRunsWhatStepsAccept: CheckTransition runs, for a step of
// any actor, op and GC write, exactly the Always properties whose Steps
// accept it (all of them when Steps is unset), in catalogue order, less
// the StoreOnly ones when the store is unchanged, and StepsAccept (which
// the checker uses for Sometimes properties) names exactly the properties
// whose Steps accept it; the fields other than Actor, Op and Write, which
// the tables do not look at, change nothing.
func TestAlwaysForRunsWhatStepsAccept(t *testing.T) {
	for a := ActorClient; a <= ActorAPIExtensions; a++ {
		for op := OpCreate; op <= OpCleanup; op++ {
			for w := WriteDelete; w <= WriteUnblock; w++ {
				st := &Step{Actor: a, Op: op, Write: w, Target: Target{Kind: 0, Namespace: DefaultNamespace, Name: "x"}, UIDLabel: "x", Finalizer: "a.io/f"}
				var accept uint64
				for i := range Properties {
					if p := &Properties[i]; p.Steps == nil || p.Steps(st) {
						accept |= 1 << i
					}
				}
				if got := StepsAccept(st); got != accept {
					t.Errorf("%s %d write %d: StepsAccept is %b, want %b", a, op, w, got, accept)
				}
				for _, same := range []bool{false, true} {
					var want []int
					for i := range Properties {
						p := &Properties[i]
						if p.Kind == Always && (!same || !p.StoreOnly) && (p.Steps == nil || p.Steps(st)) {
							want = append(want, i)
						}
					}
					if got := alwaysFor(st, same); !slices.Equal(got, want) {
						t.Errorf("%s %d write %d same=%v: alwaysFor runs %v, want %v", a, op, w, same, got, want)
					}
				}
			}
		}
	}
	// a GC DELETE send is checked by the properties reading its target;
	// a controller step is not
	del := alwaysFor(&Step{Actor: ActorGC, Op: OpSend, Write: WriteDelete}, false)
	adopt := alwaysFor(&Step{Actor: ActorController, Op: OpAdopt}, false)
	for _, name := range []string{PropNoSolidOwnerCollected, PropOrphanRespected, PropNeverSilentlyOrphaned, PropNoRemovalWithFinalizers} {
		i := slices.IndexFunc(Properties, func(p Property) bool { return p.Name == name })
		if !slices.Contains(del, i) || slices.Contains(adopt, i) {
			t.Errorf("%q: runs on a GC delete %v, on an adopt %v; want true, false", name, slices.Contains(del, i), slices.Contains(adopt, i))
		}
	}
	// a cycle is broken only by an unblock patch
	i := slices.IndexFunc(Properties, func(p Property) bool { return p.Name == PropCycleBroken })
	if StepsAccept(&Step{Actor: ActorGC, Op: OpSend, Write: WriteUnblock})&(1<<i) == 0 || StepsAccept(&Step{Actor: ActorGC, Op: OpSend, Write: WriteDelete})&(1<<i) != 0 {
		t.Errorf("StepsAccept: %q is not exactly for unblock sends", PropCycleBroken)
	}
}
