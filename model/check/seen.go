package check

import (
	"sync"
	"sync/atomic"
)

// seenTable is the visited set: fingerprint -> ord, how the state was
// first reached (see packOrd). It is split into shards by the top bits of
// the fingerprint, each an open-addressing hash table with linear probing
// over one flat, pointer-free array behind its own mutex: the garbage
// collector never scans it, a probe touches one cache line, and two
// workers rarely want the same shard at once.
//
// Workers claim fingerprints while they expand a level; every claim keeps
// the smallest ord offered, so when the level is done each state records
// the first (frontier position, action) that reaches it, whatever order
// the workers ran in. Between levels the table is read without locks.
type seenTable struct {
	shards [numShards]seenShard
}

const (
	shardBits = 10
	numShards = 1 << shardBits
)

type seenShard struct {
	mu sync.Mutex
	// slots is replaced, never resized in place, when the shard grows,
	// and published atomically so that touch may find it without the
	// lock.
	slots atomic.Pointer[[]slot]
	n     int
	// Fingerprint 0 marks an empty slot, so a state whose fingerprint is
	// 0 is kept aside (in shard 0).
	zero    bool
	zeroOrd uint64
	_       [8]byte // 64 bytes: shards on separate cache lines
}

type slot struct{ fp, ord uint64 }

func newSeenTable() *seenTable { return &seenTable{} }

func (t *seenTable) shard(fp uint64) *seenShard { return &t.shards[fp>>(64-shardBits)] }

// len is the number of fingerprints stored; the table must be quiescent.
func (t *seenTable) len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		n += sh.n
		if sh.zero {
			n++
		}
	}
	return n
}

// claim records that fp is reached with ord. It reports whether fp was
// new; otherwise fp keeps the smaller of its ord and this one.
func (t *seenTable) claim(fp, ord uint64) (fresh bool) {
	sh := t.shard(fp)
	sh.mu.Lock()
	fresh = sh.claim(fp, ord)
	sh.mu.Unlock()
	return fresh
}

func (sh *seenShard) claim(fp, ord uint64) bool {
	if fp == 0 {
		if sh.zero {
			sh.zeroOrd = min(sh.zeroOrd, ord)
			return false
		}
		sh.zero, sh.zeroOrd = true, ord
		return true
	}
	// Keep the load factor at most 1/2: linear probing stays short and
	// the table costs 32 bytes per state.
	slots := sh.table()
	if 2*(sh.n+1) > len(slots) {
		slots = sh.grow()
	}
	mask := uint64(len(slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		sl := &slots[i]
		if sl.fp == fp {
			sl.ord = min(sl.ord, ord)
			return false
		}
		if sl.fp == 0 {
			sl.fp, sl.ord = fp, ord
			sh.n++
			return true
		}
	}
}

func (sh *seenShard) table() []slot {
	if p := sh.slots.Load(); p != nil {
		return *p
	}
	return nil
}

// touch prefetches the slot where fp's probe starts, without the lock,
// so that the cache line is on its way while the worker computes the
// next successor; the claim that follows then rarely waits for memory.
// A stale slots array is harmless: the prefetch is only a hint.
func (t *seenTable) touch(fp uint64) {
	if p := t.shard(fp).slots.Load(); p != nil && len(*p) > 0 {
		prefetch(&(*p)[fp&uint64(len(*p)-1)])
	}
}

// get returns fp's ord. The table must be quiescent.
func (t *seenTable) get(fp uint64) (uint64, bool) {
	sh := t.shard(fp)
	if fp == 0 {
		return sh.zeroOrd, sh.zero
	}
	if sh.n == 0 {
		return 0, false
	}
	slots := sh.table()
	mask := uint64(len(slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		sl := &slots[i]
		if sl.fp == fp {
			return sl.ord, true
		}
		if sl.fp == 0 {
			return 0, false
		}
	}
}

func (sh *seenShard) grow() []slot {
	old := sh.table()
	slots := make([]slot, max(2*len(old), 64))
	mask := uint64(len(slots) - 1)
	for _, sl := range old {
		if sl.fp == 0 {
			continue
		}
		i := sl.fp & mask
		for slots[i].fp != 0 {
			i = (i + 1) & mask
		}
		slots[i] = sl
	}
	sh.slots.Store(&slots)
	return slots
}
