package check

// seenTable is the visited set: fingerprint -> how the state was first
// reached (a packed ord, see packOrd). It is an open-addressing hash table
// with linear probing over one flat, pointer-free array, so that the
// garbage collector never scans it and a probe touches one cache line.
// It is written only by the level merge, which is single-threaded, and
// read by the workers only between merges, so it needs no locks.
type seenTable struct {
	slots []slot
	n     int
	// Fingerprint 0 marks an empty slot, so a state whose fingerprint is
	// 0 is kept aside.
	zero    bool
	zeroOrd uint64
}

type slot struct{ fp, ord uint64 }

const seenMinSlots = 1 << 10

func newSeenTable() *seenTable { return &seenTable{slots: make([]slot, seenMinSlots)} }

// len is the number of fingerprints stored.
func (t *seenTable) len() int {
	if t.zero {
		return t.n + 1
	}
	return t.n
}

// insert stores fp with ord unless fp is already there; it reports
// whether fp was new.
func (t *seenTable) insert(fp, ord uint64) bool {
	if fp == 0 {
		if t.zero {
			return false
		}
		t.zero, t.zeroOrd = true, ord
		return true
	}
	// Keep the load factor at most 1/2: linear probing stays short and
	// the table costs 32 bytes per state.
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.fp == fp {
			return false
		}
		if sl.fp == 0 {
			sl.fp, sl.ord = fp, ord
			t.n++
			return true
		}
	}
}

// get returns fp's ord; fp must be stored.
func (t *seenTable) get(fp uint64) (uint64, bool) {
	if fp == 0 {
		return t.zeroOrd, t.zero
	}
	mask := uint64(len(t.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.fp == fp {
			return sl.ord, true
		}
		if sl.fp == 0 {
			return 0, false
		}
	}
}

func (t *seenTable) grow() {
	old := t.slots
	t.slots = make([]slot, 2*len(old))
	mask := uint64(len(t.slots) - 1)
	for _, sl := range old {
		if sl.fp == 0 {
			continue
		}
		i := sl.fp & mask
		for t.slots[i].fp != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = sl
	}
}

// reserve grows the table ahead of n more insertions, so that the merge
// does not rehash in the middle of a level.
func (t *seenTable) reserve(n int) {
	for 2*(t.n+n) > len(t.slots) {
		t.grow()
	}
}

// fpSet is a worker's scratch set of the fingerprints one block of the
// frontier has produced, to drop successors the same block reached
// already before they are stored. reset is O(1): a slot is live only if
// its stamp is the current generation.
type fpSet struct {
	keys  []uint64
	stamp []uint32
	gen   uint32
	n     int
}

func (s *fpSet) reset() {
	s.n = 0
	s.gen++
	if s.gen == 0 { // wrapped: old stamps could look current
		clear(s.stamp)
		s.gen = 1
	}
}

// add inserts k and reports whether it was absent.
func (s *fpSet) add(k uint64) bool {
	if 2*(s.n+1) > len(s.keys) {
		s.grow()
	}
	mask := uint64(len(s.keys) - 1)
	for i := k & mask; ; i = (i + 1) & mask {
		if s.stamp[i] != s.gen {
			s.stamp[i], s.keys[i] = s.gen, k
			s.n++
			return true
		}
		if s.keys[i] == k {
			return false
		}
	}
}

func (s *fpSet) grow() {
	keys, stamp, gen := s.keys, s.stamp, s.gen
	size := max(2*len(keys), 256)
	s.keys, s.stamp, s.gen, s.n = make([]uint64, size), make([]uint32, size), 1, 0
	for i, k := range keys {
		if stamp[i] == gen {
			s.add(k)
		}
	}
}
