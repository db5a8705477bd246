package check

import (
	"cmp"
	"slices"

	"github.com/cascade-k8s/cascade/model"
)

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
// The relation (independent, commute). The model's GC state decides it:
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

// What a step is, for the independence relation.
const (
	roleNone       = iota // dependent on everything
	roleDeliver           // gc deliver or lose of a kind queue's head
	roleVirtual           // gc deliver-virtual
	roleSync              // gc sync
	roleItem              // gc attemptToDelete of an item not deleting dependents
	roleCtlInform         // controller deliver or coalesce
	roleStoreWrite        // client request, controller adopt or release
	roleSend              // gc send of an item's next write
)

// sleepStep is what the independence relation reads of one step enabled
// in a state p, all computed from p.
type sleepStep struct {
	role int8
	bit  int8 // sleep class in p, -1 for none
	// rank orders the steps of p for the proof's order: the explorer's
	// action order (client requests in op order, then the model's steps
	// as AppendEnabled lists them).
	rank int32
	// uses: the graph nodes the step reads or writes, as a set of UIDs
	// (usesAll when one is too large to name). For an attemptToDelete item
	// it includes the owners its live GET reads, whose absentOwnerCache
	// entries it reads.
	uses uint64
	// item: an attemptToDelete item's UID; owners: the UIDs of its
	// ownerReferences (node and store), whose absentOwnerCache keys it
	// reads and writes; mayVirtual: it may queue a virtual delete event.
	item       model.UID
	owners     uint64
	mayVirtual bool
	// absent: the UIDs whose absentOwnerCache entries a delivery may add
	absent uint64
	// marks: the nodes a delivery may remove, create or mark deleting
	// dependents; dependents: an item's dependents, whose nodes its cycle
	// check reads for exactly that
	marks, dependents uint64
	// inherit: asleep in p, the step stays asleep after a step it
	// commutes with, even one below it: no other step of p reaches the
	// state it reaches (see the soundness argument).
	inherit bool
	// keys: the objects, by kind and name, an attemptToDelete item's
	// live GETs read, or that a store write writes (keysAll: unknown), as
	// a set of hashes (keyBit): a shared bit may be a collision, never a
	// miss.
	keys uint64
}

const (
	usesAll = ^uint64(0)
	keysAll = ^uint64(0)
)

// keyBit is an object's bit in a keys set: a hash of its API kind and
// name (namespaces left out, so that a lookup's scope never matters).
func keyBit(kind, name string) uint64 {
	h := uint32(2166136261)
	for i := 0; i < len(kind); i++ {
		h = (h ^ uint32(kind[i])) * 16777619
	}
	h = (h ^ '/') * 16777619
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return 1 << (h % 64)
}

func refKeys(refs []model.OwnerRef) uint64 {
	var b uint64
	for i := range refs {
		b |= keyBit(refs[i].Kind, refs[i].Name)
	}
	return b
}

// The API kinds whose deletion reaches other objects.
const (
	crdKind       = "CustomResourceDefinition"
	namespaceKind = "Namespace"
)

// writeKeys is what a store write (a client request, an adoption or a
// release) writes: its target alone, unless it creates (a new UID), or
// deletes a CRD or a namespace, whose deletion reaches other objects.
func writeKeys(st *model.Step) uint64 {
	if st.Op == model.OpCreate || st.Target.Kind >= model.NumKinds {
		return keysAll
	}
	k := st.Target.Kind.Info().Kind
	if k == crdKind || k == namespaceKind {
		return keysAll
	}
	return keyBit(k, st.Target.Name)
}

// storeWriteStep is how the relation sees a store write st of the given
// rank.
func storeWriteStep(st *model.Step, rank int) sleepStep {
	return sleepStep{role: roleStoreWrite, bit: -1, rank: int32(rank), keys: writeKeys(st)}
}

func uidBit(u model.UID) uint64 {
	if u >= 64 {
		return usesAll
	}
	return 1 << u
}

func refBits(refs []model.OwnerRef) uint64 {
	var b uint64
	for i := range refs {
		b |= uidBit(refs[i].UID)
	}
	return b
}

func nodeBits(n *model.Node) uint64 {
	if n == nil {
		return 0
	}
	b := refBits(n.Owners)
	for _, d := range n.Dependents {
		b |= uidBit(d)
	}
	return b
}

// classify describes steps for the independence relation: out[i] is
// steps[i]'s, ranked rank+i. steps are the steps enabled in s
// (AppendEnabled's list, in its order), after client requests if any.
func classify(out []sleepStep, s *model.State, steps []model.Step, rank int) []sleepStep {
	out = out[:0]
	g := &s.GC
	item := 0 // attemptToDelete steps come in queue order, in-flight items left out
	send := 0
	for i := range steps {
		st := &steps[i]
		d := sleepStep{role: roleNone, bit: -1}
		switch {
		case st.Actor == model.ActorGC && (st.Op == model.OpDeliver || st.Op == model.OpLose):
			k := st.Target.Kind
			d.role, d.bit = roleDeliver, int8(k)
			ev := &g.Watch.Queues[k][0]
			d.uses = deliverUses(g, ev)
			n := g.Node(ev.Obj.UID)
			if n != nil && ev.Type == model.Deleted && len(n.Dependents) > 0 {
				d.absent = uidBit(ev.Obj.UID)
			}
			if ev.Type == model.Deleted || n == nil || ev.Obj.Deleting && ev.Obj.HasFinalizer(model.FinalizerForeground) {
				d.marks = uidBit(ev.Obj.UID)
			}
			for _, r := range ev.Obj.Owners {
				if g.Node(r.UID) == nil {
					d.marks |= uidBit(r.UID) // a virtual node appears
				}
			}
		case st.Actor == model.ActorGC && st.Op == model.OpDeliverVirtual:
			v := g.VirtualEvents[0].UID
			d.role, d.bit, d.inherit = roleVirtual, sleepVirtual, true
			d.uses, d.absent, d.marks = uidBit(v)|nodeBits(g.Node(v)), uidBit(v), uidBit(v)
		case st.Actor == model.ActorGC && st.Op == model.OpSync:
			d.role, d.bit = roleSync, sleepSync
		case st.Actor == model.ActorGC && st.Op == model.OpAttemptToDelete:
			for item < len(g.AttemptToDelete) && writing(g, g.AttemptToDelete[item].UID) {
				item++
			}
			id := g.AttemptToDelete[item]
			place := item
			item++
			n := g.Node(id.UID)
			if n != nil && n.DeletingDependents {
				break // may write the store (removeFinalizer)
			}
			d.role, d.item = roleItem, id.UID
			if place < sleepItems {
				d.bit = int8(sleepItem + place)
			}
			// its node, and its dependents' deleting-dependents marks (the
			// cycle check reads them)
			d.uses = uidBit(id.UID)
			if n != nil {
				for _, du := range n.Dependents {
					d.dependents |= uidBit(du)
				}
			}
			if n != nil {
				d.owners = refBits(n.Owners)
				d.mayVirtual = !(n.BeingDeleted && !n.DeletingDependents)
			}
			// (a custom kind's lookups read its CRD too, but every write
			// to a CRD is dependent on every item: writeKeys)
			d.keys = keyBit(id.Kind, id.Name)
			if n != nil {
				d.keys |= refKeys(n.Owners)
			}
			if o := s.Get(id.UID); o != nil {
				d.keys |= refKeys(o.Owners)
				d.owners |= refBits(o.Owners)
				if o.Kind.Info().Kind == id.Kind && o.Name == id.Name && o.Namespace == id.Namespace {
					d.mayVirtual = false
				}
			}
		case st.Actor == model.ActorGC && st.Op == model.OpSend:
			f := &g.InFlight[send] // sends come in InFlight order
			send++
			w := &f.Writes[0]
			d.role, d.item, d.uses = roleSend, f.UID, uidBit(f.UID)
			d.mayVirtual = w.Op == model.WriteDelete // a 404 queues one
			d.keys = keyBit(w.Item.Kind, w.Item.Name)
			if w.Item.Kind == crdKind || w.Item.Kind == namespaceKind {
				d.keys = keysAll
			}
		case st.Actor == model.ActorController && (st.Op == model.OpDeliver || st.Op == model.OpCoalesce):
			d.role = roleCtlInform
		case st.Actor == model.ActorClient, st.Actor == model.ActorController:
			d = storeWriteStep(st, 0)
		}
		d.rank = int32(rank + i)
		out = append(out, d)
	}
	// A delivery is inherited only when it is the one step that pops its
	// queue: a relist's skip or a lost update may reach the same state.
	var popped [model.NumKinds]int
	for i := range steps {
		if out[i].role == roleDeliver {
			popped[steps[i].Target.Kind]++
		}
	}
	for i := range steps {
		if out[i].role == roleDeliver && steps[i].Op == model.OpDeliver && popped[steps[i].Target.Kind] == 1 {
			out[i].inherit = !hasCoalesce(steps, steps[i].Target.Kind)
		}
	}
	return out
}

// hasCoalesce reports whether the GC may skip its kind-k queue's head.
func hasCoalesce(steps []model.Step, k model.KindID) bool {
	for i := range steps {
		if st := &steps[i]; st.Actor == model.ActorGC && st.Op == model.OpCoalesce && st.Target.Kind == k {
			return true
		}
	}
	return false
}

// writing reports whether the GC has writes in flight for item uid (an
// item attemptToDelete does not take then).
func writing(g *model.GC, uid model.UID) bool {
	for i := range g.InFlight {
		if g.InFlight[i].UID == uid {
			return true
		}
	}
	return false
}

// independent reports whether, in the state both were classified in, a
// (a step with a class) and c commute, neither enables nor disables the
// other, and a leaves the store as it was in either order: the relation
// argued above and checked by TestIndependenceHolds.
func independent(a, c *sleepStep) bool {
	return a.bit >= 0 && a.rank < c.rank && commute(a, c)
}

// commute is independent without the order: whether a (a step with a
// class) and c commute, neither enables nor disables the other, and a
// leaves the store as it was in either order.
func commute(a, c *sleepStep) bool {
	if a.bit < 0 {
		return false
	}
	switch c.role {
	case roleCtlInform:
		// pops the controller's queue only
		return true
	case roleStoreWrite:
		// writes the store and appends to the tails of informer queues;
		// a GC delivery reads neither the store nor a queue's tail, an
		// attemptToDelete item reads the objects of its keys
		return a.role == roleDeliver || a.role == roleVirtual || a.role == roleItem && a.keys&c.keys == 0
	case roleDeliver, roleVirtual:
		if a.role == roleItem {
			return a.uses&c.uses == 0 && c.absent&a.owners == 0 && c.marks&a.dependents == 0
		}
		return (a.role == roleDeliver || a.role == roleVirtual) && a.uses&c.uses == 0
	case roleItem:
		switch a.role {
		case roleDeliver, roleVirtual:
			return a.uses&c.uses == 0 && a.absent&c.owners == 0 && a.marks&c.dependents == 0
		case roleItem:
			return a.owners&c.owners == 0 && !(a.mayVirtual && c.mayVirtual)
		}
	case roleSend:
		// writes its target and appends to the tails of informer queues,
		// reads its node, may queue its item again or a virtual event
		switch a.role {
		case roleDeliver, roleVirtual:
			return a.uses&c.uses == 0
		case roleItem:
			return a.keys&c.keys == 0 && !(a.mayVirtual && c.mayVirtual)
		}
	}
	return false
}

// deliverUses is the graph footprint of the GC's delivery of ev: the
// object's node, the nodes of the owners it references before and after
// when they change (their dependents change, virtual nodes appear), and
// its dependents' nodes when it reads them or queues them: on a delete,
// when a virtual node takes another identity, and when a foreground
// deletion starts.
func deliverUses(g *model.GC, ev *model.WatchEvent) uint64 {
	b := uidBit(ev.Obj.UID)
	if ev.Replaces != 0 {
		b |= uidBit(ev.Replaces)
	}
	n := g.Node(ev.Obj.UID)
	if n == nil {
		if ev.Type == model.Deleted {
			return b
		}
		return b | refBits(ev.Obj.Owners)
	}
	var deps uint64
	for _, d := range n.Dependents {
		deps |= uidBit(d)
	}
	if ev.Type == model.Deleted {
		return b | refBits(n.Owners) | deps
	}
	id := model.Identity{Kind: ev.Obj.Kind.Info().Kind, Namespace: ev.Obj.Namespace, Name: ev.Obj.Name, UID: ev.Obj.UID}
	if n.Virtual && n.Identity != id {
		b |= deps
	}
	if !slices.Equal(n.Owners, ev.Obj.Owners) {
		b |= refBits(n.Owners) | refBits(ev.Obj.Owners)
	}
	if ev.Obj.Deleting && ev.Obj.HasFinalizer(model.FinalizerForeground) {
		b |= deps
	}
	return b
}

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
		j, _ := slices.BinarySearchFunc(q, a.item, func(id model.Identity, u model.UID) int { return cmp.Compare(id.UID, u) })
		if j < sleepItems && j < len(q) && q[j].UID == a.item {
			z |= 1 << (sleepItem + j)
		}
	}
	return z
}

// reductionApplies reports whether the scope may be searched with sleep
// sets: it asks for them, has no constraints, and the properties are such
// that a GC-sleepable step can neither break nor witness one.
func reductionApplies(scope Scope) bool {
	if !scope.Reduction || len(scope.Constraints) > 0 {
		return false
	}
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
