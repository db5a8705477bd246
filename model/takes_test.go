package model

import "testing"

// TestEnabledGCStepsTake: Apply takes every GC delivery, relist skip,
// lost update, discovery sync, virtual delete event and work item that
// Enabled lists, on every state a bounded search reaches from setups with
// odd references, bug switches, a foreground cycle and a reused name (two
// queued items with one key): the checker counts a sleeping step's
// transition without applying it. And for every such step, enabled or
// not, gcPrecondition says exactly whether Apply takes it (applyGC
// refuses nothing once it holds), which is why the enabled ones take: the
// steps tried are the enabled ones and, for every object and queued
// identity, each GC step on its key, most of which are not enabled.
func TestEnabledGCStepsTake(t *testing.T) {
	setups := []struct {
		bugs    BugSet
		cmds    []string
		clients []string
	}{
		{BugSet(0).With(BugUIDOnlyIdentity).With(BugLostFirstUpdate), []string{"create crd/widgets.cascade.dev", "create widget/w", "create rc/o replicas=2 selector=app=a",
			"create pod/p finalizers=a.io/h labels=app=a,b=c owner=rc/o,block", "create pv/v",
			"create cm/ns1/c owner=pv/v owner=widget/w,uid=widget/w", "create cm/g owner=Frob/f,uid=ghost owner=rc/o,controller"},
			[]string{"delete rc/o propagation=Foreground", "delete pv/v", "delete crd/widgets.cascade.dev", "label pod/p x=y"}},
		{0, []string{"create cm/a", "create cm/b owner=cm/a,block", "add-owner cm/a cm/b,block"},
			[]string{"delete cm/a propagation=Foreground", "delete cm/b propagation=Orphan"}},
		{0, []string{"create cm/a", "create cm/b owner=cm/a", "delete cm/a", "create cm/a", "create cm/c owner=cm/a"},
			[]string{"delete cm/a", "delete cm/c propagation=Orphan"}},
	}
	var took, refused int
	for _, su := range setups {
		m := &Model{Bugs: su.bugs}
		s, _ := run(t, m, su.cmds...)
		var clients []Step
		for _, c := range su.clients {
			clients = append(clients, mustStep(t, c))
		}
		seen := map[string]bool{string(s.Encode(nil)): true}
		queue := []*State{s}
		for len(queue) > 0 && len(seen) < 1500 {
			s := queue[0]
			queue = queue[1:]
			steps := append(m.Enabled(s, Options{Coalesce: true}), clients...)
			var tries []Step
			for _, key := range gcKeys(s) {
				for _, verb := range []string{"deliver", "deliver-virtual", "coalesce", "lose", "attemptToDelete", "attemptToOrphan"} {
					st, err := ParseStep("gc " + verb + " " + key)
					// (a queue verb on an unserved kind, which has no
					// queue, panics in Apply as in gcPrecondition: not
					// tried)
					if err == nil && (st.Target.Kind != NoKind || st.Op == OpDeliverVirtual || st.Op == OpAttemptToDelete || st.Op == OpAttemptToOrphan) {
						tries = append(tries, st)
					}
				}
			}
			tries = append(tries, mustStep(t, "gc sync"))
			for i, st := range append(steps, tries...) {
				// known: a GC step with a precondition
				known, perr := false, error(nil)
				if st.Actor == ActorGC {
					known, _, _, perr = m.gcPrecondition(s, &st)
				}
				takes := perr == nil
				n, _, err := m.ApplyStep(s, &st)
				if known {
					if takes != (err == nil) {
						t.Fatalf("%s: the precondition says %v, Apply: %v", st, perr, err)
					}
					if i < len(steps) && !takes {
						t.Fatalf("%s is enabled, but Apply refuses it: %v", st, err)
					}
					if takes {
						took++
					} else {
						refused++
					}
				}
				if err != nil || i >= len(steps) {
					continue
				}
				if k := string(n.Encode(nil)); !seen[k] {
					seen[k] = true
					queue = append(queue, n)
				}
			}
		}
	}
	t.Logf("the precondition held %d times, failed %d times", took, refused)
	if took == 0 || refused == 0 {
		t.Errorf("the precondition held %d times and failed %d times: both must be tried", took, refused)
	}
}

// gcKeys lists the keys of a state's objects and of the identities its
// GC queues and graph hold, for the GC steps the test tries on each.
func gcKeys(s *State) []string {
	var keys []string
	for i := range s.Objects {
		keys = append(keys, TargetOf(&s.Objects[i]).String())
	}
	for _, ids := range [][]Identity{s.GC.AttemptToDelete, s.GC.AttemptToOrphan, s.GC.VirtualEvents} {
		for i := range ids {
			keys = append(keys, identTarget(ids[i]).String())
		}
	}
	return keys
}
