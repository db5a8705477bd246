package check

import (
	"cmp"
	"slices"

	"github.com/cascade-k8s/cascade/model"
)

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
)

// The order of a state's steps (sleepStep.rank): discovery sync, then the
// attemptToDelete items in queue order, the deliveries by kind, the
// virtual event, and every step without a class above them all.
const (
	rankSync    = 0
	rankItem    = 1 // + the item's place in the queue
	rankDeliver = 1 << 10
	rankVirtual = rankDeliver + model.NumKinds
	rankOther   = 1 << 14
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
	// rank orders the steps of p for the proof's order: classes by bit,
	// every step without a class above them all.
	rank int16
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

// writeKeys is what a store write (a client request, an adoption or a
// release) writes: its target alone, unless it creates (a new UID), or
// deletes a CRD or a namespace, whose deletion reaches other objects.
func writeKeys(st *model.Step) uint64 {
	if st.Op == model.OpCreate || st.Target.Kind >= model.NumKinds {
		return keysAll
	}
	switch st.Target.Kind.Info().Short {
	case "crd", "ns":
		return keysAll
	}
	return keyBit(st.Target.Kind.Info().Kind, st.Target.Name)
}

// storeWriteStep is how the relation sees a store write st.
func storeWriteStep(st *model.Step) sleepStep {
	return sleepStep{role: roleStoreWrite, bit: -1, rank: rankOther, keys: writeKeys(st)}
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

// classify describes the steps enabled in s (AppendEnabled's list, in its
// order) and client requests for the independence relation: out[i] is
// steps[i]'s.
func classify(out []sleepStep, s *model.State, steps []model.Step) []sleepStep {
	out = out[:0]
	g := &s.GC
	item := 0 // attemptToDelete steps come in queue order, in-flight items left out
	send := 0
	for i := range steps {
		st := &steps[i]
		d := sleepStep{role: roleNone, bit: -1, rank: rankOther}
		switch {
		case st.Actor == model.ActorGC && (st.Op == model.OpDeliver || st.Op == model.OpLose):
			k := st.Target.Kind
			d.role, d.bit, d.rank = roleDeliver, int8(k), rankDeliver+int16(k)
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
			d.role, d.bit, d.rank, d.inherit = roleVirtual, sleepVirtual, rankVirtual, true
			d.uses, d.absent, d.marks = uidBit(v)|nodeBits(g.Node(v)), uidBit(v), uidBit(v)
		case st.Actor == model.ActorGC && st.Op == model.OpSync:
			d.role, d.bit, d.rank = roleSync, sleepSync, rankSync
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
			d.role, d.rank, d.item = roleItem, int16(rankItem+place), id.UID
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
			d.keys = keyBit(id.Kind, id.Name)
			if n != nil {
				d.keys |= refKeys(n.Owners)
			}
			if k, ok := model.KindByName(id.Kind); !ok || k.Info().Custom {
				d.keys = keysAll // its lookups read CRDs too
			}
			if o := s.Get(id.UID); o != nil {
				d.keys |= refKeys(o.Owners)
				for _, r := range o.Owners {
					if k, ok := model.KindByName(r.Kind); !ok || k.Info().Custom {
						d.keys = keysAll
					}
				}
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
			d.keys = keysAll
			if k, ok := model.KindByName(w.Item.Kind); ok && k.Info().Short != "crd" && k.Info().Short != "ns" {
				d.keys = keyBit(w.Item.Kind, w.Item.Name)
			}
		case st.Actor == model.ActorController && (st.Op == model.OpDeliver || st.Op == model.OpCoalesce):
			d.role = roleCtlInform
		case st.Actor == model.ActorClient, st.Actor == model.ActorController:
			d = storeWriteStep(st)
		}
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
		if a.role != roleItem {
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
