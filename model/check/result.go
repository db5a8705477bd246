package check

import (
	"fmt"
	"slices"
	"strings"
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

	// ExpectStates, when positive, is about how many distinct states the
	// search will store (a count from an earlier run): the visited table
	// is allocated for them at the start instead of doubling its way
	// there, which saves the rehashes (about 5-8% of the CPU time of
	// fanout-8 on one worker). A wrong guess changes no result: too low,
	// the table grows as without it; too high, it takes more memory. At
	// most MaxExpectStates.
	ExpectStates int64
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
	found += traces.ReleaseFlags(e.scope.Release)
	headers = append(headers, traces.Header{Key: traces.HeaderFoundBy, Value: found})
	headers = append(headers, traces.ReleaseHeaders(e.scope.Release)...)
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
