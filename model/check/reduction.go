package check

import "github.com/cascade-k8s/cascade/model"

// Partial-order reduction: sleep sets over the GC's steps that leave the
// store as it was.
//
// Why sleep sets. The search is a breadth-first search whose promises are
// (1) every reachable state is checked, so every quiescent-liveness
// violation (a property of a quiescent state) is found; (2) every
// transition that can break or witness a property is checked; (3) a
// counterexample is as short as any (BFS minimality). Stubborn or ample
// sets would cut states, which breaks (1) unless a visibility and a cycle
// proviso are added, and even then a quiescent state is one where the
// internal steps have run out, which an ample set may reach by a longer
// path, breaking (3). Sleep sets cut transitions only: with the argument
// below, every reachable state is still reached at its BFS depth, so (1)
// and (3) hold as they are and the distinct-state count does not change
// (TestReductionKeepsStatesAndViolations).
//
// What may sleep. Only GC steps that leave the store as it was: the
// delivery (or lost update) of an informer queue's head, the delivery of
// the head virtual delete event, discovery sync, and attemptToDelete of an
// item whose node is not deleting dependents (which would remove the
// foreground finalizer: TestIndependenceHolds caught the old relation
// missing that). Every Always property is StoreOnly and no Sometimes
// property that reads more than the store accepts these steps
// (reductionApplies), so a skipped one breaks and witnesses nothing.
// Relist coalescing, attemptToOrphan and the GC's sends write the store
// or may reach the same state as a delivery; they and every other actor's
// steps never sleep, but other steps may sleep after them.
//
// The relation (commute, in independence.go). The model's GC state decides it:
// the informer queues are FIFO per kind (one delivery per kind enabled),
// the virtual events one FIFO, the work queues and the absentOwnerCache
// sets sorted by UID (inserts commute), the graph one node per UID whose
// dependents lists are written by the deliveries of the dependents. So a
// step's footprint is a set of UIDs (a bit each, all bits for a UID past
// 63): a node and its queue membership. Pairs taken as independent in a
// state p, each with what it reads and writes:
//   - anything sleepable after a controller delivery or relist skip,
//     which pops the controller's queue only;
//   - a delivery or virtual event after a client request, an adoption or
//     a release: those write the store and append to queues' tails; a
//     delivery reads neither the store nor a queue past its head;
//   - two deliveries of different kinds, or one and the virtual event,
//     when their footprints are disjoint (deliverUses: the object's node,
//     its owners' when its references change, its dependents' when it
//     reads or queues them);
//   - a delivery or virtual event and an item, when the item's node and
//     queue membership are not in the delivery's footprint, the delivery
//     adds no absentOwnerCache entry the item's owners read, and removes,
//     creates or marks no node among the item's dependents (the cycle
//     check reads those marks);
//   - two items whose owners (the absentOwnerCache keys they read and
//     write) are disjoint and of which at most one may queue a virtual
//     delete event (a FIFO: two appends do not commute);
//   - an item and a store write (client request, adoption, release, GC
//     send) whose target is none of the objects the item's live GETs read
//     (keys: a hash of kind and name, so a collision only makes the
//     relation smaller); with a send, not both able to queue a virtual
//     event; creates and CRD and namespace deletes are dependent on all;
//   - a delivery or virtual event and a GC send not touching its footprint.
// TestIndependenceHolds checks every pair the relation puts to sleep on
// every reachable state (up to a bound) of every preset, bug preset and
// universe: the sleeping step is the same step in c(p) (matched by item,
// whatever uid= its name needs there), leaves the store as it was in p
// and in c(p), c is enabled in a(p), and a(c(p)) = c(a(p)). Dropping any
// one condition above makes it fail.
//
// Sleep sets. A state's steps are ordered (rank) as the search numbers
// them: client requests in op order, then the model's steps in
// AppendEnabled's order (the GC's deliveries by kind, the virtual event,
// sync, attemptToOrphan, attemptToDelete in queue order, sends, then the
// controller's and apiextensions' steps). The sleep set an arrival (p, c) gives t = c(p) holds every
// step a of p that commutes with c and is below it; and, when a was
// asleep in p, a delivery that is the only step popping its queue (no
// relist skip, no lost update enabled) or the virtual event even when it
// is above c. A state's sleep set is the AND over its arrivals at its
// BFS level (a later, deeper arrival does not matter), and its steps in
// it are skipped. It is a sleepMask, a bit per class, kept complemented
// (awake) beside the fingerprint in the visited set and the frontier,
// where arrivals OR it.
//
// Soundness (every reachable state is reached at its BFS depth). Order
// paths of equal length lexicographically by the ranks. Every prefix of a least shortest path is a
// least shortest path, so the least shortest paths form a tree, and it
// is enough that no tree edge is skipped: then every state is reached at
// its BFS depth by its tree path. Invariant: for every a asleep in a
// state x reached at its BFS level, the edge x -a-> is not a tree edge,
// i.e. pi(a(x)) != pi(x) a, where pi is the least shortest path. It holds
// at the roots (nothing asleep). Take t and a asleep in t; one of the
// arrivals the AND is over is t's tree edge, pi(t) = pi(p) c, so a is in
// that arrival's set: a commutes with c in p, and a(t) = c(a(p)).
// Suppose pi(a(t)) = pi(p) c a. If a < c, pi(p) a c reaches a(t) as
// short and smaller: contradiction. Else a was asleep in p and inherited,
// so pi(a(p)) != pi(p) a by the invariant at p. pi(a(p)) c reaches a(t),
// so a(p) is at depth |pi(p)|+1 and pi(a(p)) < pi(p) a. If they differ
// before their last step, pi(a(p)) c < pi(p) c a: contradiction. Else
// pi(a(p)) = pi(p) b with b != a and b(p) = a(p): another step of p
// reaches a's state, which the inherited steps exclude (only a delivery
// pops its queue, and no relist skip or lost update of that queue is
// enabled; only the virtual delivery pops the virtual FIFO;
// TestIndependenceHolds checks it). The skipped transitions break and
// witness nothing, so every transition that could is still checked from
// every reachable state.
//
// Counterexamples. The search records for each state its smallest
// (level, parent's frontier position, action) and orders each level's
// frontier by it, so the recorded path of a state is its least shortest
// path in exactly this order: by induction on the level, the tree edges
// are never skipped, every other arrival has a larger ord, so every
// state's ord and frontier position, and every counterexample, are the
// unreduced search's (TestReductionKeepsStatesAndViolations compares
// them step by step). The order is why a delivery does not sleep right
// after a client request (requests come first), only after one it slept
// before already.
//
// Symmetry. The sleeping steps create no UID, and their classes are
// named by kind and by the item's place in the attemptToDelete queue of
// c(p) before canonicalisation: a successor that keeps its parent's UID
// table is canonical already, and the one step that adds UIDs (a create)
// puts no item to sleep (explore drops item classes then all the same).
// Constraints: a commuted path passes through other states, which a
// constraint might refuse, so a scope with constraints is searched
// unreduced.

// sleepMask is a sleep set: a set of sleep classes, one bit each. A class
// names at most one enabled step of a state, so a set of classes is a set
// of steps:
//   - bit k < model.NumKinds: the GC's delivery (or lost update) of the
//     head event of its kind-k informer queue;
//   - sleepVirtual: the GC's delivery of the head virtual delete event;
//   - sleepSync: the GC's discovery sync;
//   - sleepItem+i: attemptToDelete of the i-th item of the state's
//     attemptToDelete queue (a set sorted by UID), for i < sleepItems.
//
// Relist coalescing, attemptToOrphan, the GC's sends and every step of
// another actor have no class: they never sleep.
type sleepMask uint32

const (
	sleepVirtual = model.NumKinds
	sleepSync    = model.NumKinds + 1
	sleepItem    = model.NumKinds + 2
	sleepItems   = 32 - sleepItem
	// sleepAll is the sleep set nothing has narrowed yet; a state's set is
	// the AND over its arrivals, so the visited set stores the complement
	// (awake) and ORs it.
	sleepAll = ^sleepMask(0)
	// sleepItemClasses are the item classes
	sleepItemClasses = sleepMask(1<<32 - 1<<sleepItem)
)

// sleepAfter is the sleep set of n = c(p) from this arrival: the classes,
// in n, of p's steps that commute with c and are below it, or inherited
// from p's sleep set zp. infos are p's steps.
func sleepAfter(infos []sleepStep, c *sleepStep, n *model.State, zp sleepMask) sleepMask {
	var z sleepMask
	if c.role == roleNone || c.role == roleSync {
		return 0
	}
	for i := range infos {
		a := &infos[i]
		if a.bit < 0 || !(a.rank < c.rank || a.inherit && zp&(1<<a.bit) != 0) || !commute(a, c) {
			continue
		}
		if a.role != roleItem || c.role == roleCtlInform || c.role == roleStoreWrite {
			// a class named in n as in p: those steps leave the GC's
			// queues but the informers' as they were
			z |= 1 << a.bit
			continue
		}
		// the item's place in n's queue (c may have queued or taken others)
		q := n.GC.AttemptToDelete
		if j, found := model.IdentIndex(q, a.item); found && j < sleepItems {
			z |= 1 << (sleepItem + j)
		}
	}
	return z
}

// reductionApplies reports whether the scope may be searched with sleep
// sets: it asks for them, has no constraints, and the properties are such
// that a GC-sleepable step can neither break nor witness one.
func reductionApplies(scope Scope) bool {
	return scope.Reduction && len(scope.Constraints) == 0 && sleepersSilent()
}

// sleepersSilent reports whether the properties are such that a
// GC-sleepable step, which leaves the store as it was, can neither break
// nor witness one: each is StoreOnly, Quiescent, or has Steps that
// rejects every sleepable op.
func sleepersSilent() bool {
	probe := []model.Step{}
	for _, op := range []model.Op{model.OpDeliver, model.OpDeliverVirtual, model.OpLose, model.OpSync, model.OpAttemptToDelete} {
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
