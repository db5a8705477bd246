package lin

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// The checker's state is a store of objects keyed by (kind, namespace,
// name), the API server's view of one partition of the run.
//
// Stores are immutable and copy-on-write: a step builds a new store that
// shares every bucket it does not touch with its predecessor, so cloning
// costs one array of nBuckets pointers plus the one bucket written.
// porcupine keeps every state it caches, so this is what bounds memory.
// Each store carries the XOR of its entries' hashes, kept up to date per
// step, so Hash is O(1) and Equal rejects most unequal pairs at once.

// nBuckets is the store's fan-out. Keys spread by hash; a bucket is a
// short slice sorted by key.
const nBuckets = 32

// Flags of an entry an ambiguous write (one that may or may not have been
// applied) left uncertain. A rule that needs an uncertain fact does not
// judge: the checker flags only what it is sure of.
const (
	uidUnknown     uint8 = 1 << iota // an ambiguous create: the UID the server chose is unknown
	rvUnknown                        // obj.RV is only a lower bound (exclusive) of the real one
	contentUnknown                   // an ambiguous update or patch: only the UID is known
	// removed marks a tombstone: the object left storage; obj is its
	// last state as far as the history shows, end the remover's Return.
	// get and each pass over tombstones; they serve only the writes that
	// answer a removal someone else made (see removedMeanwhile).
	removed
)

// mark names the write (the op's index in the history) that established
// a fact of an entry; noMark: none. Known-race classification reads
// marks; they are kept only in lenient mode. A mark names an op, never a
// position in the linearization, so that ops on other keys taken in
// another order leave equal states.
type mark int32

const noMark mark = -1

// refProv is the provenance of one ownerReference.
type refProv struct {
	by mark // the write that last set the reference
	// late records what the owner the reference names (by coordinates
	// and UID) was doing when that write took effect: being deleted with
	// orphan (lateOrphan) or foregroundDeletion (lateForeground).
	late uint8
}

const (
	lateOrphan uint8 = 1 << iota
	lateForeground
)

// prov is an entry's provenance: which writes established the facts the
// known-race classifications ask about.
type prov struct {
	refs     []refProv // parallel to obj.Owners
	delStart mark      // the write that started deletion
	orphan   mark      // the write that put the orphan finalizer on
	// orphanGone is the write that removed the orphan finalizer from
	// this deletion, while it lacks it (noMark otherwise).
	orphanGone mark
	fg         mark // the write that put foregroundDeletion on
	fgSeen     bool // this deletion carried foregroundDeletion at some point
	// fgGone is the write that removed foregroundDeletion from this
	// deletion, while it lacks it (noMark otherwise).
	fgGone mark
	// dressed is the write that ended the object's last bare version
	// (no finalizers, not being deleted), noMark while it is bare or
	// when it never was (see delete's kubernetes#77988).
	dressed mark
}

// putOn is the write that put the GC finalizer f on (orphan,
// foregroundDeletion), noMark for any other finalizer.
func (p *prov) putOn(f string) mark {
	switch f {
	case model.FinalizerOrphan:
		return p.orphan
	case model.FinalizerForeground:
		return p.fg
	}
	return noMark
}

func (p *prov) equal(q *prov) bool {
	if p == q {
		return true
	}
	if p == nil || q == nil {
		return false
	}
	return p.delStart == q.delStart && p.orphan == q.orphan && p.orphanGone == q.orphanGone && p.fgGone == q.fgGone && p.fg == q.fg && p.fgSeen == q.fgSeen && p.dressed == q.dressed &&
		slices.Equal(p.refs, q.refs)
}

// entry is one live object. Entries are never modified once built.
type entry struct {
	key   history.Key
	obj   *history.Object
	flags uint8
	prov  *prov // nil in strict mode
	end   int64 // a tombstone's remover's Return
	hash  uint64
}

func newEntry(k history.Key, kh uint64, obj *history.Object, objHash uint64, flags uint8, p *prov) *entry {
	h := mix(kh, objHash)
	h = mix(h, uint64(flags))
	if p != nil {
		h = mix(h, uint64(uint32(p.delStart)))
		h = mix(h, uint64(uint32(p.orphan))<<32|uint64(uint32(p.fg)))
		h = mix(h, uint64(uint32(p.dressed))<<32|uint64(uint32(p.orphanGone)))
		h = mix(h, uint64(uint32(p.fgGone)))
		for _, r := range p.refs {
			h = mix(h, uint64(uint32(r.by))<<8|uint64(r.late))
		}
		if p.fgSeen {
			h = mix(h, 1)
		}
	}
	return &entry{key: k, obj: obj, flags: flags, prov: p, hash: h}
}

// newTombstone builds the tombstone of the object cur holds, removed by
// an op returning at end: obj is its last state (cur's, at the
// resourceVersion rv when the remover answered a later one).
func newTombstone(cur *entry, kh, rv uint64, end int64) *entry {
	obj := *cur.obj
	if rv > obj.RV {
		obj.RV = rv
	}
	h := mix(mix(mix(kh, objHash(&obj)), uint64(cur.flags|removed)), uint64(end))
	return &entry{key: cur.key, obj: &obj, flags: cur.flags | removed, end: end, hash: h}
}

func (e *entry) equal(f *entry) bool {
	return e == f || (e.hash == f.hash && e.key == f.key && e.flags == f.flags && e.end == f.end && objEqual(e.obj, f.obj) && e.prov.equal(f.prov))
}

// known reports whether the entry's content (owners, finalizers, labels,
// deletion state) is certain.
func (e *entry) known() bool { return e.flags&contentUnknown == 0 }

// store is the checker's state (see the top of this file).
type store struct {
	b    *[nBuckets][]*entry
	n    int
	hash uint64
	// lastRev is the largest revision an op of the linearization leading
	// here certainly wrote (input.rev). It is a function of the set of
	// ops linearized, so it is neither compared nor hashed.
	lastRev uint64
	// found lists the known races the linearization leading here went
	// through (only when collecting; never compared or hashed).
	found *finding
}

// finding is a persistent list of Known findings.
type finding struct {
	k    Known
	next *finding
}

var emptyBuckets [nBuckets][]*entry

func newStore() *store { return &store{b: &emptyBuckets} }

// get returns the live entry at k, nil when none (a tombstone is none).
func (s *store) get(k history.Key, kh uint64) *entry {
	if e := s.at(k, kh); e != nil && e.flags&removed == 0 {
		return e
	}
	return nil
}

// tombstone returns k's tombstone, nil when k is live or never was.
func (s *store) tombstone(k history.Key, kh uint64) *entry {
	if e := s.at(k, kh); e != nil && e.flags&removed != 0 {
		return e
	}
	return nil
}

func (s *store) at(k history.Key, kh uint64) *entry {
	for _, e := range s.b[kh%nBuckets] {
		if e.key == k {
			return e
		}
	}
	return nil
}

// with returns a store in which key k holds e (nil: absent). s is unchanged.
func (s *store) with(k history.Key, kh uint64, e *entry) *store {
	i := kh % nBuckets
	old := s.b[i]
	nb := make([]*entry, 0, len(old)+1)
	t := &store{n: s.n, hash: s.hash, lastRev: s.lastRev, found: s.found}
	placed := false
	for _, x := range old {
		if x.key == k {
			t.hash ^= x.hash
			t.n--
			continue
		}
		if !placed && e != nil && keyLess(k, x.key) {
			nb, placed = append(nb, e), true
		}
		nb = append(nb, x)
	}
	if e != nil {
		if !placed {
			nb = append(nb, e)
		}
		t.hash ^= e.hash
		t.n++
	}
	b := *s.b
	b[i] = nb
	t.b = &b
	return t
}

// each calls f on every live entry until f returns false.
func (s *store) each(f func(*entry) bool) {
	for i := range s.b {
		for _, e := range s.b[i] {
			if e.flags&removed != 0 {
				continue
			}
			if !f(e) {
				return
			}
		}
	}
}

// sorted lists the entries in key order.
func (s *store) sorted() []*entry {
	var out []*entry
	s.each(func(e *entry) bool { out = append(out, e); return true })
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i].key, out[j].key) })
	return out
}

func storeEqual(a, b *store) bool {
	if a == b {
		return true
	}
	if a.hash != b.hash || a.n != b.n {
		return false
	}
	if a.b == b.b {
		return true
	}
	for i := range a.b {
		x, y := a.b[i], b.b[i]
		if len(x) != len(y) {
			return false
		}
		if len(x) > 0 && &x[0] == &y[0] {
			continue
		}
		for j := range x {
			if !x[j].equal(y[j]) {
				return false
			}
		}
	}
	return true
}

func keyLess(a, b history.Key) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// ---- hashing ----

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return (h ^ 0xff) * fnvPrime // terminator: "ab"+"c" differs from "a"+"bc"
}

// mix folds v into h (a splitmix64 finalizer over the sum).
func mix(h, v uint64) uint64 {
	x := h ^ (v + 0x9e3779b97f4a7c15 + h<<6 + h>>2)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func keyHash(k history.Key) uint64 {
	h := mix(fnvOffset, uint64(k.Kind))
	h = hashString(h, k.Namespace)
	return hashString(h, k.Name)
}

// objHash hashes every field objEqual compares.
func objHash(o *history.Object) uint64 {
	if o == nil {
		return 0
	}
	h := mix(fnvOffset, uint64(o.Kind))
	h = hashString(h, o.Namespace)
	h = hashString(h, o.Name)
	h = hashString(h, o.UID)
	h = mix(h, o.RV)
	h = mix(h, uint64(int64(o.Replicas)))
	if o.Deleting {
		h = mix(h, 1)
	}
	for _, r := range o.Owners {
		h = hashString(h, r.APIVersion)
		h = hashString(h, r.Kind)
		h = hashString(h, r.Name)
		h = hashString(h, r.UID)
		h = mix(h, b2u(r.ControllerUnset)<<3|b2u(r.BlockUnset)<<2|b2u(r.Controller)<<1|b2u(r.Block))
	}
	h = mix(h, uint64(len(o.Finalizers)))
	for _, f := range o.Finalizers {
		h = hashString(h, f)
	}
	keys := slices.Sorted(maps.Keys(o.Labels))
	for _, k := range keys {
		h = hashString(h, k)
		h = hashString(h, o.Labels[k])
	}
	return h
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func objEqual(a, b *history.Object) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.RV == b.RV && a.UID == b.UID && sameContent(a, b)
}

// sameContent compares everything but the resourceVersion and UID: what
// a write can change.
func sameContent(a, b *history.Object) bool {
	return a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name && a.Deleting == b.Deleting &&
		a.Replicas == b.Replicas && slices.Equal(a.Owners, b.Owners) && slices.Equal(a.Finalizers, b.Finalizers) &&
		maps.Equal(a.Labels, b.Labels)
}

// short abbreviates a UID for descriptions.
func short(uid string) string {
	if i := strings.IndexByte(uid, '-'); i > 0 {
		return uid[:i]
	}
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}
