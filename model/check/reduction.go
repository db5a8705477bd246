package check

import "github.com/cascade-k8s/cascade/model"

// Partial-order reduction: sleep sets over the two processes that never
// touch each other's state.
//
// Why sleep sets, and why these two. The search is a breadth-first search
// whose promises are (1) every reachable state is checked, so every
// quiescent-liveness violation (a property of a quiescent state) is found;
// (2) every transition that can break or witness a property is checked;
// (3) a counterexample is as short as any (BFS minimality). Stubborn or
// ample sets would cut states, which breaks (1) unless a visibility and a
// cycle proviso are added, and even then a quiescent state is one where
// the internal steps have run out, which an ample set may reach by a
// longer path, breaking (3). Sleep sets cut transitions only: with the
// argument below, every reachable state is still reached at its BFS
// depth, so (1) and (3) hold as they are and the distinct-state count
// does not change (TestReductionKeepsStates).
//
// The independence relation is deliberately small. The garbage
// collector's internal steps that leave the API store as it was (gcSleepable:
// informer deliveries, relist coalescing, lost updates, virtual events,
// discovery sync) read and
// write only the GC's own state (its informer queues, cache, graph, work
// queues and writes in flight) and read the store. A controller's
// informer delivery or relist coalescing (putsGCToSleep) pops only the
// controller's informer queue. Such a pair
// therefore commutes, neither enables nor disables the other, and the GC
// step changes nothing a property reads (every Always property is
// StoreOnly; no Sometimes property that reads more than the store accepts
// these steps): TestIndependenceHolds checks all three on every reachable
// state of every preset and of sample universes. Steps inside one process
// share its queues and graph, and every step that writes the store
// (client requests, the GC's sends, attemptToOrphan, adoption, CRD
// cleanup, and attemptToDelete, which writes the store itself in some
// branches: TestIndependenceHolds caught it) appends to both processes'
// informer queues, so no other pair is taken as independent.
//
// With one pair of processes and the order "GC step < controller step",
// the sleep set of a state is either empty or every enabled GC-sleepable
// step, so it is one bit: a state is asleep when every transition that
// reached it at its BFS level was a controller delivery (or coalescing),
// and then its GC-sleepable steps are not taken. The bit rides in bit 0
// of the fingerprint (seenTable's flagged mode: fingerprints are 63 bits
// then) and is the AND over all arrivals at the state's first level; a
// later, deeper arrival does not matter.
//
// Soundness (every reachable state is reached at its BFS depth). Order
// steps by any total order with every GC-sleepable step below every
// controller delivery, and paths of equal length lexicographically. Take
// a reachable state v and the least of its shortest paths, w = w1 a w2.
// Its prefixes are least shortest paths too, so by induction w1 is
// explored and reaches t = end(w1) at t's BFS level. If a were pruned at
// t, t would be asleep, so the arrival by w1 = w1' c has c a controller
// delivery and a is a GC-sleepable step enabled at t, hence (it is
// independent of c) enabled at p = end(w1') too, and w1' a c w2 reaches v
// by a path as short and lexicographically smaller (a < c): contradiction.
// So w is explored and v is reached at its BFS depth. The pruned
// transitions are GC-sleepable steps, which break and witness nothing, so
// every transition that could is still checked from every reachable
// state; a counterexample keeps its BFS length, though where several
// paths of that length exist it may show another one than the unreduced
// search would.
//
// Symmetry is unaffected: neither kind of step creates a UID, so a state
// reached by one is canonical already and the steps' names mean the same
// in both orders. Constraints are unaffected too: a commuted path passes
// through other states, which a constraint might refuse, so a scope with
// constraints is searched unreduced.

// gcSleepable reports whether st is a GC step that leaves the store as it
// was and touches no controller state: the steps a sleep set may hold.
func gcSleepable(st *model.Step) bool {
	if st.Actor != model.ActorGC {
		return false
	}
	switch st.Op {
	case model.OpDeliver, model.OpDeliverVirtual, model.OpCoalesce, model.OpLose, model.OpSync:
		return true
	}
	return false
}

// putsGCToSleep reports whether st is a controller informer step, which
// touches only the controller's informer queue: after it, the GC steps
// that were enabled before it (and only those) are enabled, and taking
// them first reaches the same states.
func putsGCToSleep(st *model.Step) bool {
	return st.Actor == model.ActorController && (st.Op == model.OpDeliver || st.Op == model.OpCoalesce)
}

// reductionApplies reports whether the scope may be searched with sleep
// sets: it asks for them, has no constraints, and the properties are such
// that a GC-sleepable step can neither break nor witness one.
func reductionApplies(scope Scope) bool {
	if !scope.Reduction || len(scope.Constraints) > 0 {
		return false
	}
	probe := []model.Step{}
	for _, op := range []model.Op{model.OpDeliver, model.OpDeliverVirtual, model.OpCoalesce, model.OpLose, model.OpSync} {
		probe = append(probe, model.Step{Actor: model.ActorGC, Op: op})
	}
	for i := range model.Properties {
		p := &model.Properties[i]
		if p.Kind == model.Quiescent || p.StoreOnly {
			continue
		}
		if p.Steps == nil {
			return false
		}
		for j := range probe {
			if p.Steps(&probe[j]) {
				return false
			}
		}
	}
	return true
}

// flagFingerprint makes h a fingerprint of a flagged table: bit 0 is set
// when the state is awake (reached by a transition after which every
// step must be taken). Fingerprint 0 and 1 are kept free for the empty
// slot.
func flagFingerprint(h uint64, awake bool) uint64 {
	h &^= 1
	if h == 0 {
		h = 2
	}
	if awake {
		h |= 1
	}
	return h
}
