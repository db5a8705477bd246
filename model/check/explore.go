package check

import (
	"fmt"
	"math"
	"runtime"
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
	Known    string // upstream issue of a documented race
	Message  string
	Steps    []string // client ops and internal steps after the setup
	Trace    string   // a replayable trace file
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
	Witnessed            map[string]bool   // reachability properties witnessed
	Vacuous              []string          // expected reachability never witnessed
}

// record is what the visited set keeps per fingerprint: how the state was
// first reached. order ranks the parent (frontier position, action) so
// that parallel workers agree on one deterministic parent per state.
type record struct {
	parent uint64
	action int32
	level  int32
	order  uint64
}

const shards = 256

type visited struct {
	mu [shards]sync.Mutex
	m  [shards]map[uint64]record
}

func newVisited() *visited {
	v := &visited{}
	for i := range v.m {
		v.m[i] = map[uint64]record{}
	}
	return v
}

// insert adds fp if new; for a state first seen in the same level it keeps
// the smaller order. It reports whether the caller's entry is (so far) the
// state's canonical parent.
func (v *visited) insert(fp uint64, r record) (fresh bool) {
	i := fp % shards
	v.mu[i].Lock()
	defer v.mu[i].Unlock()
	old, seen := v.m[i][fp]
	switch {
	case !seen:
		v.m[i][fp] = r
		return true
	case old.level == r.level && r.order < old.order:
		v.m[i][fp] = r
	}
	return false
}

func (v *visited) get(fp uint64) record {
	i := fp % shards
	v.mu[i].Lock()
	defer v.mu[i].Unlock()
	return v.m[i][fp]
}

// step is one successor of a state.
type step struct {
	text   string
	st     model.Step
	next   *model.State
	result model.Result
}

// explorer holds one run.
type explorer struct {
	scope Scope
	m     *model.Model
	ops   []model.Step
	opts  model.Options
	init  *model.State
	seen  *visited

	generated atomic.Int64
	distinct  atomic.Int64

	mu        sync.Mutex
	found     map[string]*candidate
	witnessed map[string]bool
}

type candidate struct {
	v     *model.Violation
	level int
	fp    uint64 // the state the violation is at (quiescent) or the parent
	act   int32  // -1 for a quiescent violation at fp
	order uint64
}

// successors lists, in a fixed order, every step from s: unused client
// ops first, then the model's internal and fault steps.
func (e *explorer) successors(s *model.State) []step {
	var out []step
	for i, op := range e.ops {
		if s.Budget&(1<<i) != 0 {
			continue
		}
		n, r, err := e.m.Apply(s, op)
		if err != nil {
			continue
		}
		n.Budget |= 1 << i
		out = append(out, step{text: op.String(), st: op, next: n, result: r})
	}
	for _, st := range e.m.Enabled(s, e.opts) {
		n, r, err := e.m.Apply(s, st)
		if err != nil {
			continue
		}
		out = append(out, step{text: st.String(), st: st, next: n, result: r})
	}
	return out
}

func (e *explorer) canon(s *model.State) *model.State {
	if e.scope.Symmetry {
		return s.Canonical()
	}
	return s
}

// Run explores a scope.
func Run(scope Scope, opts Options) (*Result, error) {
	e := &explorer{scope: scope, m: &model.Model{Bugs: scope.Bugs}, opts: model.Options{Coalesce: scope.Coalesce},
		seen: newVisited(), found: map[string]*candidate{}, witnessed: map[string]bool{}}
	if len(scope.Ops) > 63 {
		return nil, fmt.Errorf("scope %s: at most 63 client operations", scope.Name)
	}
	for _, p := range scope.Expect {
		if prop, err := model.PropertyByName(p); err != nil || prop.Kind != model.Sometimes {
			return nil, fmt.Errorf("scope %s: %q is not a reachability property", scope.Name, p)
		}
	}
	for _, c := range scope.Ops {
		st, err := model.ParseStep(c)
		if err != nil {
			return nil, fmt.Errorf("scope %s: op %q: %v", scope.Name, c, err)
		}
		if st.Actor != model.ActorClient {
			return nil, fmt.Errorf("scope %s: op %q: only client requests can be scope operations", scope.Name, c)
		}
		e.ops = append(e.ops, st)
	}
	init, err := setupState(e.m, scope.Setup)
	if err != nil {
		return nil, fmt.Errorf("scope %s: %v", scope.Name, err)
	}
	e.init = e.canon(init)
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	buf := []byte{}
	var rootFP uint64
	rootFP, _ = e.init.Fingerprint(buf)
	e.seen.insert(rootFP, record{parent: rootFP, action: -1})
	e.distinct.Store(1)

	type item struct {
		s  *model.State
		fp uint64
	}
	frontier := []item{{e.init, rootFP}}
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

	complete := true
	level := 0
	for len(frontier) > 0 {
		depth.Store(int64(level))
		queue.Store(int64(len(frontier)))
		expand := scope.MaxDepth == 0 || level < scope.MaxDepth
		if !expand {
			complete = false
		}
		type next struct {
			item
			order uint64
		}
		outs := make([][]next, workers)
		var wg sync.WaitGroup
		chunk := (len(frontier) + workers - 1) / workers
		var failed atomic.Value
		for w := 0; w < workers; w++ {
			lo, hi := w*chunk, min((w+1)*chunk, len(frontier))
			if lo >= hi {
				continue
			}
			wg.Add(1)
			go func(w, lo, hi int) {
				defer wg.Done()
				buf := make([]byte, 0, 4096)
				for idx := lo; idx < hi; idx++ {
					it := frontier[idx]
					if err := e.checkQuiescent(it.s, it.fp, level, uint64(idx)<<20); err != nil {
						failed.Store(err)
						return
					}
					if !expand || !scope.admits(it.s) {
						continue
					}
					for a, sc := range e.successors(it.s) {
						e.generated.Add(1)
						order := uint64(idx)<<20 | uint64(a)
						e.checkTransition(it.s, sc, level+1, it.fp, int32(a), order)
						n := e.canon(sc.next)
						var fp uint64
						fp, buf = n.Fingerprint(buf)
						if e.seen.insert(fp, record{parent: it.fp, action: int32(a), level: int32(level + 1), order: order}) {
							e.distinct.Add(1)
						}
						outs[w] = append(outs[w], next{item{n, fp}, order})
					}
				}
			}(w, lo, hi)
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			return nil, err
		}
		var nf []item
		for _, out := range outs {
			for _, n := range out {
				if r := e.seen.get(n.fp); r.level == int32(level+1) && r.order == n.order {
					nf = append(nf, n.item)
				}
			}
		}
		frontier = nf
		if len(frontier) > 0 {
			level++
		}
		if scope.MaxStates > 0 && e.distinct.Load() >= int64(scope.MaxStates) && len(frontier) > 0 {
			complete = false
			break
		}
		if len(e.found) == len(model.Properties) {
			break
		}
	}
	res := &Result{Scope: scope.Name, Bugs: scope.Bugs, Generated: e.generated.Load(), Distinct: e.distinct.Load(),
		Depth: level, Complete: complete, Elapsed: time.Since(start), Witnessed: e.witnessed}
	n := float64(res.Distinct)
	res.CollisionProbability = -math.Expm1(-n * n / math.Exp2(65))
	for _, p := range scope.Expect {
		if !e.witnessed[p] {
			res.Vacuous = append(res.Vacuous, p)
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
	return res, nil
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

func (e *explorer) offer(v *model.Violation, c *candidate) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.found[v.Property]
	if old == nil || c.level < old.level || (c.level == old.level && c.order < old.order) {
		c.v = v
		e.found[v.Property] = c
	}
}

func (e *explorer) checkTransition(prev *model.State, sc step, level int, fp uint64, act int32, order uint64) {
	t := &model.Transition{Prev: prev, Next: sc.next, Step: sc.st, Result: sc.result}
	for _, v := range e.m.CheckTransition(t) {
		e.offer(v, &candidate{level: level, fp: fp, act: act, order: order})
	}
	for i := range model.Properties {
		p := &model.Properties[i]
		if p.Kind != model.Sometimes {
			continue
		}
		e.mu.Lock()
		have := e.witnessed[p.Name]
		e.mu.Unlock()
		if !have && p.Check(e.m, t) != nil {
			e.mu.Lock()
			e.witnessed[p.Name] = true
			e.mu.Unlock()
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
		e.offer(v, &candidate{level: level, fp: fp, act: -1, order: order})
	}
	return nil
}

// path rebuilds the steps from the initial state to fp.
func (e *explorer) path(fp uint64) []int32 {
	var acts []int32
	for {
		r := e.seen.get(fp)
		if r.action < 0 {
			break
		}
		acts = append(acts, r.action)
		fp = r.parent
	}
	for i, j := 0, len(acts)-1; i < j; i, j = i+1, j-1 {
		acts[i], acts[j] = acts[j], acts[i]
	}
	return acts
}

// counterexample replays the recorded path and writes it as a trace.
func (e *explorer) counterexample(c *candidate) (*Counterexample, error) {
	acts := e.path(c.fp)
	if c.act >= 0 {
		acts = append(acts, c.act)
	}
	s := e.init
	var steps []string
	for _, a := range acts {
		succ := e.successors(s)
		if int(a) >= len(succ) {
			return nil, fmt.Errorf("internal error: path replay diverged at %q", steps)
		}
		steps = append(steps, succ[a].text)
		s = e.canon(succ[a].next)
	}
	ce := &Counterexample{Property: c.v.Property, Known: c.v.Known, Message: c.v.Message, Steps: steps}
	trace, err := e.traceFile(ce, c.act < 0)
	if err != nil {
		return nil, err
	}
	ce.Trace = trace
	return ce, nil
}

// traceFile formats a counterexample as a trace and fills in its
// expected output by replaying it, which also proves it replays.
func (e *explorer) traceFile(ce *Counterexample, quiescent bool) (string, error) {
	desc := []string{fmt.Sprintf("Shortest counterexample to %q in scope %s (%d steps after the setup).", ce.Property, e.scope.Name, len(ce.Steps)), ce.Message + "."}
	headers := []traces.Header{{Key: traces.HeaderProperty, Value: ce.Property}}
	found := "cascade check --preset " + e.scope.Name
	if e.scope.Bugs != 0 {
		for _, b := range e.scope.Bugs.List() {
			found += " --bug " + b.String()
		}
		headers = append(headers, traces.Header{Key: traces.HeaderBug, Value: e.scope.Bugs.String()})
	}
	headers = append(headers, traces.Header{Key: traces.HeaderFoundBy, Value: found})
	if ce.Known != "" {
		headers = append(headers, traces.Header{Key: traces.HeaderKnown, Value: ce.Known})
	}
	headers = append(headers, traces.Header{Key: traces.HeaderTargets, Value: "model, impl"})
	path := append([]string(nil), ce.Steps...)
	if quiescent {
		path = append(path, "settle")
	}
	stanzas := []traces.Written{{Commands: e.scope.Setup}, {Commands: path}}
	if len(e.scope.Setup) == 0 {
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
