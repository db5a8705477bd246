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
)

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
	// checking or even applying it: the model takes every step it lists
	// of a sleep class (model.Enabled).
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

// Run explores a scope.
func Run(scope Scope, opts Options) (*Result, error) {
	e := &explorer{scope: scope, m: &model.Model{Bugs: scope.Bugs, Release: scope.Release}, opts: model.Options{Coalesce: scope.Coalesce},
		found: map[string]*candidate{}, classes: map[string]*candidate{}}
	if opts.ExpectStates < 0 || opts.ExpectStates > MaxExpectStates {
		return nil, fmt.Errorf("expected states %d: must be 0 (unknown) to %d", opts.ExpectStates, MaxExpectStates)
	}
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
	e.seen = newSeenTable(workers, e.sleep, opts.ExpectStates)
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
					for _, storeOnly := range []bool{false, true} {
						if storeOnly {
							w.openAny = len(w.open)
						}
						for i, pi := range e.sometimes {
							if model.Properties[pi].StoreOnly == storeOnly && !e.witnessed[i].Load() {
								w.open = append(w.open, i)
							}
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
