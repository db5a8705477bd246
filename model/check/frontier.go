package check

import (
	"github.com/cascade-k8s/cascade/model"
)

// How the search is organised. Each BFS level is expanded in two phases.
//
//  1. Expansion, in parallel: workers take blocks of frontier states in
//     turn, decode each state from its compact encoding, check it, apply
//     every enabled step, check each transition, canonicalise and encode
//     the successor and fingerprint the encoding, then claim the
//     fingerprint in the visited set with the successor's ord (its
//     parent's frontier position and its action). A claim keeps the
//     smallest ord offered; the worker whose claim is the first stores
//     the encoding, so each state's encoding is stored once.
//  2. Ordering: each worker sorts its new states by their final ords (in
//     parallel; they are nearly sorted already), and the sorted lists are
//     merged into the next frontier.
//
// The smallest ord is the (frontier position, action) a sequential BFS
// would reach the state by first, so the states, their parents, the
// frontier order and therefore the counterexamples are the same for any
// number of workers. The frontier and the visited set hold no pointers
// (encodings in byte chunks, fingerprints and ords in flat arrays), so
// the garbage collector has almost nothing to scan however large the
// search grows.
//
// Per state and per transition the work is kept to what the model needs:
// a worker decodes into memory it reuses (model.Decoder; the state and
// every successor Apply derives from it allocate from the decoder's
// arenas, reset at the next decode, and parts equal to the last decoded
// state's are not decoded again), encodes a successor by copying the
// parts it shares with its parent (Decoder.EncodeNext), skips
// canonicalisation when a step created no UID, skips the quiescence
// search when an internal step visibly changes the store, and claims a
// successor only after computing the next one, having prefetched its
// slot in the visited table meanwhile. A sleeping step's successor is
// not claimed at all, even in an unreduced search (explorer.sleep).

// blockSize is how many frontier states a worker takes at a time: small
// enough to balance the workers, large enough to make taking cheap.
const blockSize = 64

// An ord records how a state was first reached: its level, its parent's
// position in the previous level's frontier and the action index among
// the parent's successors. The root has level 0 and action rootAction.
// Ords of a deeper level are larger, so keeping the smallest keeps BFS
// order.
const (
	ordActionBits = 16
	ordIndexBits  = 32
	ordLevelBits  = 64 - ordActionBits - ordIndexBits
	rootAction    = 1<<ordActionBits - 1
	maxActions    = rootAction // actions 0..maxActions-1
	maxLevel      = 1<<ordLevelBits - 1
	maxIndex      = 1<<ordIndexBits - 1
)

func packOrd(level, idx, act int) uint64 {
	return uint64(level)<<(ordIndexBits+ordActionBits) | uint64(idx)<<ordActionBits | uint64(act)
}

func unpackOrd(o uint64) (level, idx, act int) {
	return int(o >> (ordIndexBits + ordActionBits)), int(o >> ordActionBits & maxIndex), int(o & rootAction)
}

// outBuf is one worker's output for one level: the encodings of the
// states it claimed first, in fixed-size chunks, and for each such state
// its fingerprint, ord and place. The chunks are kept and refilled level
// after level, so the output never copies a growing buffer and stays in
// memory the process has touched already.
type outBuf struct {
	chunks [][]byte
	used   int // chunks[:used] hold this level's encodings
	items  []succ
}

// chunkSize is the size of an output chunk (huge pages: see allocHuge);
// an encoding larger than what is left in a chunk goes to the next one,
// and an encoding larger than a chunk gets a chunk of its own.
const chunkSize = 4 << 20

// free returns the chunks' memory; the buffer must not be used again.
func (o *outBuf) free() {
	for _, c := range o.chunks {
		freeHuge(c)
	}
	o.chunks, o.used = nil, 0
}

func (o *outBuf) reset() {
	for i := range o.chunks[:o.used] {
		o.chunks[i] = o.chunks[i][:0]
	}
	o.used, o.items = 0, o.items[:0]
}

// tailMin is the least free room tail leaves at the end of the current
// chunk: with less it moves on to the next chunk.
const tailMin = 4 << 10

// tail returns the free end of the current chunk, empty, for an encoding
// to be appended to in place and then kept by commit. An encoding longer
// than its capacity is appended elsewhere and must be stored instead.
func (o *outBuf) tail() []byte {
	if o.used == 0 || cap(o.chunks[o.used-1])-len(o.chunks[o.used-1]) < tailMin {
		if o.used == len(o.chunks) {
			o.chunks = append(o.chunks, allocHuge[byte](chunkSize)[:0])
		}
		o.used++
	}
	c := o.chunks[o.used-1]
	return c[len(c):len(c)]
}

// commit keeps the n bytes written into the tail last returned, and
// returns their chunk and offset.
func (o *outBuf) commit(n int) (chunk, start uint32) {
	c := &o.chunks[o.used-1]
	start = uint32(len(*c))
	*c = (*c)[:len(*c)+n]
	return uint32(o.used - 1), start
}

// store appends an encoding and returns its chunk and offset.
func (o *outBuf) store(enc []byte) (chunk, start uint32) {
	if o.used == 0 || cap(o.chunks[o.used-1])-len(o.chunks[o.used-1]) < len(enc) {
		if o.used == len(o.chunks) {
			o.chunks = append(o.chunks, allocHuge[byte](max(chunkSize, len(enc)))[:0])
		}
		o.used++
		if c := &o.chunks[o.used-1]; cap(*c) < len(enc) {
			freeHuge(*c)
			*c = allocHuge[byte](len(enc))[:0]
		}
	}
	c := &o.chunks[o.used-1]
	start = uint32(len(*c))
	*c = append(*c, enc...)
	return uint32(o.used - 1), start
}

type succ struct {
	fp    uint64
	ord   uint64
	chunk uint32 // encoding: chunks[chunk][start:start+n]
	start uint32
	n     uint32
	awake uint32 // with sleep sets: the complement of the state's sleep set
}

// frontier is one BFS level. State i's encoding lives in the output
// chunks of the worker that claimed it.
type frontier struct {
	chunks [][]byte
	locs   []loc
	fps    []uint64
	awake  []uint32 // with sleep sets: each state's awake mask (reduction.go)
}

type loc struct{ chunk, start, n uint32 }

func (f *frontier) len() int { return len(f.fps) }

func (f *frontier) enc(i int) []byte {
	l := f.locs[i]
	return f.chunks[l.chunk][l.start : l.start+l.n]
}

// worker is one expanding goroutine's reusable memory. Its two output
// buffers alternate by level: one receives the states it claims, the
// other holds the part of the frontier it claimed on the level before.
type worker struct {
	seen    *seenTable
	claimer *claimer
	dec     model.Decoder
	steps   []model.Step
	infos   []sleepStep // with sleep sets: steps' classes (reduction.go)
	keys    keyMemo     // classify's keyBit memo
	trans   model.Transition
	// the successor whose claim waits for the next one to be computed;
	// its encoding is in the output buffer's tail if pendingInPlace
	pending               bool
	pendingFP, pendingOrd uint64
	pendingAwake          uint32
	pendingEnc            []byte
	pendingInPlace        bool
	bufs                  [2]outBuf
	out                   *outBuf // bufs[level%2]

	generated int64
	slept     int64
	unclaimed int64
	// open lists the Sometimes properties (indexes into
	// explorer.sometimes) not witnessed when the worker took its block:
	// a property once witnessed stays so, and most are witnessed early.
	// The first openAny of them are not StoreOnly, the rest are: a step
	// that leaves the store as it was need look at the first only.
	open    []int
	openAny int
}

// claimPending claims the pending successor and stores its encoding if
// the claim is the first.
func (w *worker) claimPending() {
	if !w.pending {
		return
	}
	w.pending = false
	if w.seen.claim(w.claimer, w.pendingFP, w.pendingOrd, w.pendingAwake) {
		var c, start uint32
		if w.pendingInPlace {
			c, start = w.out.commit(len(w.pendingEnc))
		} else {
			c, start = w.out.store(w.pendingEnc)
		}
		w.out.items = append(w.out.items, succ{fp: w.pendingFP, chunk: c, start: start, n: uint32(len(w.pendingEnc))})
	}
}
