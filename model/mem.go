package model

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
// workspace and allocate from the heap (memory.go: workspace is the
// checker's implementation of memory, heap the plain one).
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

// The memory methods: a bump of an arena's index.

func (w *workspace) newState() *State                   { return &w.states.take(1)[0] }
func (w *workspace) newQueues() *[NumKinds][]WatchEvent { return &w.queues.take(1)[0] }
func (w *workspace) makeObjects(n int) []Object         { return w.objs.take(n) }
func (w *workspace) makeEvents(n int) []WatchEvent      { return w.events.take(n) }
func (w *workspace) makeNodes(n int) []Node             { return w.nodes.take(n) }
func (w *workspace) makeUIDs(n int) []UID               { return w.uids.take(n) }
func (w *workspace) makeIdentities(n int) []Identity    { return w.idents.take(n) }
func (w *workspace) makeInFlight(n int) []InFlight      { return w.inflight.take(n) }
func (w *workspace) makeWrites(n int) []Write           { return w.writes.take(n) }
func (w *workspace) makeUIDInfos(n int) []UIDInfo       { return w.uidInfos.take(n) }

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
