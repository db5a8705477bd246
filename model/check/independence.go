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
// in a state p, all computed from p. (The fields are laid out to fill 64
// bytes: classify writes one per step of every state expanded.)
type sleepStep struct {
	role int8
	bit  int8 // sleep class in p, -1 for none
	// mayVirtual: an attemptToDelete item or a send may queue a virtual
	// delete event.
	mayVirtual bool
	// inherit: asleep in p, the step stays asleep after a step it
	// commutes with, even one below it: no other step of p reaches the
	// state it reaches (see the soundness argument).
	inherit bool
	// rank orders the steps of p for the proof's order: the explorer's
	// action order (client requests in op order, then the model's steps
	// as AppendEnabled lists them).
	rank int32
	// item: an attemptToDelete item's UID (or a send's)
	item model.UID
	// uses: the graph nodes the step reads or writes, as a set of UIDs
	// (usesAll when one is too large to name). For an attemptToDelete item
	// it includes the owners its live GET reads, whose absentOwnerCache
	// entries it reads.
	uses uint64
	// owners: an item's ownerReferences' UIDs (node and store), whose
	// absentOwnerCache keys it reads and writes
	owners uint64
	// absent: the UIDs whose absentOwnerCache entries a delivery may add
	absent uint64
	// marks: the nodes a delivery may remove, create or mark deleting
	// dependents; dependents: an item's dependents, whose nodes its cycle
	// check reads for exactly that
	marks, dependents uint64
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

// keyMemo remembers the keys of the last (kind, name) pair met in each of
// its slots, chosen by the UID of the object the pair names, so that
// classify does not hash the same few names again for every state. The
// strings of a decoded state are interned, so a hit compares the two
// strings' addresses and lengths: two strings of one length at one
// address are equal, and the keys are a function of the strings'
// contents, so the memo returns exactly what keyBit and writeKey do (any
// UID may come with any pair: a slot is only where the memo looks).
type keyMemo [64]keyMemoEntry

type keyMemoEntry struct {
	kind, name       *byte
	kindLen, nameLen int
	// bit is keyBit(kind, name), 0 in an empty slot (keyBit never is);
	// write is writeKey(kind, name).
	bit, write uint64
}

// entry is the slot holding the keys of (kind, name), which names uid.
func (m *keyMemo) entry(uid model.UID, kind, name string) *keyMemoEntry {
	e := &m[uid%64]
	if e.name != unsafe.StringData(name) || e.kind != unsafe.StringData(kind) || e.nameLen != len(name) || e.kindLen != len(kind) || e.bit == 0 {
		e.kind, e.name, e.kindLen, e.nameLen = unsafe.StringData(kind), unsafe.StringData(name), len(kind), len(name)
		e.bit, e.write = keyBit(kind, name), writeKey(kind, name)
	}
	return e
}

// keyBit is keyBit(kind, name) for a pair naming uid.
func (m *keyMemo) keyBit(uid model.UID, kind, name string) uint64 {
	return m.entry(uid, kind, name).bit
}

// equalStr is a == b without a call when the strings share their bytes,
// as interned ones do.
func equalStr(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

func (m *keyMemo) refKeys(refs []model.OwnerRef) uint64 {
	var b uint64
	for i := range refs {
		b |= m.keyBit(refs[i].UID, refs[i].Kind, refs[i].Name)
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
	return writeKey(st.Target.Kind.Info().Kind, st.Target.Name)
}

// writeKey is what a write to the object of an API kind and name writes
// (keysAll: unknown): the object, unless the kind is a CRD or a
// namespace, whose deletion reaches other objects.
func writeKey(kind, name string) uint64 {
	if kind == crdKind || kind == namespaceKind {
		return keysAll
	}
	return keyBit(kind, name)
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
// keys is the caller's keyMemo, nil for a new one.
func classify(out []sleepStep, s *model.State, steps []model.Step, rank int, keys *keyMemo) []sleepStep {
	if keys == nil {
		keys = new(keyMemo)
	}
	if cap(out) < len(steps) {
		out = make([]sleepStep, len(steps), 2*len(steps))
	}
	out = out[:len(steps)]
	g := &s.GC
	item := 0 // attemptToDelete steps come in queue order, in-flight items left out
	send := 0
	// the kinds whose queue a delivery or lost update pops, those two
	// steps pop, and those a relist may skip the head of; popEnd is past
	// the last delivery or lost update
	var popped, poppedTwice, skipped uint64
	popEnd := 0
	for i := range steps {
		st := &steps[i]
		// filled in place: a sleepStep is 64 bytes, and a state has a
		// few steps
		d := &out[i]
		*d = sleepStep{role: roleNone, bit: -1, rank: int32(rank + i)}
		switch st.Actor {
		case model.ActorGC:
			switch st.Op {
			case model.OpDeliver, model.OpLose:
				k := st.Target.Kind
				poppedTwice |= popped & (1 << k)
				popped |= 1 << k
				d.role, d.bit = roleDeliver, int8(k)
				popEnd = i + 1
				ev := &g.Watch.Queues[k][0]
				n := g.Node(ev.Obj.UID)
				d.uses = deliverUses(ev, n)
				if n != nil && ev.Type == model.Deleted && len(n.Dependents) > 0 {
					d.absent = uidBit(ev.Obj.UID)
				}
				if ev.Type == model.Deleted || n == nil || ev.Obj.Deleting && ev.Obj.HasFinalizer(model.FinalizerForeground) {
					d.marks = uidBit(ev.Obj.UID)
				}
				for j := range ev.Obj.Owners {
					if u := ev.Obj.Owners[j].UID; g.Node(u) == nil {
						d.marks |= uidBit(u) // a virtual node appears
					}
				}
			case model.OpCoalesce:
				skipped |= 1 << st.Target.Kind
			case model.OpDeliverVirtual:
				v := g.VirtualEvents[0].UID
				d.role, d.bit, d.inherit = roleVirtual, sleepVirtual, true
				d.uses, d.absent, d.marks = uidBit(v)|nodeBits(g.Node(v)), uidBit(v), uidBit(v)
			case model.OpSync:
				d.role, d.bit = roleSync, sleepSync
			case model.OpAttemptToDelete:
				for item < len(g.AttemptToDelete) && writing(g, g.AttemptToDelete[item].UID) {
					item++
				}
				classifyItem(d, s, &g.AttemptToDelete[item], item, keys)
				item++
			case model.OpSend:
				f := &g.InFlight[send] // sends come in InFlight order
				send++
				w := &f.Writes[0]
				d.role, d.item, d.uses = roleSend, f.UID, uidBit(f.UID)
				d.mayVirtual = w.Op == model.WriteDelete // a 404 queues one
				d.keys = keys.entry(w.Item.UID, w.Item.Kind, w.Item.Name).write
			}
		case model.ActorController:
			if st.Op == model.OpDeliver || st.Op == model.OpCoalesce {
				d.role = roleCtlInform
			} else {
				d.role, d.keys = roleStoreWrite, writeKeys(st)
			}
		case model.ActorClient:
			d.role, d.keys = roleStoreWrite, writeKeys(st)
		}
	}
	// A delivery is inherited only when it is the one step that pops its
	// queue: a relist's skip or a lost update may reach the same state.
	popped &^= poppedTwice | skipped
	for i := range popEnd {
		if st := &steps[i]; out[i].role == roleDeliver && st.Op == model.OpDeliver && popped&(1<<st.Target.Kind) != 0 {
			out[i].inherit = true
		}
	}
	return out
}

// classifyItem describes into d attemptToDelete of id, the place-th item
// of s's queue.
func classifyItem(d *sleepStep, s *model.State, id *model.Identity, place int, keys *keyMemo) {
	n := s.GC.Node(id.UID)
	if n != nil && n.DeletingDependents {
		return // may write the store (removeFinalizer)
	}
	d.role, d.item = roleItem, id.UID
	if place < sleepItems {
		d.bit = int8(sleepItem + place)
	}
	// its node, and its dependents' deleting-dependents marks (the cycle
	// check reads them)
	d.uses = uidBit(id.UID)
	// (a custom kind's lookups read its CRD too, but every write to a CRD
	// is dependent on every item: writeKeys)
	d.keys = keys.keyBit(id.UID, id.Kind, id.Name)
	if n != nil {
		for _, du := range n.Dependents {
			d.dependents |= uidBit(du)
		}
		d.owners = refBits(n.Owners)
		d.mayVirtual = !(n.BeingDeleted && !n.DeletingDependents)
		d.keys |= keys.refKeys(n.Owners)
	}
	if o := s.Get(id.UID); o != nil {
		d.keys |= keys.refKeys(o.Owners)
		d.owners |= refBits(o.Owners)
		if equalStr(o.Name, id.Name) && equalStr(model.Kinds[o.Kind].Kind, id.Kind) && equalStr(o.Namespace, id.Namespace) {
			d.mayVirtual = false
		}
	}
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
// deletion starts. n is the object's node, nil for none.
func deliverUses(ev *model.WatchEvent, n *model.Node) uint64 {
	b := uidBit(ev.Obj.UID)
	if ev.Replaces != 0 {
		b |= uidBit(ev.Replaces)
	}
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
