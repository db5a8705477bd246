package check

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// seenTable is the visited set: fingerprint -> ord, how the state was
// first reached (see packOrd). It is one open-addressing hash table of
// (fingerprint, inverted ord) slots in a single flat, pointer-free array:
// the garbage collector never scans it, a probe touches one cache line,
// and the array can be backed by huge pages (allocHuge), which matters: a
// claim is a random access into tens of MiB, and with 4 KiB pages nearly
// every one also misses the TLB.
//
// Workers claim fingerprints while they expand a level, without locks: a
// new fingerprint takes an empty slot by compare-and-swap, and every
// claim raises the slot's inverted ord to its own with an atomic maximum,
// so the slot ends up with the smallest ord offered, the first (frontier
// position, action) that reaches the state, whatever order the workers
// ran in. (A mutex per shard cost a cache-line transfer per claim between
// two workers, about a tenth of their time.)
//
// The array is cut into segments by the top bits of the fingerprint, and
// linear probing wraps within a segment. When a segment passes half
// full, every segment doubles at once: the grower raises growing, waits
// until no worker is inside a claim (each announces itself in its own
// claimer, so claims share no written cache line), and rehashes. Between
// levels the table is read without synchronisation.
type seenTable struct {
	tab     atomic.Pointer[slotTable]
	growing atomic.Bool
	growMu  sync.Mutex // one grower at a time; claimers wait on it
	// claimers[i] belongs to worker i (one more for the root's claim).
	claimers []claimer
	// counts[s] is how many fingerprints segment s holds.
	counts [numShards]atomic.Int64
	// Fingerprint 0 marks an empty slot, so a state whose fingerprint is
	// 0 is kept aside.
	zeroMu    sync.Mutex
	zero      bool
	zeroOrd   uint64
	zeroAwake uint32
}

// claimer says whether its worker may be inside a claim; it fills a
// cache line so that workers never write the same one. A worker stays
// active over a whole block of claims (enter, leave), so that it does
// not pay for a sequentially consistent store on every claim; it steps
// out when it sees a grower waiting.
type claimer struct {
	active  atomic.Bool
	entered bool // owned by the worker: between enter and leave
	_       [62]byte
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
	// awake, in a masked table, holds beside each slot the complement of
	// the state's sleep set of partial-order reduction (see reduction.go):
	// every claim ORs its own into it, so the sleep set is the AND over
	// the claims. It is nil otherwise.
	awake []uint32
}

// slot holds a fingerprint and the bitwise complement of its ord: 0, the
// empty slot's value, is then the largest ord, and keeping the smallest
// ord is an atomic maximum.
type slot struct{ fp, inv uint64 }

// newSeenTable returns a table for the given number of workers, which
// claim with claimer(0) to claimer(workers-1); claimer(workers) is spare.
// With masked, every slot has an awake mask beside it that claims OR
// together (slotTable.awake). expect is how many states the search is
// expected to store (Options.ExpectStates; 0: unknown): the table starts
// large enough for them (segBitsFor) instead of growing to it.
func newSeenTable(workers int, masked bool, expect int64) *seenTable {
	t := &seenTable{claimers: make([]claimer, workers+1)}
	bits := segBitsFor(expect)
	tb := &slotTable{slots: allocHuge[slot](numShards << bits), segBits: bits}
	if masked {
		tb.awake = allocHuge[uint32](len(tb.slots))
	}
	t.tab.Store(tb)
	return t
}

func (t *seenTable) claimer(i int) *claimer { return &t.claimers[i] }

// MaxExpectStates bounds Options.ExpectStates: a table for 2^28 states
// takes 16 GiB of address space (20 GiB with the awake masks; less is
// touched until states arrive).
const MaxExpectStates = 1 << 28

// segBitsFor is the segment size, as a power of two, a table for expect
// states starts with: the smallest (at least initialSegBits) whose
// segments stay at most half full, as claim keeps them, with room for
// the fullest segment. Fingerprints are uniform, so a segment's count is
// about binomial: its mean plus four standard deviations (and a few
// slots) covers the fullest of 1024 segments but in a tiny fraction of
// searches, where the table then grows once as without a hint. This is
// what SPIN's -w gives pan: a table sized before the search, so no
// rehash during it.
func segBitsFor(expect int64) uint {
	bits := uint(initialSegBits)
	if expect <= 0 {
		return bits
	}
	mean := float64(min(expect, MaxExpectStates)) / numShards
	need := mean + 4*math.Sqrt(mean) + 8
	for float64(uint64(1)<<bits)/2 < need {
		bits++
	}
	return bits
}

func shardOf(fp uint64) uint64 { return fp >> (64 - shardBits) }

// segment returns the slots of fp's segment, where fp's probe starts,
// and the segment's first slot's index in tb.slots.
func (tb *slotTable) segment(fp uint64) ([]slot, uint64, uint64) {
	size := uint64(1) << tb.segBits
	base := shardOf(fp) << tb.segBits
	return tb.slots[base : base+size : base+size], fp >> 1 & (size - 1), base
}

// orAwake ORs a claim's awake mask into slot i's.
func (tb *slotTable) orAwake(i uint64, awake uint32) {
	if tb.awake == nil {
		return
	}
	if old := atomic.LoadUint32(&tb.awake[i]); old|awake != old {
		atomic.OrUint32(&tb.awake[i], awake)
	}
}

// len is the number of fingerprints stored; the table must be quiescent.
func (t *seenTable) len() int {
	n := 0
	for i := range t.counts {
		n += int(t.counts[i].Load())
	}
	if t.zero {
		n++
	}
	return n
}

// enter announces that c's worker is about to claim, and may go on
// claiming until leave. A worker must not wait for anything but the
// table between the two: a grower waits for it to reach its next claim.
func (t *seenTable) enter(c *claimer) {
	c.active.Store(true)
	c.entered = true
}

// leave ends what enter began.
func (t *seenTable) leave(c *claimer) {
	c.entered = false
	c.active.Store(false)
}

// claim records, on behalf of c's worker, that fp is reached with ord
// (and, in a masked table, with the awake mask awake). It reports whether
// fp was new; otherwise fp keeps the smaller of its ord and this one.
// Outside enter and leave it enters for itself.
func (t *seenTable) claim(c *claimer, fp, ord uint64, awake uint32) bool {
	if fp == 0 {
		t.zeroMu.Lock()
		defer t.zeroMu.Unlock()
		t.zeroAwake |= awake
		if t.zero {
			t.zeroOrd = min(t.zeroOrd, ord)
			return false
		}
		t.zero, t.zeroOrd = true, ord
		return true
	}
	if !c.entered {
		t.enter(c)
		defer t.leave(c)
	}
	for {
		// The claimer is active, then checks for a grower; a grower
		// raises growing, then checks for active claimers. The atomics
		// are sequentially consistent, so one of the two sees the other.
		if t.growing.Load() {
			c.active.Store(false)
			t.growMu.Lock() // wait for the grow to finish
			t.growMu.Unlock()
			c.active.Store(true)
			continue
		}
		tb := t.tab.Load()
		fresh, full := tb.claim(fp, ^ord, awake)
		grow := full
		if fresh {
			// Keep every segment at most half full: linear probing stays
			// short and the table costs 32 to 64 bytes per state.
			grow = 2*t.counts[shardOf(fp)].Add(1) > 1<<tb.segBits
		}
		if grow {
			t.grow(c, tb)
		}
		if !full {
			return fresh
		}
	}
}

// claim probes fp's segment. It reports whether fp was absent (and now
// is present), or that the segment is full and fp could not be added.
func (tb *slotTable) claim(fp, inv uint64, awake uint32) (fresh, full bool) {
	seg, i, base := tb.segment(fp)
	mask := uint64(len(seg) - 1)
	for range seg {
		sl := &seg[i]
		f := atomic.LoadUint64(&sl.fp)
		if f == 0 {
			if atomic.CompareAndSwapUint64(&sl.fp, 0, fp) {
				tb.orAwake(base+i, awake)
				raise(&sl.inv, inv)
				return true, false
			}
			f = atomic.LoadUint64(&sl.fp) // another worker took the slot
		}
		if f == fp {
			tb.orAwake(base+i, awake)
			raise(&sl.inv, inv)
			return false, false
		}
		i = (i + 1) & mask
	}
	return false, true
}

// raise sets *p to max(*p, v) atomically.
func raise(p *uint64, v uint64) {
	for {
		old := atomic.LoadUint64(p)
		if old >= v || atomic.CompareAndSwapUint64(p, old, v) {
			return
		}
	}
}

// grow doubles every segment, unless another worker has replaced old
// already. c is the growing worker's claimer, active on entry and on
// return. The rehash runs on every core: the workers wait meanwhile, and
// old segment s goes to new segment s only, so the segments are split
// between goroutines that share nothing.
func (t *seenTable) grow(c *claimer, old *slotTable) {
	c.active.Store(false)
	defer c.active.Store(true)
	t.growMu.Lock()
	defer t.growMu.Unlock()
	if t.tab.Load() != old {
		return
	}
	t.growing.Store(true)
	for i := range t.claimers {
		// A worker reaches its next claim within microseconds, unless
		// the system has descheduled its thread: then spinning would
		// only take the core it needs, so the grower sleeps instead.
		for spins := 0; t.claimers[i].active.Load(); spins++ {
			if spins < 64 {
				runtime.Gosched()
			} else {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	tb := &slotTable{slots: allocHuge[slot](2 * len(old.slots)), segBits: old.segBits + 1}
	if old.awake != nil {
		tb.awake = allocHuge[uint32](len(tb.slots))
	}
	parts := min(runtime.GOMAXPROCS(0), len(old.slots)>>16) // at least 64 K slots each
	if parts <= 1 {
		tb.rehash(old, 0, numShards)
	} else {
		var wg sync.WaitGroup
		for p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tb.rehash(old, p*numShards/parts, (p+1)*numShards/parts)
			}()
		}
		wg.Wait()
	}
	t.tab.Store(tb)
	t.growing.Store(false)
	// No worker reads the old array any more: claims waited for the
	// grow, and a prefetch (touch) of memory that is gone is ignored.
	freeHuge(old.slots)
	freeHuge(old.awake)
}

// free returns the table's memory; the table must not be used again.
func (t *seenTable) free() {
	if tb := t.tab.Load(); tb != nil {
		freeHuge(tb.slots)
		freeHuge(tb.awake)
		t.tab.Store(nil)
	}
}

// rehash inserts the fingerprints of old's segments [from, to) into tb.
func (tb *slotTable) rehash(old *slotTable, from, to int) {
	size := 1 << old.segBits
	for j := from * size; j < to*size; j++ {
		sl := old.slots[j]
		if sl.fp == 0 {
			continue
		}
		seg, i, base := tb.segment(sl.fp)
		mask := uint64(len(seg) - 1)
		for seg[i].fp != 0 {
			i = (i + 1) & mask
		}
		seg[i] = sl
		if tb.awake != nil {
			tb.awake[base+i] = old.awake[j]
		}
	}
}

// touch prefetches the slot where fp's probe starts, so that the cache
// line is on its way while the worker computes the next successor; the
// claim that follows then rarely waits for memory. A table replaced
// meanwhile is harmless: the prefetch is only a hint, and the garbage
// collector keeps the old array while it is referenced.
func (t *seenTable) touch(fp uint64) {
	tb := t.tab.Load()
	seg, i, base := tb.segment(fp)
	prefetch(unsafe.Pointer(&seg[i]))
	if tb.awake != nil {
		// the awake mask is a second line the claim reads
		prefetch(unsafe.Pointer(&tb.awake[base+i]))
	}
}

// get returns fp's ord. The table must be quiescent.
func (t *seenTable) get(fp uint64) (uint64, bool) {
	ord, _, ok := t.lookup(fp)
	return ord, ok
}

// lookup returns fp's ord and, in a masked table, the awake mask its
// claims ORed together (0 otherwise). The table must be quiescent.
func (t *seenTable) lookup(fp uint64) (uint64, uint32, bool) {
	if fp == 0 {
		return t.zeroOrd, t.zeroAwake, t.zero
	}
	tb := t.tab.Load()
	seg, i, base := tb.segment(fp)
	mask := uint64(len(seg) - 1)
	for range seg {
		sl := &seg[i]
		if sl.fp == fp {
			var awake uint32
			if tb.awake != nil {
				awake = tb.awake[base+i]
			}
			return ^sl.inv, awake, true
		}
		if sl.fp == 0 {
			return 0, 0, false
		}
		i = (i + 1) & mask
	}
	return 0, 0, false
}
