package model

// The seam between the model's semantics and the checker's speed.
//
// The GC, the API server, the informers and the controller (gc_workers.go,
// gc_graph.go, apiserver.go, watch.go, controller.go, client.go) are
// written as upstream writes them: they read a State's exported fields,
// plain Go values, and change the slices the checker keeps in arenas
// through the small set of copy-on-write operations in store.go (put an
// object, enqueue a work item, push a watch event, add to
// absentOwnerCache, ...). Slices it does not (ownerReferences and
// finalizers being edited, the ghost state) they build with the slices
// package. They never name an arena, the encoding or a memo.
//
// Why the seam is there and not at the reads: the model reads far more
// than it writes (every enabled step, every property, every lookup of
// the graph), and a State of plain Go values is what traces, dumps,
// properties, the encoding and lin all read. An interface over the
// reads (a Store or World with Get, Lookup, Node, ...) would put a
// dynamic call on each of them and hide the values that make the code
// read like upstream's. Writes are a handful per step and already go
// through named operations, so they are where memory can be swapped.
//
// store.go in turn asks a memory for every slice it builds. memory is the
// one interface between the two sides:
//
//   - heap (below) is make and new: states built by NewState, by traces,
//     by the harness and by every test use it, and may be kept and shared
//     freely. It is the model as a reader should think of it.
//   - *workspace (mem.go) is the checker's: per-type arenas reset at each
//     Decode, and memos of trace keys and cache positions. The checker
//     supplies it by owning the Decoder (encode.go) whose states, and
//     every state Apply derives from them, carry it.
//
// An implementation must return fresh memory of exactly the length asked
// for, with capacity clipped to it (an append always copies, never writes
// into memory another state shares), and its memos must answer exactly
// what the function they memoise would. Nothing else about a state
// depends on which memory built it: the checker's counts and
// counterexamples are those of the heap model (hack/record-checks.sh
// compares them across a change; TestEncodeRoundTrip applies every step
// to a heap state and to its decoded twin and compares the successors).
//
// The price of the seam is one dynamic call per slice a step builds, in
// place of an inlined nil test and arena bump.
type memory interface {
	// newState returns memory for a State.
	newState() *State
	// newQueues returns memory for a watcher's queue array.
	newQueues() *[NumKinds][]WatchEvent
	// makeObjects and the other make methods return n elements of
	// unspecified contents with capacity n (nil for n == 0).
	makeObjects(n int) []Object
	makeEvents(n int) []WatchEvent
	makeNodes(n int) []Node
	makeUIDs(n int) []UID
	makeIdentities(n int) []Identity
	makeInFlight(n int) []InFlight
	makeWrites(n int) []Write
	makeUIDInfos(n int) []UIDInfo

	// identKey is identKey(*id); targetKey is t.String().
	identKey(id *Identity) string
	targetKey(t *Target) string
	// cachePositions indexes a cache by UID for cachedIn, or returns nil
	// (cachedIn then searches).
	cachePositions(cache []Object) *[256]uint8
}

// heap is the memory of states that own their memory: the Go heap, and
// no memos.
type heap struct{}

func (heap) newState() *State                    { return new(State) }
func (heap) newQueues() *[NumKinds][]WatchEvent  { return new([NumKinds][]WatchEvent) }
func (heap) makeObjects(n int) []Object          { return heapSlice[Object](n) }
func (heap) makeEvents(n int) []WatchEvent       { return heapSlice[WatchEvent](n) }
func (heap) makeNodes(n int) []Node              { return heapSlice[Node](n) }
func (heap) makeUIDs(n int) []UID                { return heapSlice[UID](n) }
func (heap) makeIdentities(n int) []Identity     { return heapSlice[Identity](n) }
func (heap) makeInFlight(n int) []InFlight       { return heapSlice[InFlight](n) }
func (heap) makeWrites(n int) []Write            { return heapSlice[Write](n) }
func (heap) makeUIDInfos(n int) []UIDInfo        { return heapSlice[UIDInfo](n) }
func (heap) identKey(id *Identity) string        { return identKey(*id) }
func (heap) targetKey(t *Target) string          { return t.String() }
func (heap) cachePositions([]Object) *[256]uint8 { return nil }

// heapSlice is make([]T, n), nil for n == 0 as an arena's take.
func heapSlice[T any](n int) []T {
	if n == 0 {
		return nil
	}
	return make([]T, n)
}

// memory returns where s allocates: its Decoder's workspace, or the heap.
func (s *State) memory() memory {
	if s.mem == nil {
		return heap{}
	}
	return s.mem
}

// The copy-on-write helpers: each fills c, fresh memory from a memory of
// the length the result needs, from x, and returns c.

// cloneTo is slices.Clone(x) into c (len(c) == len(x)).
func cloneTo[T any](c, x []T) []T {
	copy(c, x)
	return c
}

// insertTo is slices.Insert(slices.Clone(x), i, v) into c (len(c) ==
// len(x)+1).
func insertTo[T any](c, x []T, i int, v T) []T {
	copy(c, x[:i])
	c[i] = v
	copy(c[i+1:], x[i:])
	return c
}

// appendTo is append(slices.Clone(x), v) into c (len(c) == len(x)+1).
func appendTo[T any](c, x []T, v T) []T {
	copy(c, x)
	c[len(x)] = v
	return c
}

// deleteTo is slices.Delete(slices.Clone(x), i, i+1) into c (len(c) ==
// len(x)-1).
func deleteTo[T any](c, x []T, i int) []T {
	copy(c, x[:i])
	copy(c[i:], x[i+1:])
	return c
}

// keepCount is how many elements of x del keeps, the length that
// deleteFuncTo needs.
func keepCount[T any](x []T, del func(T) bool) int {
	keep := 0
	for i := range x {
		if !del(x[i]) {
			keep++
		}
	}
	return keep
}

// deleteFuncTo is slices.DeleteFunc(slices.Clone(x), del) into c (len(c)
// == keepCount(x, del)).
func deleteFuncTo[T any](c, x []T, del func(T) bool) []T {
	j := 0
	for i := range x {
		if !del(x[i]) {
			c[j] = x[i]
			j++
		}
	}
	return c
}

// identKeyIs reports identKey(*id) == t.String() without building either
// string when the names alone tell them apart (the checker asks this for
// every queued item of every GC step). Every key spelling ends in "/"
// followed by the name (t.Name is the whole key of an unserved kind), so
// names that differ after their last slash mean different keys
// (lastSegmentsDiffer); otherwise the strings are compared, from mem's
// memo when it has one.
func identKeyIs(mem memory, id *Identity, t *Target) bool {
	if is, known := identKeyShortcut(id, t); known {
		return is
	}
	return mem.identKey(id) == mem.targetKey(t)
}

// identKeyShortcut is identKeyIs when the cheap tests tell (known), which
// need no memory.
func identKeyShortcut(id *Identity, t *Target) (is, known bool) {
	sameName := sameString(id.Name, t.Name)
	if t.Kind != NoKind && !sameName && lastSegmentsDiffer(id.Name, t.Name) {
		return false, true
	}
	// An identity and a target of one kind, namespace and name have one
	// key: kind names are unique (see init), so the identity's kind is
	// the target's, and identKey spells a served kind's key as
	// Target.String does in every scope (TestIdentKeyShortcuts). The
	// GC's steps name their items so, and this spares building the keys.
	if t.Kind < NumKinds && sameName && sameString(id.Namespace, t.Namespace) && sameString(Kinds[t.Kind].Kind, id.Kind) {
		return true, true
	}
	return false, false
}
