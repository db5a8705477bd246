package check

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// Options tune a run without changing its result.
type Options struct {
	// Workers expanding each BFS level in parallel; 0 means GOMAXPROCS.
	Workers int
	// Progress, when set, is called about every ProgressEvery.
	Progress      func(Progress)
	ProgressEvery time.Duration

	// Plain searches with no sleep sets at all: every transition is
	// applied, checked and its successor claimed, where a search without
	// Scope.Reduction otherwise skips the claim (and, where no property
	// can notice, the step) of a sleeping step's successor (see
	// explorer.sleep). The plain search is the oracle the sleep sets are
	// tested against (`cascade check --no-reduction`): it does not rest on
	// the independence relation. It overrides Scope.Reduction.
	Plain bool
}

// Progress is a snapshot of a running exploration.
type Progress struct {
	Generated, Distinct int64
	Depth, Queue        int
	Elapsed             time.Duration
}

// StatesPerSecond is the distinct-state rate so far.
func (p Progress) StatesPerSecond() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Distinct) / p.Elapsed.Seconds()
}

// Counterexample is the shortest path found to a property violation.
type Counterexample struct {
	Property string
	// Class groups violations of one property by cause: the property, the
	// known race that explains it ("" for none) and the kind of step that
	// broke it (ViolationClass).
	Class   string
	Known   string // ID of the known-race registry entry (model.KnownRaces) of a documented race
	Message string
	Steps   []string // client ops and internal steps after the setup
	Root    string   // the initial state's Root name, in a scope with Roots
	// RootIndex is that root's Index: its position among the roots of
	// the unsplit scope (Scope.Shard).
	RootIndex int
	Trace     string // a replayable trace file
}

// Result is what an exploration established.
type Result struct {
	Scope     string
	Bugs      model.BugSet
	Generated int64 // transitions taken
	Distinct  int64 // distinct states
	Depth     int   // deepest level reached
	// Complete is false when MaxDepth or MaxStates cut the search short.
	Complete bool
	Elapsed  time.Duration
	// CollisionProbability estimates the chance that two distinct states
	// shared a 64-bit fingerprint (birthday bound, as TLC reports).
	CollisionProbability float64
	Violations           []*Counterexample // one per property, shortest first found
	// Classes has the shortest counterexample of each violation class
	// (Counterexample.Class), in property order, then by class.
	Classes []*Counterexample
	// Roots is how many distinct initial states the search started from.
	Roots int
	// Reduced says the search used sleep sets (Scope.Reduction,
	// reduction.go): Generated then counts only the transitions taken,
	// and Slept the ones skipped; Distinct is what the unreduced search
	// finds.
	Reduced   bool
	Slept     int64
	Witnessed map[string]bool // reachability properties witnessed
	Vacuous   []string        // expected reachability never witnessed
	// unclaimed counts the transitions an unreduced search took and
	// checked without claiming their successor (explorer.sleep).
	unclaimed int64
	// sleepStopped is the level after which an unreduced search stopped
	// keeping sleep sets (sleepPays), or 0.
	sleepStopped int
	// NeverReached lists the scope's client ops that reached no object in
	// any explored state: wherever one was sent the model refused it or
	// answered 404 NotFound (an op on an object that never exists, say), so
	// the scope says nothing about it. A scope with such an op, or one that
	// takes no transition at all, is vacuous, not a pass
	// (Result.VacuousScope).
	NeverReached []string
}

// VacuousScope says why a search established nothing about part of its
// scope: an op that was never sent, or no transition at all; "" when
// neither. A complete search of a vacuous scope still "holds" every
// property, which is why cascade check exits 1 on it.
func (r *Result) VacuousScope() string {
	switch {
	case r.Generated == 0:
		return "no transition was explored: no client op could be sent and no internal step was enabled from the setup state"
	case len(r.NeverReached) == 1:
		return fmt.Sprintf("op %q never reached an object: every explored state refused it or answered 404 NotFound", r.NeverReached[0])
	case len(r.NeverReached) > 1:
		return fmt.Sprintf("ops %q never reached an object: every explored state refused them or answered 404 NotFound", r.NeverReached)
	}
	return ""
}

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
	trans   model.Transition
	enc     []byte // scratch encoding
	// the successor whose claim waits for the next one to be computed
	pending               bool
	pendingFP, pendingOrd uint64
	pendingAwake          uint32
	pendingEnc            []byte
	bufs                  [2]outBuf
	out                   *outBuf // bufs[level%2]

	generated int64
	slept     int64
	unclaimed int64
	// open lists the Sometimes properties (indexes into
	// explorer.sometimes) not witnessed when the worker took its block:
	// a property once witnessed stays so, and most are witnessed early.
	open []int
}

// claimPending claims the pending successor and stores its encoding if
// the claim is the first.
func (w *worker) claimPending() {
	if !w.pending {
		return
	}
	w.pending = false
	if w.seen.claim(w.claimer, w.pendingFP, w.pendingOrd, w.pendingAwake) {
		c, start := w.out.store(w.pendingEnc)
		w.out.items = append(w.out.items, succ{fp: w.pendingFP, chunk: c, start: start, n: uint32(len(w.pendingEnc))})
	}
}

// explorer holds one run.
type explorer struct {
	scope   Scope
	m       *model.Model
	ops     []model.Step
	opInfos []sleepStep // with sleep sets: how the relation sees each op
	opts    model.Options
	// roots are the initial states and setups the commands that build
	// each
	roots  []*model.State
	setups [][]string
	names  []string
	index  []int // each root's Root.Index
	seen   *seenTable
	// levels[l] are the fingerprints of level l's frontier, by position:
	// with the ords in seen they give every state's path.
	levels [][]uint64
	admits []func(*model.State) int // constraint metrics, by Constraints index

	generated atomic.Int64
	distinct  atomic.Int64
	slept     atomic.Int64 // transitions the sleep sets skipped
	unclaimed atomic.Int64 // transitions taken without a claim (sleep)

	reached []atomic.Bool // by op index: some explored state sent it to an object that exists

	mu        sync.Mutex
	found     map[string]*candidate
	classes   map[string]*candidate
	sometimes []int         // indexes into model.Properties of Sometimes properties
	witnessed []atomic.Bool // by sometimes index
	// alwaysStoreOnly: every Always property is StoreOnly
	alwaysStoreOnly bool
	// reduce: sleep sets (reduction.go) skip the transitions of sleeping
	// steps
	reduce bool
	// sleep: the search keeps sleep sets, and the visited set and the
	// frontier carry each state's awake mask. An unreduced search keeps
	// them too where it may (no constraints): it takes and checks every
	// transition, but a sleeping step's successor is one the search
	// reaches by another arrival with a smaller ord at the same level, or
	// reached before (reduction.go, "Soundness" and "Counterexamples"), so
	// its claim cannot change the visited set, the ords or the frontier,
	// and the successor is neither encoded nor claimed. At fanout-8 that
	// is 1,467,585 of 2,400,626 transitions.
	sleep bool
	// silentSleep: a sleeping step's transition breaks and witnesses
	// nothing (sleepersSilent), so an unreduced search counts it without
	// checking it, or taking it where the model tells without (Takes).
	silentSleep bool
}

type candidate struct {
	v     *model.Violation
	level int
	fp    uint64 // the state the violation is at (quiescent) or the parent
	act   int32  // -1 for a quiescent violation at fp
	order uint64
	class string
}

// step is one successor of a state, as counterexample replay lists them;
// next is nil for a step the model refused.
type step struct {
	text string
	next *model.State
}

// successors lists, in a fixed order, every step from s: unused client
// ops first, then the model's internal and fault steps. The order and the
// numbering must match expand's, which numbers actions the same way: a
// step the model refuses keeps its number (next is nil), so that a step
// the reduction skips without applying it numbers like the rest.
func (e *explorer) successors(s *model.State) []step {
	var out []step
	for i, op := range e.ops {
		if !e.opEnabled(s, i) {
			continue
		}
		n, _, err := e.m.Apply(s, op)
		if err != nil {
			out = append(out, step{text: op.String()})
			continue
		}
		e.sent(n, i)
		out = append(out, step{text: op.String(), next: n})
	}
	for _, st := range e.m.Enabled(s, e.opts) {
		n, _, err := e.m.Apply(s, st)
		if err != nil {
			n = nil
		}
		out = append(out, step{text: st.String(), next: n})
	}
	return out
}

// opEnabled reports whether client op i may be sent from s: not sent
// yet, and with Ordered every op before it sent.
func (e *explorer) opEnabled(s *model.State, i int) bool {
	if e.scope.OpBudget > 0 {
		return s.Budget < uint64(e.scope.OpBudget)
	}
	if s.Budget&(1<<i) != 0 {
		return false
	}
	before := uint64(1)<<i - 1
	return !e.scope.Ordered || s.Budget&before == before
}

// sent records in n that client op i was sent.
func (e *explorer) sent(n *model.State, i int) {
	if e.scope.OpBudget > 0 {
		n.Budget++
		return
	}
	n.Budget |= 1 << i
}

func (e *explorer) canon(s *model.State) *model.State {
	if e.scope.Symmetry {
		return s.Canonical()
	}
	return s
}

func (e *explorer) admitted(s *model.State) bool {
	for i, f := range e.admits {
		if f(s) > e.scope.Constraints[i].Max {
			return false
		}
	}
	return true
}

// Run explores a scope.
func Run(scope Scope, opts Options) (*Result, error) {
	e := &explorer{scope: scope, m: &model.Model{Bugs: scope.Bugs, Release: scope.Release}, opts: model.Options{Coalesce: scope.Coalesce},
		found: map[string]*candidate{}, classes: map[string]*candidate{}}
	if len(scope.Ops) > 63 && scope.OpBudget == 0 {
		return nil, fmt.Errorf("scope %s: at most 63 client operations", scope.Name)
	}
	for _, p := range scope.Expect {
		if prop, err := model.PropertyByName(p); err != nil || prop.Kind != model.Sometimes {
			return nil, fmt.Errorf("scope %s: %q is not a reachability property", scope.Name, p)
		}
	}
	for _, c := range scope.Constraints {
		f := metricFunc(c.Metric)
		if f == nil {
			return nil, fmt.Errorf("scope %s: constraint %q: unknown metric", scope.Name, c.Text)
		}
		e.admits = append(e.admits, f)
	}
	e.alwaysStoreOnly = true
	for i := range model.Properties {
		p := &model.Properties[i]
		if p.Kind == model.Sometimes {
			e.sometimes = append(e.sometimes, i)
		}
		if p.Kind == model.Always && !p.StoreOnly {
			e.alwaysStoreOnly = false
		}
	}
	e.witnessed = make([]atomic.Bool, len(e.sometimes))
	for _, c := range scope.Ops {
		st, err := model.ParseStep(c)
		if err != nil {
			return nil, fmt.Errorf("scope %s: op %q: %v", scope.Name, c, err)
		}
		if st.Actor != model.ActorClient {
			return nil, fmt.Errorf("scope %s: op %q: only client requests can be scope operations", scope.Name, c)
		}
		e.ops = append(e.ops, st)
		e.opInfos = append(e.opInfos, storeWriteStep(&st, len(e.opInfos)))
	}
	roots := scope.Roots
	if len(roots) == 0 {
		roots = []Root{{}}
	}
	if len(roots) > maxIndex {
		return nil, fmt.Errorf("scope %s: more than %d roots", scope.Name, maxIndex)
	}
	for _, r := range roots {
		setup := append(slices.Clip(scope.Setup), r.Setup...)
		init, err := setupState(e.m, setup)
		if err != nil {
			if r.Name != "" {
				return nil, fmt.Errorf("scope %s: root %s: %v", scope.Name, r.Name, err)
			}
			return nil, fmt.Errorf("scope %s: %v", scope.Name, err)
		}
		init = e.canon(init)
		if !e.admitted(init) {
			var cs []string
			for _, c := range scope.Constraints {
				cs = append(cs, c.Text)
			}
			return nil, fmt.Errorf("scope %s: the constraints %s exclude the setup state itself: nothing would be explored", scope.Name, strings.Join(cs, ", "))
		}
		e.roots, e.setups, e.names, e.index = append(e.roots, init), append(e.setups, setup), append(e.names, r.Name), append(e.index, r.Index)
	}
	e.reached = make([]atomic.Bool, len(e.ops))
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	e.reduce = reductionApplies(scope) && !opts.Plain
	e.sleep = e.reduce || (len(scope.Constraints) == 0 && !opts.Plain)
	e.silentSleep = e.sleep && sleepersSilent()
	e.seen = newSeenTable(workers, e.sleep)
	start := time.Now()
	// Level 0 holds the roots, deduplicated (two roots may build one
	// state); a root's ord names its index in e.roots.
	var fr frontier
	for i, r := range e.roots {
		enc := r.Encode(nil)
		fp := model.FingerprintBytes(enc)
		if !e.seen.claim(e.seen.claimer(workers), fp, packOrd(0, i, rootAction), uint32(sleepAll)) {
			continue
		}
		fr.chunks = append(fr.chunks, enc)
		fr.locs = append(fr.locs, loc{chunk: uint32(len(fr.chunks) - 1), n: uint32(len(enc))})
		fr.fps = append(fr.fps, fp)
		if e.sleep {
			fr.awake = append(fr.awake, uint32(sleepAll))
		}
	}
	e.distinct.Store(int64(fr.len()))
	nroots := fr.len()

	var depth atomic.Int64
	queue := atomic.Int64{}
	queue.Store(1)
	done := make(chan struct{})
	if opts.Progress != nil {
		every := opts.ProgressEvery
		if every <= 0 {
			every = time.Second
		}
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					opts.Progress(Progress{Generated: e.generated.Load(), Distinct: e.distinct.Load(), Depth: int(depth.Load()), Queue: int(queue.Load()), Elapsed: time.Since(start)})
				}
			}
		}()
	}
	defer close(done)

	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = &worker{seen: e.seen, claimer: e.seen.claimer(i)}
	}
	// The table and the encoding chunks are mapped outside the Go heap
	// (allocHuge); nothing the result holds points into them.
	defer func() {
		e.seen.free()
		for _, w := range ws {
			w.bufs[0].free()
			w.bufs[1].free()
		}
	}()
	complete := true
	level := 0
	sleepStopped := 0
	for fr.len() > 0 {
		e.levels = append(e.levels, fr.fps)
		depth.Store(int64(level))
		queue.Store(int64(fr.len()))
		expand := scope.MaxDepth == 0 || level < scope.MaxDepth
		if !expand {
			complete = false
		}
		if expand && level+1 > maxLevel {
			return nil, fmt.Errorf("scope %s: deeper than %d levels", scope.Name, maxLevel)
		}
		if fr.len() > maxIndex {
			return nil, fmt.Errorf("scope %s: more than %d states in one level", scope.Name, maxIndex)
		}

		// Phase 1: expand the level's blocks in parallel; phase 2a: each
		// worker reads the final ords of the states it claimed and sorts
		// them.
		nblocks := (fr.len() + blockSize - 1) / blockSize
		generated, unclaimed := e.generated.Load(), e.unclaimed.Load()
		var next atomic.Int64
		var failed atomic.Value
		var wg sync.WaitGroup
		// Room for each worker's share of the next level, guessed from
		// how this level grew from the last (at most 2.5 times), so that
		// the lists rarely grow, and copy, while they fill.
		want := fr.len()
		if level > 0 {
			prev := len(e.levels[level-1])
			want = min(fr.len()*5/2, fr.len()*fr.len()/prev*21/20)
		}
		want = want/len(ws) + 64
		for _, w := range ws {
			w.out = &w.bufs[level%2]
			w.out.reset()
			if cap(w.out.items) < want {
				w.out.items = make([]succ, 0, want)
			}
			wg.Add(1)
			go func(w *worker) {
				defer wg.Done()
				// The worker claims as one client of the table for the
				// whole level (see seenTable.enter), stepping out only for
				// quiescence checks, and its last successor's claim waits
				// for the end of the level.
				e.seen.enter(w.claimer)
				defer e.seen.leave(w.claimer)
				defer w.claimPending()
				for {
					b := int(next.Add(1) - 1)
					if b >= nblocks || failed.Load() != nil {
						break
					}
					w.generated, w.slept, w.unclaimed = 0, 0, 0
					w.open = w.open[:0]
					for i := range e.sometimes {
						if !e.witnessed[i].Load() {
							w.open = append(w.open, i)
						}
					}
					for idx := b * blockSize; idx < min((b+1)*blockSize, fr.len()); idx++ {
						if err := e.expand(w, &fr, idx, level, expand); err != nil {
							failed.Store(err)
							return
						}
					}
					e.generated.Add(w.generated)
					e.slept.Add(w.slept)
					e.unclaimed.Add(w.unclaimed)
				}
			}(w)
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return nil, err
		}
		if e.sleep && !e.reduce && !sleepPays(e.generated.Load()-generated, e.unclaimed.Load()-unclaimed) {
			// From now on nothing is asleep: the states of the next level
			// claim every successor, as a root does.
			e.sleep = false
			sleepStopped = level
		}
		for _, w := range ws {
			wg.Add(1)
			go func(w *worker) {
				defer wg.Done()
				items := w.out.items
				// The slots are read in claim order, at random in the
				// table: each is prefetched a few reads ahead.
				const ahead = 8
				for i := range min(ahead, len(items)) {
					e.seen.touch(items[i].fp)
				}
				for i := range items {
					if j := i + ahead; j < len(items) {
						e.seen.touch(items[j].fp)
					}
					// the stored awake mask is the final one
					items[i].ord, items[i].awake, _ = e.seen.lookup(items[i].fp)
				}
				slices.SortFunc(items, func(a, b succ) int { return cmp.Compare(a.ord, b.ord) })
			}(w)
		}
		wg.Wait()

		// Phase 2b: merge the workers' sorted lists into the next frontier.
		total := 0
		for _, w := range ws {
			total += len(w.out.items)
		}
		nf := frontier{locs: make([]loc, total), fps: make([]uint64, total)}
		if e.sleep {
			nf.awake = make([]uint32, total)
		}
		base := make([]uint32, len(ws)) // worker w's chunks start at base[w] in nf.chunks
		heads := make([]int, len(ws))
		for wi, w := range ws {
			base[wi] = uint32(len(nf.chunks))
			nf.chunks = append(nf.chunks, w.out.chunks[:w.out.used]...)
		}
		for i := range total {
			best := -1
			for wi, w := range ws {
				if h := heads[wi]; h < len(w.out.items) && (best < 0 || w.out.items[h].ord < ws[best].out.items[heads[best]].ord) {
					best = wi
				}
			}
			it := &ws[best].out.items[heads[best]]
			heads[best]++
			nf.locs[i] = loc{chunk: base[best] + it.chunk, start: it.start, n: it.n}
			nf.fps[i] = it.fp
			if e.sleep {
				nf.awake[i] = it.awake
			}
		}
		e.distinct.Store(int64(e.seen.len()))
		fr = nf
		if fr.len() > 0 {
			level++
		}
		if scope.MaxStates > 0 && e.distinct.Load() >= int64(scope.MaxStates) && fr.len() > 0 {
			complete = false
			break
		}
		// every property broken: nothing more to find, unless the scope
		// asks for every class (a universe)
		if len(e.found) == len(model.Properties) && len(scope.Roots) == 0 {
			break
		}
	}
	res := &Result{Scope: scope.Name, Bugs: scope.Bugs, Generated: e.generated.Load(), Distinct: e.distinct.Load(),
		Depth: level, Complete: complete, Elapsed: time.Since(start), Witnessed: map[string]bool{}, Roots: nroots,
		Reduced: e.reduce, Slept: e.slept.Load(), unclaimed: e.unclaimed.Load(), sleepStopped: sleepStopped}
	for i, pi := range e.sometimes {
		if e.witnessed[i].Load() {
			res.Witnessed[model.Properties[pi].Name] = true
		}
	}
	n := float64(res.Distinct)
	const bits = 65.0 // 64-bit fingerprints
	res.CollisionProbability = -math.Expm1(-n * n / math.Exp2(bits))
	for _, p := range scope.Expect {
		if !res.Witnessed[p] {
			res.Vacuous = append(res.Vacuous, p)
		}
	}
	for i := range e.reached {
		if !e.reached[i].Load() {
			res.NeverReached = append(res.NeverReached, scope.Ops[i])
		}
	}
	for _, p := range model.Properties {
		c := e.found[p.Name]
		if c == nil {
			continue
		}
		ce, err := e.counterexample(c)
		if err != nil {
			return nil, err
		}
		res.Violations = append(res.Violations, ce)
	}
	classes, err := e.classCounterexamples()
	if err != nil {
		return nil, err
	}
	res.Classes = classes
	return res, nil
}

// expand checks frontier state idx and, when the level is expanded and
// the constraints admit it, every transition out of it, claiming each
// successor and storing those it claims first.
func (e *explorer) expand(w *worker, fr *frontier, idx, level int, expand bool) error {
	s, err := w.dec.Decode(fr.enc(idx))
	if err != nil {
		return fmt.Errorf("internal error: %v", err)
	}
	fp := fr.fps[idx]
	var asleep sleepMask // the state's sleep set
	if e.sleep {
		asleep = ^sleepMask(fr.awake[idx])
	}
	order := uint64(idx) << 20
	if !expand || !e.admitted(s) {
		return e.quiescent(w, s, fp, level, order)
	}
	// changed records that some internal step changes what clients see.
	// Quiescent would then find that step as its path to a change, so the
	// state is not quiescent and the search for one can be skipped.
	changed := false
	a := 0
	// next numbers the next step (see successors).
	next := func() (int, error) {
		if a >= maxActions {
			return 0, fmt.Errorf("scope %s: a state with more than %d successors", e.scope.Name, maxActions)
		}
		a++
		return a - 1, nil
	}
	emit := func(act int, st *model.Step, info *sleepStep, n *model.State, r model.Result) error {
		w.generated++
		e.checkTransition(w, s, n, st, r, level+1, fp, int32(act), order|uint64(act))
		// The successor's sleep set from this arrival, in n's terms: taken
		// before canonicalising, which keeps the attemptToDelete queue's
		// order unless the step added UIDs (a create, which puts no item
		// to sleep anyway).
		awake := sleepAll
		if e.sleep {
			z := sleepAfter(w.infos, info, n, asleep)
			if !sameUIDs(s, n) {
				z &^= sleepItemClasses // canonicalising may renumber the queue
			}
			awake = ^z
		}
		// The frontier is canonical, and Canonical depends only on the
		// UID table: a successor that shares its parent's table (no step
		// but a create adds UIDs) is canonical already.
		if e.scope.Symmetry && !sameUIDs(s, n) {
			n = n.Canonical()
		}
		// Encode into scratch memory that stays in the cache; only a
		// state this worker claims first is copied out. The claim waits
		// until the next successor is computed (see touch).
		w.claimPending()
		w.enc = w.dec.EncodeNext(w.enc[:0], n)
		if len(w.enc) > math.MaxUint32 {
			return fmt.Errorf("scope %s: a state encoding exceeds 4 GiB", e.scope.Name)
		}
		h := model.FingerprintBytes(w.enc)
		e.seen.touch(h)
		w.pending, w.pendingFP, w.pendingOrd, w.pendingAwake = true, h, packOrd(level+1, idx, act), uint32(awake)
		w.enc, w.pendingEnc = w.pendingEnc, w.enc
		return nil
	}
	w.steps = e.m.AppendEnabled(w.steps[:0], s, e.opts)
	if e.sleep {
		w.infos = classify(w.infos, s, w.steps, len(e.ops))
	}
	for i := range e.ops {
		if !e.opEnabled(s, i) {
			continue
		}
		act, err := next()
		if err != nil {
			return err
		}
		n, r, err := e.m.ApplyStep(s, &e.ops[i])
		if err != nil {
			continue
		}
		e.sent(n, i)
		if r.Code != 404 && !e.reached[i].Load() {
			e.reached[i].Store(true)
		}
		if err := emit(act, &e.ops[i], &e.opInfos[i], n, r); err != nil {
			return err
		}
	}
	for i := range w.steps {
		st := &w.steps[i]
		act, err := next()
		if err != nil {
			return err
		}
		var info *sleepStep
		asleepStep := false
		if e.sleep {
			info = &w.infos[i]
			if b := info.bit; b >= 0 && asleep&(1<<b) != 0 {
				// In the sleep set: every state it leads to is reached
				// at the same depth with it taken before the step that
				// reached s (reduction.go). Had it set changed, the
				// quiescence search below finds s not quiescent all the
				// same, only later.
				if e.reduce {
					w.slept++
					continue
				}
				asleepStep = true
			}
		}
		if asleepStep && e.silentSleep {
			// Neither its successor nor its transition is looked at:
			// only whether Apply would take it, to count it. (Had it set
			// changed, the quiescence search below finds s not
			// quiescent all the same.)
			if takes, known := e.m.Takes(s, st); known {
				if takes {
					w.generated++
					w.unclaimed++
				}
				continue
			}
		}
		n, r, err := e.m.ApplyStep(s, st)
		if err != nil {
			continue
		}
		if !changed && st.Internal() && !model.ObservablyEqual(n, s) {
			changed = true
		}
		if asleepStep { // taken and checked, not claimed (explorer.sleep)
			w.generated++
			w.unclaimed++
			if !e.silentSleep {
				e.checkTransition(w, s, n, st, r, level+1, fp, int32(act), order|uint64(act))
			}
			continue
		}
		if err := emit(act, st, info, n, r); err != nil {
			return err
		}
	}
	if changed {
		return nil
	}
	return e.quiescent(w, s, fp, level, order)
}

// quiescent is checkQuiescent for a worker, which steps out of the
// visited table meanwhile: the internal-step search may take long, and a
// grower would wait for it.
func (e *explorer) quiescent(w *worker, s *model.State, fp uint64, level int, order uint64) error {
	e.seen.leave(w.claimer)
	defer e.seen.enter(w.claimer)
	return e.checkQuiescent(s, fp, level, order)
}

// sleepPays reports whether an unreduced search should keep its sleep
// sets (explorer.sleep) after a level that took this many transitions,
// this many of them asleep. Classifying every state's steps and a sleep
// set per successor cost about what skipping the work of one successor
// in 16 saves (all-policies, 4-9% asleep per level, took as many
// instructions with them as without). A level of fewer than 2048
// transitions says too little to stop.
func sleepPays(transitions, asleep int64) bool {
	return transitions < 2048 || asleep*16 >= transitions
}

// sameUIDs reports whether two states share one UID table.
func sameUIDs(a, b *model.State) bool {
	return len(a.UIDs) == len(b.UIDs) && (len(a.UIDs) == 0 || &a.UIDs[0] == &b.UIDs[0])
}

func (e *explorer) checkTransition(w *worker, prev, next *model.State, st *model.Step, r model.Result, level int, fp uint64, act int32, order uint64) {
	// A step that leaves the store as it was (most GC steps) can violate
	// or witness only the properties that are not StoreOnly.
	sameStore := model.SameStore(prev, next)
	// The worker's Transition is overwritten field by field, and only
	// when a property reads it: it points only into the worker's decoder
	// memory, which lives on anyway.
	t := &w.trans
	filled := false
	if !sameStore || !e.alwaysStoreOnly {
		t.Prev, t.Next, t.Step, t.Result = prev, next, *st, r
		filled = true
		for _, v := range e.m.CheckTransition(t) {
			e.offer(v, &candidate{level: level, fp: fp, act: act, order: order}, st)
		}
	}
	for _, i := range w.open {
		p := &model.Properties[e.sometimes[i]]
		if e.witnessed[i].Load() || (sameStore && p.StoreOnly) || (p.Steps != nil && !p.Steps(st)) {
			continue
		}
		if !filled {
			t.Prev, t.Next, t.Step, t.Result = prev, next, *st, r
			filled = true
		}
		if p.Check(e.m, t) != nil {
			e.witnessed[i].Store(true)
		}
	}
}

func (e *explorer) checkQuiescent(s *model.State, fp uint64, level int, order uint64) error {
	q, err := e.m.Quiescent(s)
	if err != nil {
		return err
	}
	if !q {
		return nil
	}
	for _, v := range e.m.CheckQuiescent(s) {
		e.offer(v, &candidate{level: level, fp: fp, act: -1, order: order}, nil)
	}
	return nil
}

// path rebuilds the actions from an initial state to fp and returns
// them with that state's index in e.roots.
func (e *explorer) path(fp uint64) ([]int32, int, error) {
	var acts []int32
	for {
		o, ok := e.seen.get(fp)
		if !ok {
			return nil, 0, fmt.Errorf("internal error: state %016x on a counterexample path is not stored", fp)
		}
		level, idx, act := unpackOrd(o)
		if level == 0 {
			slices.Reverse(acts)
			return acts, idx, nil
		}
		acts = append(acts, int32(act))
		fp = e.levels[level-1][idx]
	}
}

// counterexample replays the recorded path and writes it as a trace.
func (e *explorer) counterexample(c *candidate) (*Counterexample, error) {
	acts, root, err := e.path(c.fp)
	if err != nil {
		return nil, err
	}
	if c.act >= 0 {
		acts = append(acts, c.act)
	}
	s := e.roots[root]
	var steps []string
	for _, a := range acts {
		succ := e.successors(s)
		if int(a) >= len(succ) || succ[a].next == nil {
			return nil, fmt.Errorf("internal error: path replay diverged at %q", steps)
		}
		steps = append(steps, succ[a].text)
		s = e.canon(succ[a].next)
	}
	ce := &Counterexample{Property: c.v.Property, Class: c.class, Known: c.v.Known, Message: c.v.Message, Steps: steps, Root: e.names[root], RootIndex: e.index[root]}
	trace, err := e.traceFile(ce, c.act < 0, e.setups[root])
	if err != nil {
		return nil, err
	}
	ce.Trace = trace
	return ce, nil
}

// setupState applies setup commands (and `settle`) to the empty state.
func setupState(m *model.Model, setup []string) (*model.State, error) {
	s := model.NewState()
	for _, c := range setup {
		if c == "settle" {
			n, _, err := m.Settle(s)
			if err != nil {
				return nil, fmt.Errorf("setup settle: %v", err)
			}
			s = n
			continue
		}
		st, err := model.ParseStep(c)
		if err != nil {
			return nil, fmt.Errorf("setup %q: %v", c, err)
		}
		n, r, err := m.Apply(s, st)
		if err != nil {
			return nil, fmt.Errorf("setup %q: %v", c, err)
		}
		if !r.OK() {
			return nil, fmt.Errorf("setup %q failed: %v", c, r)
		}
		s = n
	}
	return s, nil
}

// traceFile formats a counterexample as a trace and fills in its
// expected output by replaying it, which also proves it replays.
func (e *explorer) traceFile(ce *Counterexample, quiescent bool, setup []string) (string, error) {
	where := "scope " + e.scope.Name
	if ce.Root != "" {
		where += ", initial graph " + ce.Root
	}
	desc := []string{fmt.Sprintf("Shortest counterexample to %q in %s (%d steps after the setup).", ce.Property, where, len(ce.Steps)), ce.Message + "."}
	if e.scope.Doc != "" && e.scope.FoundBy != "" {
		desc = append(desc, strings.Split(e.scope.Doc, "\n")...)
	}
	headers := []traces.Header{{Key: traces.HeaderProperty, Value: ce.Property}}
	// FoundBy names the scope (a universe's command); the bugs and the
	// release are the search's own and follow it either way
	found := "cascade check --preset " + e.scope.Name
	if e.scope.FoundBy != "" {
		found = e.scope.FoundBy
	}
	if e.scope.Bugs != 0 {
		for _, b := range e.scope.Bugs.List() {
			found += " --bug " + b.String()
		}
		headers = append(headers, traces.Header{Key: traces.HeaderBug, Value: e.scope.Bugs.String()})
	}
	rel := e.scope.Release.Or()
	if rel != model.DefaultRelease {
		found += " --kube-version " + rel.String()
	}
	headers = append(headers, traces.Header{Key: traces.HeaderFoundBy, Value: found})
	if rel != model.DefaultRelease {
		headers = append(headers, traces.Header{Key: traces.HeaderReleases, Value: rel.MinorRange()})
	}
	if ce.Known != "" {
		headers = append(headers, traces.Header{Key: traces.HeaderKnown, Value: ce.Known})
	}
	headers = append(headers, traces.Header{Key: traces.HeaderTargets, Value: "model, impl"})
	path := append([]string(nil), ce.Steps...)
	if quiescent {
		path = append(path, "settle")
	}
	stanzas := []traces.Written{{Commands: setup}, {Commands: path}}
	if len(setup) == 0 {
		stanzas = stanzas[1:]
	}
	text := traces.Format(desc, headers, stanzas)
	tr, err := traces.Parse(e.scope.Name+".trace", strings.NewReader(text))
	if err != nil {
		return "", fmt.Errorf("internal error: counterexample does not parse: %v\n%s", err, text)
	}
	results, _, err := traces.Replay(tr)
	if err != nil {
		return "", fmt.Errorf("internal error: counterexample does not replay: %v\n%s", err, text)
	}
	outs := make([][]string, len(results))
	for i, r := range results {
		outs[i] = r.Output
	}
	if err := traces.CheckHeaders(tr, results); err != nil {
		return "", fmt.Errorf("internal error: counterexample replays without its violation: %v\n%s", err, text)
	}
	return tr.Rewrite(outs), nil
}
