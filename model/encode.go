package model

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// Encode appends a canonical encoding of the state: two states are equal
// exactly when their encodings are, and Decode reads it back. The checker
// fingerprints it and keeps its BFS frontier in this form.
//
// The encoding is compact because the checker stores and hashes one per
// transition. Strings the UID table already determines are not repeated:
// an object's namespace and name, an identity's kind, namespace and name
// and an ownerReference's kind and name are written as one flag bit when
// they are those of the object the UID they carry was made for (almost
// always) and in full otherwise. The UID table comes first so that a
// decoder can resolve those bits. The flags are a function of the state,
// so the encoding stays canonical, and every field is recoverable, so it
// stays injective. Empty optional fields of an object cost one bit each,
// ownerReferences equal to the previous object's in the same list one bit
// (encObjectBody), and a queued event's object equal to the cached one
// its UID (encQueues). A fanout-8 state takes about 200 bytes.
func (s *State) Encode(b []byte) []byte {
	for p := range numParts {
		b = s.encPart(b, p)
	}
	return b
}

// The encoding is a sequence of parts, in this order. A part depends on
// the state's other parts only through the UID table (implied strings)
// and, for a watcher's queues, its cache (a queued object may be written
// as a reference to the cached one): Decoder.EncodeNext relies on that
// to copy the parts a successor shares with its parent.
const (
	partUIDs = iota
	partObjects
	partGCCache
	partGCQueues
	partNodes
	partVirtualEvents
	partAttemptToDelete
	partAttemptToOrphan
	partDetached
	partInFlight
	partAbsent
	partMonitored
	partControllerCache
	partControllerQueues
	partOrphans
	partEvents
	partBudget
	numParts
)

func (s *State) encPart(b []byte, part int) []byte {
	g := &s.GC
	switch part {
	case partUIDs:
		b = binary.AppendUvarint(b, uint64(len(s.UIDs)))
		prevNS := ""
		for i := range s.UIDs {
			u := &s.UIDs[i]
			b = append(b, byte(u.Kind))
			// Most UIDs share the namespace of the one before: 0 says
			// so, otherwise the length plus one precedes the bytes.
			if u.Namespace == prevNS {
				b = append(b, 0)
			} else {
				b = binary.AppendUvarint(b, uint64(len(u.Namespace))+1)
				b = append(b, u.Namespace...)
				prevNS = u.Namespace
			}
			b = encStr(encStr(b, u.Name), u.Symbol)
			b = binary.AppendVarint(b, int64(u.Nth))
		}
	case partObjects:
		b = binary.AppendUvarint(b, uint64(len(s.Objects)))
		var prev []OwnerRef
		for i := range s.Objects {
			o := &s.Objects[i]
			b = s.encObjectBody(binary.AppendUvarint(b, uint64(o.UID)), o, &prev)
		}
	case partGCCache:
		b = s.encCache(b, &g.Watch)
	case partGCQueues:
		b = s.encQueues(b, &g.Watch, nil, nil)
	case partNodes:
		b = binary.AppendUvarint(b, uint64(len(g.Nodes)))
		var prev []OwnerRef
		for i := range g.Nodes {
			n := &g.Nodes[i]
			b = s.encIdent(b, &n.Identity)
			// As for objects (encObjectBody), owners equal to the
			// previous node's cost one bit.
			f := flags3(n.Virtual, n.BeingDeleted, n.DeletingDependents)
			same := len(n.Owners) > 0 && sameSlice(n.Owners, prev)
			if same {
				f |= nodeSameOwners
			}
			b = append(b, f)
			if !same {
				b = s.encRefs(b, n.Owners)
			}
			prev = n.Owners
			b = encUIDs(b, n.Dependents)
		}
	case partVirtualEvents:
		b = s.encIdents(b, g.VirtualEvents)
	case partAttemptToDelete:
		b = s.encIdents(b, g.AttemptToDelete)
	case partAttemptToOrphan:
		b = s.encIdents(b, g.AttemptToOrphan)
	case partDetached:
		b = binary.AppendUvarint(b, uint64(len(g.Detached)))
		for i := range g.Detached {
			b = binary.AppendUvarint(b, uint64(g.Detached[i].UID))
			b = encUIDs(b, g.Detached[i].Dependents)
		}
	case partInFlight:
		b = binary.AppendUvarint(b, uint64(len(g.InFlight)))
		for i := range g.InFlight {
			f := &g.InFlight[i]
			b = binary.AppendUvarint(b, uint64(f.UID))
			b = binary.AppendUvarint(b, uint64(len(f.Writes)))
			for j := range f.Writes {
				w := &f.Writes[j]
				b = append(b, byte(w.Op), byte(w.Policy))
				b = s.encIdent(b, &w.Item)
				b = binary.AppendVarint(b, int64(w.RV))
				b = s.encRefs(b, w.Owners)
				b = encUIDs(b, w.Remove)
				b = encUIDs(b, w.Waited)
			}
		}
	case partAbsent:
		b = s.encIdents(b, g.Absent)
	case partMonitored:
		b = binary.AppendUvarint(b, uint64(g.Monitored))
	case partControllerCache:
		b = s.encCache(b, &s.Controller.Watch)
	case partControllerQueues:
		b = s.encQueues(b, &s.Controller.Watch, nil, nil)
	case partOrphans:
		b = binary.AppendUvarint(b, uint64(len(s.Orphans)))
		for _, o := range s.Orphans {
			b = binary.AppendUvarint(b, uint64(o.Owner))
			b = binary.AppendUvarint(b, uint64(o.Dep))
			b = append(b, flags3(o.Ran, o.Seen, o.Switched)|byte(o.Overridden)<<3)
		}
	case partEvents:
		b = binary.AppendUvarint(b, uint64(len(s.Events)))
		for _, e := range s.Events {
			b = encStr(b, e)
		}
	case partBudget:
		b = binary.AppendUvarint(b, s.Budget)
	}
	return b
}

// EncodeNext appends Encode(s) for a state s derived (by Apply and
// Canonical) from the state Decode last returned. It copies the parts of
// that state's encoding that s shares with it: slices are copy-on-write,
// so a part whose slices s still shares, whose watch queue array is the
// same, and whose dependencies (see the part list) are shared too,
// encodes exactly as before. It is Encode, only faster.
func (d *Decoder) EncodeNext(b []byte, s *State) []byte {
	p := &d.state
	if !sliceIs(s.UIDs, p.UIDs) {
		return s.Encode(b)
	}
	g, pg := &s.GC, &p.GC
	gcCache := sliceIs(g.Watch.Cache, pg.Watch.Cache)
	w, pw := &s.Controller.Watch, &p.Controller.Watch
	ctrlCache := sliceIs(w.Cache, pw.Cache)
	// One bit per part that differs (the UID table does not).
	var changed uint32
	set := func(part int, same bool) {
		if !same {
			changed |= 1 << part
		}
	}
	set(partObjects, sliceIs(s.Objects, p.Objects))
	set(partGCCache, gcCache)
	set(partGCQueues, gcCache && g.Watch.Queues == pg.Watch.Queues)
	set(partNodes, sliceIs(g.Nodes, pg.Nodes))
	set(partVirtualEvents, sliceIs(g.VirtualEvents, pg.VirtualEvents))
	set(partAttemptToDelete, sliceIs(g.AttemptToDelete, pg.AttemptToDelete))
	set(partAttemptToOrphan, sliceIs(g.AttemptToOrphan, pg.AttemptToOrphan))
	set(partDetached, sliceIs(g.Detached, pg.Detached))
	set(partInFlight, sliceIs(g.InFlight, pg.InFlight))
	set(partAbsent, sliceIs(g.Absent, pg.Absent))
	set(partMonitored, g.Monitored == pg.Monitored)
	set(partControllerCache, ctrlCache)
	set(partControllerQueues, ctrlCache && w.Queues == pw.Queues)
	set(partOrphans, sliceIs(s.Orphans, p.Orphans))
	set(partEvents, sliceIs(s.Events, p.Events))
	set(partBudget, s.Budget == p.Budget)
	// The parts between two that differ are copied in one piece.
	from := 0 // the first part not written yet
	for changed != 0 {
		part := bits.TrailingZeros32(changed)
		changed &= changed - 1
		if d.parts[from] < d.parts[part] {
			b = append(b, d.b[d.parts[from]:d.parts[part]]...)
		}
		switch {
		case part == partGCQueues && gcCache:
			// the decoded state's cache, indexed already
			b = s.encQueues(b, &g.Watch, d.cachePositions(0, g.Watch.Cache), d.queuedRefs(0, pg.Watch.Queues))
		case part == partControllerQueues && ctrlCache:
			b = s.encQueues(b, w, d.cachePositions(1, w.Cache), d.queuedRefs(1, pw.Queues))
		default:
			b = s.encPart(b, part)
		}
		from = part + 1
	}
	return append(b, d.b[d.parts[from]:d.parts[numParts]]...)
}

// sliceIs reports whether two slices are the same memory (so, under
// copy-on-write, the same contents).
func sliceIs[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

var fingerprintSeed = maphash.MakeSeed()

// Fingerprint is a 64-bit hash of the canonical encoding. It is stable
// within a process (the seed is per process), which is all a checker run
// needs.
func (s *State) Fingerprint(buf []byte) (uint64, []byte) {
	buf = s.Encode(buf[:0])
	return FingerprintBytes(buf), buf
}

// FingerprintBytes is Fingerprint of an encoding Encode produced.
func FingerprintBytes(enc []byte) uint64 { return maphash.Bytes(fingerprintSeed, enc) }

// Equal reports whether two states are the same.
func (s *State) Equal(o *State) bool { return string(s.Encode(nil)) == string(o.Encode(nil)) }

func flags3(a, b, c bool) byte {
	var f byte
	if a {
		f |= 1
	}
	if b {
		f |= 2
	}
	if c {
		f |= 4
	}
	return f
}

func encStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func encUIDs(b []byte, us []UID) []byte {
	b = binary.AppendUvarint(b, uint64(len(us)))
	for _, u := range us {
		b = binary.AppendUvarint(b, uint64(u))
	}
	return b
}

// madeFor returns what the UID table says u was made for, or nil for 0, a
// UID beyond the table, or a symbolic UID.
func (s *State) madeFor(u UID) *UIDInfo {
	if u == 0 || int(u) > len(s.UIDs) {
		return nil
	}
	in := &s.UIDs[u-1]
	if in.Kind == NoKind {
		return nil
	}
	return in
}

// Reference flags, below the UID in one uvarint.
const (
	refController = 1 << iota
	refBlock
	refImplied // kind and name are those of the object the UID was made for
	refControllerUnset
	refBlockUnset
	refBits = 5
)

func (s *State) encRefs(b []byte, rs []OwnerRef) []byte {
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for i := range rs {
		r := &rs[i]
		f := uint64(0)
		if r.Controller {
			f |= refController
		}
		if r.Block {
			f |= refBlock
		}
		if r.ControllerUnset {
			f |= refControllerUnset
		}
		if r.BlockUnset {
			f |= refBlockUnset
		}
		in := s.madeFor(r.UID)
		implied := in != nil && sameString(r.Kind, Kinds[in.Kind].Kind) && sameString(r.Name, in.Name)
		if implied {
			f |= refImplied
		}
		b = binary.AppendUvarint(b, uint64(r.UID)<<refBits|f)
		if !implied {
			b = encStr(encStr(b, r.Kind), r.Name)
		}
	}
	return b
}

// encIdent writes an identity as its UID shifted left by one, the low bit
// set when kind, namespace and name are implied by the UID table.
func (s *State) encIdent(b []byte, id *Identity) []byte {
	in := s.madeFor(id.UID)
	if in != nil && sameString(id.Kind, Kinds[in.Kind].Kind) && sameString(id.Namespace, in.Namespace) && sameString(id.Name, in.Name) {
		return binary.AppendUvarint(b, uint64(id.UID)<<1|1)
	}
	b = binary.AppendUvarint(b, uint64(id.UID)<<1)
	return encStr(encStr(encStr(b, id.Kind), id.Namespace), id.Name)
}

func (s *State) encIdents(b []byte, ids []Identity) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for i := range ids {
		b = s.encIdent(b, &ids[i])
	}
	return b
}

// nodeSameOwners, above a node's three flags, says that its owners are
// the previous node's.
const nodeSameOwners = 8

// Object flags.
const (
	objDeleting = 1 << iota
	objImplied  // namespace and name are those the UID was made for
	objOwners
	objFinalizers
	objLabels
	objSelector
	objReplicas
	objSameOwners // the previous object's ownerReferences (encObjectBody)
)

// objectByUID finds an object in a list sorted by UID.
func objectByUID(objs []Object, uid UID) *Object {
	if i, ok := objectIndex(objs, uid); ok {
		return &objs[i]
	}
	return nil
}

// objectIndex is slices.BinarySearchFunc by UID, written out. UIDs in a
// list are distinct, so the object at position i has a UID of at least
// the first one's plus i: uid cannot lie beyond position uid-first, and
// in a list without gaps it is exactly there, which is checked first.
func objectIndex(objs []Object, uid UID) (int, bool) {
	if len(objs) == 0 {
		return 0, false
	}
	first := objs[0].UID
	if uid <= first {
		return 0, uid == first
	}
	hi := len(objs)
	if d := uint(uid - first); d < uint(hi) {
		hi = int(d) + 1
	}
	if last := objs[hi-1].UID; last <= uid {
		if last == uid {
			return hi - 1, true
		}
		return hi, false
	}
	lo := 1
	hi--
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if objs[m].UID < uid {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(objs) && objs[lo].UID == uid
}

// sameObject reports whether two objects are equal in every field.
// Copies usually share their slices, which then compare in O(1).
func sameObject(a, b *Object) bool {
	return a.UID == b.UID && a.Kind == b.Kind && a.RV == b.RV && a.Deleting == b.Deleting && a.Replicas == b.Replicas &&
		sameString(a.Namespace, b.Namespace) && sameString(a.Name, b.Name) &&
		sameString(a.Selector.Key, b.Selector.Key) && sameString(a.Selector.Value, b.Selector.Value) &&
		sameSlice(a.Owners, b.Owners) && sameSlice(a.Finalizers, b.Finalizers) && sameSlice(a.Labels, b.Labels)
}

// sameString is a == b without a call when the two strings share their
// bytes, as the strings of a decoded state and of the UID table it names
// mostly do (the decoder interns them and takes implied names from the
// table), or differ in their last byte, as names of one length mostly do
// (d1, d2).
func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b) ||
		a[len(a)-1] == b[len(a)-1] && a == b)
}

func sameSlice[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// encObjectBody writes an object after its UID. *prev holds the
// ownerReferences of the object written in full before it in the same
// list: objects of a list often have the same owners (every dependent of
// one owner), which then cost one bit.
func (s *State) encObjectBody(b []byte, o *Object, prev *[]OwnerRef) []byte {
	var f byte
	if o.Deleting {
		f |= objDeleting
	}
	in := s.madeFor(o.UID)
	implied := in != nil && sameString(o.Namespace, in.Namespace) && sameString(o.Name, in.Name)
	if implied {
		f |= objImplied
	}
	if len(o.Owners) > 0 {
		if sameSlice(o.Owners, *prev) {
			f |= objSameOwners
		} else {
			f |= objOwners
		}
	}
	*prev = o.Owners
	if len(o.Finalizers) > 0 {
		f |= objFinalizers
	}
	if len(o.Labels) > 0 {
		f |= objLabels
	}
	if o.Selector.Key != "" || o.Selector.Value != "" { // not != Label{}, which compiles to string comparisons
		f |= objSelector
	}
	if o.Replicas != 0 {
		f |= objReplicas
	}
	b = append(b, byte(o.Kind), f)
	if !implied {
		b = encStr(encStr(b, o.Namespace), o.Name)
	}
	if f&objOwners != 0 {
		b = s.encRefs(b, o.Owners)
	}
	if f&objRare != 0 {
		b = s.encRareFields(b, o, f)
	}
	return binary.AppendVarint(b, int64(o.RV))
}

// objRare are the flags of fields most objects leave empty: one test
// skips them all.
const objRare = objFinalizers | objLabels | objSelector | objReplicas

// encRareFields writes the fields of objRare that f has.
func (s *State) encRareFields(b []byte, o *Object, f byte) []byte {
	if f&objFinalizers != 0 {
		b = binary.AppendUvarint(b, uint64(len(o.Finalizers)))
		for _, x := range o.Finalizers {
			b = encStr(b, x)
		}
	}
	if f&objLabels != 0 {
		b = binary.AppendUvarint(b, uint64(len(o.Labels)))
		for _, l := range o.Labels {
			b = encStr(encStr(b, l.Key), l.Value)
		}
	}
	if f&objSelector != 0 {
		b = encStr(encStr(b, o.Selector.Key), o.Selector.Value)
	}
	if f&objReplicas != 0 {
		b = binary.AppendVarint(b, int64(o.Replicas))
	}
	return b
}

// encCache writes an informer's cache: the objects as last delivered,
// each in full (ownerReferences shared with the entry before cost a bit).
// It does not refer to the store, so a write that changes the store but
// not the cache leaves this part as it was.
func (s *State) encCache(b []byte, w *Watcher) []byte {
	b = binary.AppendUvarint(b, uint64(len(w.Cache)))
	var prev []OwnerRef
	for i := range w.Cache {
		o := &w.Cache[i]
		b = s.encObjectBody(binary.AppendUvarint(b, uint64(o.UID)), o, &prev)
	}
	return b
}

// eventReplaces flags, in an encoded event's type byte, an event with
// WatchEvent.Replaces, whose UID follows.
const eventReplaces = 0x80

// encQueues writes a bit mask of an informer's non-empty queues, then
// those queues. A queued event's object equal to the cached one with its
// UID is written as the UID with the low bit set: a DELETED event carries
// the object as the cache still has it. pos, if not nil, is a position
// table of the cache (cachePositions). known, if not nil, describes the
// queues of a state with the same cache (queuedRefs).
func (s *State) encQueues(b []byte, w *Watcher, pos *[256]uint8, known *queuedRefs) []byte {
	var mask uint64
	n := 0 // events
	if w.Queues != nil {
		for k := range w.Queues {
			if l := len(w.Queues[k]); l > 0 {
				mask |= 1 << k
				n += l
			}
		}
	}
	b = binary.AppendUvarint(b, mask)
	if mask == 0 {
		return b
	}
	var prev []OwnerRef
	if pos == nil && n > 2 { // a position table pays off from a few lookups on
		pos = s.memory().cachePositions(w.Cache)
	}
	// Most of the kinds' queues are empty: only those in the mask are
	// visited.
	for m := mask; m != 0; m &= m - 1 {
		k := bits.TrailingZeros64(m)
		q := w.Queues[k]
		b = binary.AppendUvarint(b, uint64(len(q)))
		refs := known.sameRefs(k, q)
		for i := range q {
			o := &q[i].Obj
			if q[i].Replaces != 0 { // the flag, then the UID replaced
				b = binary.AppendUvarint(append(b, byte(q[i].Type)|eventReplaces), uint64(q[i].Replaces))
			} else {
				b = append(b, byte(q[i].Type))
			}
			if refs&1 != 0 {
				refs >>= 1
				b = binary.AppendUvarint(b, uint64(o.UID)<<1|1)
				continue
			}
			refs >>= 1
			if c := cachedIn(w.Cache, pos, o.UID); c != nil && sameObject(o, c) {
				b = binary.AppendUvarint(b, uint64(o.UID)<<1|1)
			} else {
				b = s.encObjectBody(binary.AppendUvarint(b, uint64(o.UID)<<1), o, &prev)
			}
		}
	}
	return b
}

// queuedRefs describes the queues of a decoded watcher: which of their
// first 64 events each are references to the cache. For a state with the
// same cache, a queued event equal to one of them in memory is the same
// kind of event, so encQueues need not compare it with the cache (a step
// that pushes an event copies the events queued before it).
type queuedRefs struct {
	queues *[NumKinds][]WatchEvent
	refs   [NumKinds]uint64 // bit i: event i of queues[k] is a reference
}

// sameRefs returns a bit mask of the events of q, queued for kind k, that
// are references to the cache: those among the first events that are in
// memory the described ones, 0 if they are not.
func (r *queuedRefs) sameRefs(k int, q []WatchEvent) uint64 {
	if r == nil || r.refs[k] == 0 {
		return 0
	}
	p := r.queues[k]
	n := min(len(q), len(p), 64)
	if &q[0] != &p[0] && string(eventBytes(q[:n])) != string(eventBytes(p[:n])) {
		return 0
	}
	return r.refs[k] & (1<<n - 1)
}

// eventBytes is the memory of the events.
func eventBytes(q []WatchEvent) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(q))), uintptr(len(q))*unsafe.Sizeof(WatchEvent{}))
}

// queuedRefs returns the queuedRefs of the decoded state's GC (c = 0) or
// controllers' (1) queues, qs, or nil if none are references.
func (d *Decoder) queuedRefs(c int, qs *[NumKinds][]WatchEvent) *queuedRefs {
	r := &d.refs[c]
	if qs == nil || r.queues != qs {
		return nil
	}
	return r
}

// cachePositions records, for each object of a cache whose UID is small
// enough, its position, so that cachedIn finds an object by UID without
// a search. It returns nil (search) without a workspace.
func (w *workspace) cachePositions(cache []Object) *[256]uint8 {
	if w == nil || len(cache) > 256 {
		return nil
	}
	fillCachePositions(&w.cachePos, cache)
	return &w.cachePos
}

// fillCachePositions records in pos the position of each object of the
// cache whose UID is below 256 (see cachedIn).
func fillCachePositions(pos *[256]uint8, cache []Object) {
	for i := range cache {
		if u := cache[i].UID; u < 256 {
			pos[u] = uint8(i)
		}
	}
}

// cachedIn returns the object of the cache with this UID, or nil. pos is
// what cachePositions returned for this cache: its entries for UIDs the
// cache does not hold are stale, so a position is used only if the
// object there has the UID.
func cachedIn(cache []Object, pos *[256]uint8, uid UID) *Object {
	if pos == nil || uid >= 256 {
		return objectByUID(cache, uid)
	}
	if p := int(pos[uid]); p < len(cache) && cache[p].UID == uid {
		return &cache[p]
	}
	return nil
}

// ---- decoding ----

// ErrBadEncoding is returned by Decode for bytes Encode did not produce.
var ErrBadEncoding = errors.New("model: malformed state encoding")

// Decode reads a state Encode wrote. The state owns its memory.
func Decode(enc []byte) (*State, error) {
	var d Decoder
	s, err := d.Decode(enc)
	if err != nil {
		return nil, err
	}
	c := *s
	c.mem = nil // the heap from now on: the state may be shared freely
	return &c, nil
}

// Decoder decodes states into memory it reuses from one Decode to the
// next, so that a checker expanding millions of states does not allocate
// for each. The state Decode returns, and every state derived from it by
// Apply, Canonical, Settle or Quiescent, allocates from the same memory
// (see workspace) and is valid only until the next Decode on the same
// Decoder; such states must not be used from more than one goroutine.
// Strings are interned per Decoder.
//
// Decoded slices have their capacity clipped to their length, so an
// append by the model always copies, as copy-on-write requires. Empty
// slices decode as nil. A Decoder is not safe for concurrent use.
type Decoder struct {
	strs map[string]string
	// ws is where states derived from the decoded one allocate; it is
	// reset at every Decode. pws[p] holds the decoded part p; it is reset
	// when part p is decoded again.
	ws    workspace
	pws   [numParts]workspace
	cur   *workspace
	state State
	// last is the last decode's encoding and lastParts where each of its
	// parts starts, valid if that decode succeeded.
	last      []byte
	lastParts [numParts + 1]int
	valid     bool
	// the UID table last decoded, and its encoding
	uidInfos []UIDInfo
	uidBytes []byte
	// where each part of the last decoded state's encoding starts (and,
	// at numParts, where it ends)
	parts [numParts + 1]int
	// cachePos[c] holds cachePositions of the decoded GC cache (c = 0)
	// or controllers' cache (1), for decoding their queues, valid while
	// cachePosOK[c]: until that cache part is decoded again.
	cachePos   [2][256]uint8
	cachePosOK [2]bool
	// refs[c] describes the decoded state's queues of the same watcher:
	// the GC's (c = 0) or controllers' (1).
	refs [2]queuedRefs

	b   []byte
	i   int
	bad bool
	s   *State
}

// Decode reads a state Encode wrote into the Decoder's memory, invalidating
// the state the previous call returned (see Decoder).
func (d *Decoder) Decode(enc []byte) (*State, error) {
	if d.strs == nil {
		d.strs = map[string]string{}
	}
	d.ws.reset()
	d.b, d.i, d.bad = enc, 0, false
	// d.state keeps the parts of the state decoded last: a part whose
	// bytes recur is not decoded again (frontier neighbours are mostly
	// siblings that differ in a part or two).
	s := &d.state
	s.mem = &d.ws
	d.s = s
	var uids bool // the UID table is the last decode's
	d.parts[partUIDs] = 0
	s.UIDs, uids = d.uidTable()
	// Every part reads names from the UID table: with another table no
	// part is reused.
	reusable := d.valid && uids
	// Parts are matched against the last encoding in runs: one scan finds
	// how far the bytes from a part on agree with the last encoding's
	// from the same part on (up to limit in the last encoding), and every
	// part within that reach is the last decode's. A part decoded anew
	// ends the run. A watcher's queued copies of cached objects share the
	// cache's memory, so its queues are the last decode's only if its
	// cache is too: their part, which follows the cache's, does not start
	// a run, which then either holds the cache's part as well or starts
	// after a cache decoded anew.
	i := d.i
	for part := partUIDs + 1; part < numParts; part++ {
		if reusable && part != partGCQueues && part != partControllerQueues {
			from := d.lastParts[part]
			limit := from + commonPrefix(d.b[i:], d.last[from:])
			// Within a run the parts lie where they lay in the last
			// encoding, shifted by off.
			off := i - from
			for ; part < numParts && d.lastParts[part+1] <= limit; part++ {
				// The part encodings are self-delimiting, so equal
				// leading bytes are the whole part.
				d.parts[part] = d.lastParts[part] + off
			}
			i = d.lastParts[part] + off
			if part == numParts {
				break
			}
		}
		d.parts[part] = i
		d.i = i
		d.cur = &d.pws[part]
		d.cur.reset()
		d.decPart(s, part)
		i = d.i
	}
	d.i = i
	d.parts[numParts] = d.i
	d.valid = !d.bad && d.i == len(d.b)
	if !d.valid {
		return nil, ErrBadEncoding
	}
	d.last, d.lastParts = append(d.last[:0], d.b...), d.parts
	return s, nil
}

// Decode takes the part before a queues part to be its cache.
var (
	_ = [1]struct{}{}[partGCQueues-partGCCache-1]
	_ = [1]struct{}{}[partControllerQueues-partControllerCache-1]
)

func (d *Decoder) decPart(s *State, part int) {
	g := &s.GC
	switch part {
	case partUIDs:
		s.UIDs, _ = d.uidTable()
	case partObjects:
		s.Objects = d.objects(d.bounded(d.uvarint()))
	case partGCCache:
		d.cache(&g.Watch)
		d.cachePosOK[0] = false
	case partGCQueues:
		d.queues(&g.Watch, 0)
	case partNodes:
		g.Nodes = nil
		if n := d.bounded(d.uvarint()); n > 0 {
			g.Nodes = d.cur.nodes.take(n)
			var prev []OwnerRef
			for i := range g.Nodes {
				nd := &g.Nodes[i]
				nd.Identity = d.ident()
				f := d.byte()
				nd.Virtual, nd.BeingDeleted, nd.DeletingDependents = f&1 != 0, f&2 != 0, f&4 != 0
				if f&nodeSameOwners != 0 {
					nd.Owners = prev
				} else {
					nd.Owners = d.refList()
				}
				prev = nd.Owners
				nd.Dependents = d.uidList()
			}
		}
	case partVirtualEvents:
		g.VirtualEvents = d.identList()
	case partAttemptToDelete:
		g.AttemptToDelete = d.identList()
	case partAttemptToOrphan:
		g.AttemptToOrphan = d.identList()
	case partDetached:
		g.Detached = nil
		if n := d.bounded(d.uvarint()); n > 0 {
			g.Detached = make([]Detached, n)
			for i := range g.Detached {
				g.Detached[i].UID = UID(d.uvarint())
				g.Detached[i].Dependents = d.uidList()
			}
		}
	case partInFlight:
		g.InFlight = nil
		if n := d.bounded(d.uvarint()); n > 0 {
			g.InFlight = d.cur.inflight.take(n)
			for i := range g.InFlight {
				f := &g.InFlight[i]
				f.UID = UID(d.uvarint())
				ws := d.cur.writes.take(d.bounded(d.uvarint()))
				for j := range ws {
					w := &ws[j]
					w.Op, w.Policy = WriteOp(d.byte()), Policy(d.byte())
					w.Item = d.ident()
					w.RV = unzigzag(d.uvarint())
					w.Owners = d.refList()
					w.Remove = d.uidList()
					w.Waited = d.uidList()
				}
				f.Writes = ws
			}
		}
	case partAbsent:
		g.Absent = d.identList()
	case partMonitored:
		g.Monitored = uint32(d.uvarint())
	case partControllerCache:
		d.cache(&s.Controller.Watch)
		d.cachePosOK[1] = false
	case partControllerQueues:
		d.queues(&s.Controller.Watch, 1)
	case partOrphans:
		s.Orphans = nil
		if n := d.bounded(d.uvarint()); n > 0 {
			s.Orphans = d.cur.orphans.take(n)
			for i := range s.Orphans {
				o := &s.Orphans[i]
				o.Owner, o.Dep = UID(d.uvarint()), UID(d.uvarint())
				f := d.byte()
				o.Ran, o.Seen, o.Switched, o.Overridden = f&1 != 0, f&2 != 0, f&4 != 0, Override(f>>3)
			}
		}
	case partEvents:
		s.Events = nil
		if n := d.bounded(d.uvarint()); n > 0 {
			s.Events = d.cur.strs.take(n)
			for i := range s.Events {
				s.Events[i] = d.str()
			}
		}
	case partBudget:
		s.Budget = d.uvarint()
	}
}

// uidTable decodes the UID table. It changes only when an object is
// created, so the table last decoded is kept, outside the workspace,
// and reused when its bytes recur: the model never writes a UID table in
// place.
func (d *Decoder) uidTable() (uids []UIDInfo, same bool) {
	start := d.i
	// The table is self-delimiting: if the bytes ahead begin with the
	// last table's, they are that table.
	if prev := d.uidBytes; d.uidInfos != nil && len(prev) <= len(d.b)-start && string(d.b[start:start+len(prev)]) == string(prev) {
		d.i += len(prev)
		return d.uidInfos, true
	}
	n := d.bounded(d.uvarint())
	if n == 0 {
		same = d.uidInfos == nil
		d.uidInfos, d.uidBytes = nil, d.uidBytes[:0]
		return nil, same
	}
	uids = make([]UIDInfo, n)
	prevNS := ""
	for i := range uids {
		u := &uids[i]
		u.Kind = KindID(d.byte())
		if u.Kind != NoKind && int(u.Kind) >= NumKinds {
			d.bad = true
		}
		if l := d.uvarint(); l > 0 {
			u.Namespace = d.strN(l - 1)
			prevNS = u.Namespace
		} else {
			u.Namespace = prevNS
		}
		u.Name, u.Symbol = d.str(), d.str()
		u.Nth = unzigzag(d.uvarint())
	}
	if d.bad {
		return nil, false
	}
	d.uidInfos, d.uidBytes = uids, append(d.uidBytes[:0], d.b[start:d.i]...)
	return uids, false
}

// commonPrefix returns the length of the longest common prefix of a and
// b, comparing 8 bytes at a time.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// uvarint reads a uvarint as binary.Uvarint does. It makes no call, so
// that the compiler inlines it: the decoder reads one per field.
func (d *Decoder) uvarint() uint64 {
	var x uint64
	var s uint
	for i := d.i; i < len(d.b); i++ {
		c := uint64(d.b[i])
		x |= (c & 0x7f) << (s & 63)
		if c < 0x80 {
			if s >= 63 && (s > 63 || c > 1) { // past 64 bits
				break
			}
			d.i = i + 1
			return x
		}
		s += 7
	}
	d.bad = true
	return 0
}

// unzigzag is the value of a varint whose zigzag encoding u is, read as
// unzigzag(d.uvarint()) as binary.Varint reads it (one method would be
// too large for the compiler to inline).
func unzigzag(u uint64) int {
	x := int(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *Decoder) byte() byte {
	if d.i >= len(d.b) {
		d.bad = true
		return 0
	}
	c := d.b[d.i]
	d.i++
	return c
}

// bounded checks a length read as d.bounded(d.uvarint()) against the
// bytes left, so that a corrupt length cannot make the decoder allocate
// without limit. (One method reading and checking would be too large for
// the compiler to inline, and the decoder reads a length per list.)
func (d *Decoder) bounded(n uint64) int {
	if n > uint64(len(d.b)-d.i) {
		d.bad = true
		return 0
	}
	return int(n)
}

func (d *Decoder) str() string { return d.strN(d.uvarint()) }

// strN reads a string of n bytes, interned.
func (d *Decoder) strN(n uint64) string {
	if n == 0 {
		return ""
	}
	if n > uint64(len(d.b)-d.i) {
		d.bad = true
		return ""
	}
	raw := d.b[d.i : d.i+int(n)]
	d.i += int(n)
	if s, ok := d.strs[string(raw)]; ok {
		return s
	}
	s := string(raw)
	d.strs[s] = s
	return s
}

func (d *Decoder) madeFor(u UID) *UIDInfo {
	in := d.s.madeFor(u)
	if in == nil {
		d.bad = true
		return &UIDInfo{}
	}
	return in
}

// objectBody reads what encObjectBody wrote.
func (d *Decoder) objectBody(o *Object, prev *[]OwnerRef) {
	o.Kind = KindID(d.byte())
	if int(o.Kind) >= NumKinds {
		d.bad = true
	}
	f := d.byte()
	o.Deleting = f&objDeleting != 0
	if f&objImplied != 0 {
		in := d.madeFor(o.UID)
		o.Namespace, o.Name = in.Namespace, in.Name
	} else {
		o.Namespace, o.Name = d.str(), d.str()
	}
	switch {
	case f&objSameOwners != 0:
		o.Owners = *prev
	case f&objOwners != 0:
		o.Owners = d.refList()
	}
	*prev = o.Owners
	if f&objRare != 0 {
		d.rareFields(o, f)
	}
	o.RV = unzigzag(d.uvarint())
}

// rareFields reads the fields of objRare that f has.
func (d *Decoder) rareFields(o *Object, f byte) {
	if f&objFinalizers != 0 {
		o.Finalizers = d.cur.strs.take(d.bounded(d.uvarint()))
		for i := range o.Finalizers {
			o.Finalizers[i] = d.str()
		}
	}
	if f&objLabels != 0 {
		o.Labels = d.cur.labels.take(d.bounded(d.uvarint()))
		for i := range o.Labels {
			o.Labels[i] = Label{d.str(), d.str()}
		}
	}
	if f&objSelector != 0 {
		o.Selector = Label{d.str(), d.str()}
	}
	if f&objReplicas != 0 {
		o.Replicas = unzigzag(d.uvarint())
	}
}

func (d *Decoder) objects(n int) []Object {
	os := d.cur.objs.take(n)
	var prev []OwnerRef
	for i := range os {
		os[i] = Object{UID: UID(d.uvarint())}
		d.objectBody(&os[i], &prev)
	}
	return os
}

func (d *Decoder) refList() []OwnerRef {
	rs := d.cur.refs.take(d.bounded(d.uvarint()))
	for i := range rs {
		v := d.uvarint()
		r := OwnerRef{UID: UID(v >> refBits), Controller: v&refController != 0, Block: v&refBlock != 0,
			ControllerUnset: v&refControllerUnset != 0, BlockUnset: v&refBlockUnset != 0}
		if v&refImplied != 0 {
			in := d.madeFor(r.UID)
			r.Kind, r.Name = Kinds[in.Kind].Kind, in.Name
		} else {
			r.Kind, r.Name = d.str(), d.str()
		}
		rs[i] = r
	}
	return rs
}

func (d *Decoder) uidList() []UID {
	us := d.cur.uids.take(d.bounded(d.uvarint()))
	for i := range us {
		us[i] = UID(d.uvarint())
	}
	return us
}

func (d *Decoder) ident() Identity {
	v := d.uvarint()
	id := Identity{UID: UID(v >> 1)}
	if v&1 != 0 {
		in := d.madeFor(id.UID)
		id.Kind, id.Namespace, id.Name = Kinds[in.Kind].Kind, in.Namespace, in.Name
	} else {
		id.Kind, id.Namespace, id.Name = d.str(), d.str(), d.str()
	}
	return id
}

func (d *Decoder) identList() []Identity {
	ids := d.cur.idents.take(d.bounded(d.uvarint()))
	for i := range ids {
		ids[i] = d.ident()
	}
	return ids
}

// cache reads what encCache wrote.
func (d *Decoder) cache(w *Watcher) {
	w.Cache = d.cur.objs.take(d.bounded(d.uvarint()))
	var prev []OwnerRef
	for i := range w.Cache {
		w.Cache[i] = Object{UID: UID(d.uvarint())}
		d.objectBody(&w.Cache[i], &prev)
	}
}

// cachePositions is cachePositions of the decoded state's GC cache (c =
// 0) or controllers' cache (1), cache, kept until that part is decoded
// again; nil for a cache too large to index.
func (d *Decoder) cachePositions(c int, cache []Object) *[256]uint8 {
	if len(cache) > 256 {
		return nil
	}
	if !d.cachePosOK[c] {
		fillCachePositions(&d.cachePos[c], cache)
		d.cachePosOK[c] = true
	}
	return &d.cachePos[c]
}

// queues reads what encQueues wrote; the cache is decoded already, c
// says which (0 the GC's, 1 the controllers').
func (d *Decoder) queues(w *Watcher, c int) {
	w.Queues = nil
	d.refs[c].queues = nil
	mask := d.uvarint()
	if mask >= 1<<NumKinds {
		d.bad = true
		return
	}
	if mask == 0 {
		return
	}
	var prev []OwnerRef
	pos := d.cachePositions(c, w.Cache)
	w.Queues = &d.cur.queues.take(1)[0]
	*w.Queues = [NumKinds][]WatchEvent{}
	refs := &d.refs[c]
	refs.queues, refs.refs = w.Queues, [NumKinds]uint64{}
	for m := mask; m != 0; m &= m - 1 { // the non-empty queues
		k := bits.TrailingZeros64(m)
		q := d.cur.events.take(d.bounded(d.uvarint()))
		for i := range q {
			t := d.byte()
			if q[i].Type, q[i].Replaces = EventType(t&^eventReplaces), 0; t&eventReplaces != 0 {
				q[i].Replaces = UID(d.uvarint())
			}
			o := &q[i].Obj
			v := d.uvarint()
			uid := UID(v >> 1)
			if v&1 == 0 {
				*o = Object{UID: uid}
				d.objectBody(o, &prev)
				continue
			}
			c := cachedIn(w.Cache, pos, uid)
			if c == nil {
				d.bad = true
				*o = Object{}
				continue
			}
			*o = *c
			if i < 64 {
				refs.refs[k] |= 1 << i
			}
		}
		w.Queues[k] = q
	}
}
