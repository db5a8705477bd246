package model

import "slices"

// Where the model's copy-on-write slices come from.
//
// Every step builds new slices for what it changes (states share the
// rest), so a step allocates a few times. That is fine for traces, but a
// model checker applies millions of steps, keeps only an encoding of each
// successor and drops the state at once. States that a Decoder produced,
// and every state Apply derives from them, therefore carry the Decoder's
// workspace: per-type arenas that the Decoder resets at its next Decode,
// when all those states are dead by contract. Allocation is then a bump
// of an index into memory that stays in the cache, and the garbage
// collector has nothing to do. States built any other way have no
// workspace (ws is nil) and allocate from the heap exactly as before.
//
// Slices from an arena have their capacity clipped to their length, so an
// append always copies, never writes into memory another slice owns.
type workspace struct {
	states   arena[State]
	objs     arena[Object]
	refs     arena[OwnerRef]
	strs     arena[string]
	labels   arena[Label]
	uidInfos arena[UIDInfo]
	events   arena[WatchEvent]
	queues   arena[[NumKinds][]WatchEvent]
	nodes    arena[Node]
	uids     arena[UID]
	idents   arena[Identity]
	inflight arena[InFlight]
	writes   arena[Write]
	orphans  arena[OrphanWatch]

	keys keyMemo
	// cachePos is scratch for cachePositions.
	cachePos [256]uint8
}

// keyMemo remembers the trace keys of identities and targets: the GC's
// steps compare them for every queued item, and building them allocates.
// identKey and Target.String are pure, so an entry whose inputs are equal
// to the ones asked about holds the answer. The memo is direct-mapped by
// a cheap hash; a collision only costs a recomputation. It outlives
// workspace resets.
type keyMemo struct {
	ids     [256]identKeyEntry
	targets [256]targetKeyEntry
}

type identKeyEntry struct {
	kind, namespace, name, key string
}

type targetKeyEntry struct {
	t   Target
	key string
	set bool
}

// memoSlot mixes the lengths and last bytes of a key's parts.
func memoSlot(a, b, c string) uint {
	h := uint(len(a))*7 + uint(len(b))*131 + uint(len(c))*31
	if len(c) > 0 {
		h += uint(c[len(c)-1]) * 17
	}
	if len(c) > 1 {
		h += uint(c[len(c)-2]) * 3
	}
	return h & 255
}

// identKey is identKey(*id), memoised.
func (w *workspace) identKey(id *Identity) string {
	if w == nil {
		return identKey(*id)
	}
	e := &w.keys.ids[memoSlot(id.Kind, id.Namespace, id.Name)]
	if e.key != "" && e.kind == id.Kind && e.namespace == id.Namespace && e.name == id.Name {
		return e.key
	}
	k := identKey(*id)
	*e = identKeyEntry{kind: id.Kind, namespace: id.Namespace, name: id.Name, key: k}
	return k
}

// targetKey is t.String(), memoised.
func (w *workspace) targetKey(t *Target) string {
	if w == nil {
		return t.String()
	}
	e := &w.keys.targets[(memoSlot("", t.Namespace, t.Name)+uint(t.Kind)*5)&255]
	if e.set && e.t == *t {
		return e.key
	}
	k := t.String()
	*e = targetKeyEntry{t: *t, key: k, set: true}
	return k
}

func (w *workspace) reset() {
	w.states.n, w.objs.n, w.refs.n, w.strs.n, w.labels.n, w.uidInfos.n, w.events.n = 0, 0, 0, 0, 0, 0, 0
	w.queues.n, w.nodes.n, w.uids.n, w.idents.n, w.inflight.n, w.writes.n, w.orphans.n = 0, 0, 0, 0, 0, 0, 0
}

// The arena accessors return nil without a workspace: the helpers below
// then use the heap.
func (w *workspace) objArena() *arena[Object] {
	if w == nil {
		return nil
	}
	return &w.objs
}

func (w *workspace) eventArena() *arena[WatchEvent] {
	if w == nil {
		return nil
	}
	return &w.events
}

func (w *workspace) nodeArena() *arena[Node] {
	if w == nil {
		return nil
	}
	return &w.nodes
}

func (w *workspace) uidArena() *arena[UID] {
	if w == nil {
		return nil
	}
	return &w.uids
}

func (w *workspace) identArena() *arena[Identity] {
	if w == nil {
		return nil
	}
	return &w.idents
}

func (w *workspace) inflightArena() *arena[InFlight] {
	if w == nil {
		return nil
	}
	return &w.inflight
}

func (w *workspace) writeArena() *arena[Write] {
	if w == nil {
		return nil
	}
	return &w.writes
}

func (w *workspace) uidInfoArena() *arena[UIDInfo] {
	if w == nil {
		return nil
	}
	return &w.uidInfos
}

// newState returns memory for a State.
func (w *workspace) newState() *State {
	if w == nil {
		return new(State)
	}
	return &w.states.take(1)[0]
}

// newQueues returns a copy of q (nil: all queues empty).
func (w *workspace) newQueues(q *[NumKinds][]WatchEvent) *[NumKinds][]WatchEvent {
	var c *[NumKinds][]WatchEvent
	if w == nil {
		c = new([NumKinds][]WatchEvent)
	} else {
		c = &w.queues.take(1)[0]
	}
	if q != nil {
		*c = *q
	} else {
		*c = [NumKinds][]WatchEvent{}
	}
	return c
}

// arena hands out sub-slices of a buffer that is reused after a reset.
type arena[T any] struct {
	buf []T
	n   int
}

// take returns k elements with unspecified contents (nil for k == 0).
func (a *arena[T]) take(k int) []T {
	if k == 0 {
		return nil
	}
	if a.n+k > len(a.buf) {
		// Slices already handed out keep the old buffer alive; the new
		// one is the one reused after the next reset.
		a.buf = make([]T, max(2*len(a.buf), k, 16))
		a.n = 0
	}
	s := a.buf[a.n : a.n+k : a.n+k]
	a.n += k
	return s
}

// The copy-on-write helpers. Without an arena each is exactly the slices
// call the model made before arenas existed.

// makeIn is make([]T, n), with unspecified contents from an arena.
func makeIn[T any](a *arena[T], n int) []T {
	if a == nil {
		return make([]T, n)
	}
	return a.take(n)
}

// cloneIn is slices.Clone.
func cloneIn[T any](a *arena[T], x []T) []T {
	if a == nil {
		return slices.Clone(x)
	}
	c := a.take(len(x))
	copy(c, x)
	return c
}

// insertIn is slices.Insert(slices.Clip(x), i, v).
func insertIn[T any](a *arena[T], x []T, i int, v T) []T {
	if a == nil {
		return slices.Insert(slices.Clip(x), i, v)
	}
	c := a.take(len(x) + 1)
	copy(c, x[:i])
	c[i] = v
	copy(c[i+1:], x[i:])
	return c
}

// appendIn is append(slices.Clip(x), v).
func appendIn[T any](a *arena[T], x []T, v T) []T {
	if a == nil {
		return append(slices.Clip(x), v)
	}
	c := a.take(len(x) + 1)
	copy(c, x)
	c[len(x)] = v
	return c
}

// deleteIn is slices.Delete(slices.Clone(x), i, i+1).
func deleteIn[T any](a *arena[T], x []T, i int) []T {
	if a == nil {
		return slices.Delete(slices.Clone(x), i, i+1)
	}
	c := a.take(len(x) - 1)
	copy(c, x[:i])
	copy(c[i:], x[i+1:])
	return c
}

// deleteFuncIn is slices.DeleteFunc(slices.Clone(x), del).
func deleteFuncIn[T any](a *arena[T], x []T, del func(T) bool) []T {
	if a == nil {
		return slices.DeleteFunc(slices.Clone(x), del)
	}
	keep := 0
	for i := range x {
		if !del(x[i]) {
			keep++
		}
	}
	c := a.take(keep)
	j := 0
	for i := range x {
		if !del(x[i]) {
			c[j] = x[i]
			j++
		}
	}
	return c
}
