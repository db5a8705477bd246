package check

import (
	"slices"
	"unsafe"

	"github.com/cascade-k8s/cascade/model"
)

// The independence relation of the sleep sets (argued in reduction.go):
// what each step of a state reads and writes, and which pairs commute.

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

// keyMemo remembers the keyBit of the last (kind, name) pair met in each
// of its slots, chosen by the name's length and last byte, so that
// classify does not hash the same few names again for every state: the
// strings of a decoded state are interned, so a hit usually compares two
// pointers. keyBit is a function of the two strings' contents, which a
// hit compares in full, so the memo returns exactly what keyBit does. A
// nil memo hashes every time.
type keyMemo [64]struct {
	kind, name string
	bit        uint64
}

func (m *keyMemo) keyBit(kind, name string) uint64 {
	if m == nil || len(name) == 0 {
		return keyBit(kind, name)
	}
	e := &m[(len(name)<<3+int(name[len(name)-1]))&(len(m)-1)]
	if !equalStr(e.name, name) || !equalStr(e.kind, kind) {
		e.kind, e.name, e.bit = kind, name, keyBit(kind, name)
	}
	return e.bit
}

// equalStr is a == b without a call when the strings share their bytes,
// as interned ones do.
func equalStr(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

func (m *keyMemo) refKeys(refs []model.OwnerRef) uint64 {
	var b uint64
	for i := range refs {
		b |= m.keyBit(refs[i].Kind, refs[i].Name)
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
// keys, which may be nil, is the caller's keyMemo.
func classify(out []sleepStep, s *model.State, steps []model.Step, rank int, keys *keyMemo) []sleepStep {
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
			d.keys = keys.keyBit(id.Kind, id.Name)
			if n != nil {
				d.keys |= keys.refKeys(n.Owners)
			}
			if o := s.Get(id.UID); o != nil {
				d.keys |= keys.refKeys(o.Owners)
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
			d.keys = keys.keyBit(w.Item.Kind, w.Item.Name)
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

// commute reports whether, in the state both were classified in, a (a
// step with a class) and c commute, neither enables nor disables the
// other, and a leaves the store as it was in either order: the relation
// argued in reduction.go and checked by TestIndependenceHolds.
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
