package check

import (
	"sync"
	"sync/atomic"
)

// seenTable is the visited set: fingerprint -> ord, how the state was
// first reached (see packOrd). It is one open-addressing hash table of
// (fingerprint, ord) slots in a single flat, pointer-free array: the
// garbage collector never scans it, a probe touches one cache line, and
// the array can be backed by huge pages (allocHuge), which matters: a
// claim is a random access into tens of MiB, and with 4 KiB pages nearly
// every one also misses the TLB.
//
// The array is split into segments, one per shard, by the top bits of
// the fingerprint; a shard's mutex guards its segment, so two workers
// rarely wait for each other. Linear probing wraps within a segment.
// When a segment would pass half full, every segment doubles at once
// (grow takes all the shard locks).
//
// Workers claim fingerprints while they expand a level; every claim keeps
// the smallest ord offered, so when the level is done each state records
// the first (frontier position, action) that reaches it, whatever order
// the workers ran in. Between levels the table is read without locks.
type seenTable struct {
	tab    atomic.Pointer[slotTable]
	shards [numShards]seenShard
}

const (
	shardBits = 10
	numShards = 1 << shardBits
	// initial slots per segment, as a power of two: 64 K slots in all
	initialSegBits = 6
)

// slotTable is the array and how it is cut into segments. A grown table
// replaces it whole, so a worker may read the pointer without a lock to
// prefetch (touch).
type slotTable struct {
	slots   []slot
	segBits uint
}

type seenShard struct {
	mu sync.Mutex
	n  int // fingerprints in this shard's segment
	// Fingerprint 0 marks an empty slot, so a state whose fingerprint is
	// 0 is kept aside (in shard 0).
	zero    bool
	zeroOrd uint64
	_       [32]byte // 64 bytes: shards on separate cache lines
}

type slot struct{ fp, ord uint64 }

func newSeenTable() *seenTable {
	t := &seenTable{}
	t.tab.Store(&slotTable{slots: allocHuge[slot](numShards << initialSegBits), segBits: initialSegBits})
	return t
}

func shardOf(fp uint64) uint64 { return fp >> (64 - shardBits) }

// segment returns the slots of fp's segment and where fp's probe starts.
func (tb *slotTable) segment(fp uint64) ([]slot, uint64) {
	size := uint64(1) << tb.segBits
	base := shardOf(fp) << tb.segBits
	return tb.slots[base : base+size : base+size], fp & (size - 1)
}

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
	sh := &t.shards[shardOf(fp)]
	for {
		sh.mu.Lock()
		if fp == 0 {
			fresh = !sh.zero
			if fresh {
				sh.zero, sh.zeroOrd = true, ord
			} else {
				sh.zeroOrd = min(sh.zeroOrd, ord)
			}
			sh.mu.Unlock()
			return fresh
		}
		tb := t.tab.Load()
		// Keep every segment at most half full: linear probing stays
		// short and the table costs 32 to 64 bytes per state.
		if 2*(sh.n+1) <= 1<<tb.segBits {
			fresh = sh.claimIn(tb, fp, ord)
			sh.mu.Unlock()
			return fresh
		}
		sh.mu.Unlock()
		t.grow(tb)
	}
}

func (sh *seenShard) claimIn(tb *slotTable, fp, ord uint64) bool {
	seg, i := tb.segment(fp)
	mask := uint64(len(seg) - 1)
	for ; ; i = (i + 1) & mask {
		sl := &seg[i]
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

// grow doubles every segment, unless another worker has replaced old
// already.
func (t *seenTable) grow(old *slotTable) {
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	if t.tab.Load() == old {
		tb := &slotTable{slots: allocHuge[slot](2 * len(old.slots)), segBits: old.segBits + 1}
		for _, sl := range old.slots {
			if sl.fp == 0 {
				continue
			}
			seg, i := tb.segment(sl.fp)
			mask := uint64(len(seg) - 1)
			for seg[i].fp != 0 {
				i = (i + 1) & mask
			}
			seg[i] = sl
		}
		t.tab.Store(tb)
	}
	for i := range t.shards {
		t.shards[i].mu.Unlock()
	}
}

// touch prefetches the slot where fp's probe starts, without a lock, so
// that the cache line is on its way while the worker computes the next
// successor; the claim that follows then rarely waits for memory. A
// table replaced meanwhile is harmless: the prefetch is only a hint, and
// the garbage collector keeps the old array while it is referenced.
func (t *seenTable) touch(fp uint64) {
	tb := t.tab.Load()
	seg, i := tb.segment(fp)
	prefetch(&seg[i])
}

// get returns fp's ord. The table must be quiescent.
func (t *seenTable) get(fp uint64) (uint64, bool) {
	sh := &t.shards[shardOf(fp)]
	if fp == 0 {
		return sh.zeroOrd, sh.zero
	}
	seg, i := t.tab.Load().segment(fp)
	mask := uint64(len(seg) - 1)
	for ; ; i = (i + 1) & mask {
		sl := &seg[i]
		if sl.fp == fp {
			return sl.ord, true
		}
		if sl.fp == 0 {
			return 0, false
		}
	}
}
