package fuzz

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/model/check"
)

// Race reproducers of concurrent failures.
//
// A failure that needs a race (an informer lagging behind another, a
// client write landing between the GC's GET and its DELETE) has no
// settled reproducer (settled.go): settling after every client step
// closes the window the race needs. Its schedule is what the concurrent
// run cannot record, and what the model checker can search. The run's
// client steps, in the order they were sent, become an Ordered
// check.Scope: a window of a few of them (raceReproducer) is explored,
// each interleaved with every internal step of the GC and the
// controllers (and the surrogate's fault steps), after the other steps
// before it, each settled, as its setup. The search keeps a window in which the
// model with the injected bugs (the surrogate) breaks a property as no
// documented upstream race does, while the reference model, searching
// the same scope, breaks none. ddmin then drops what the setup and the
// window do not need, and the checker's breadth-first search gives the
// shortest schedule for what is left: a stepped trace with the bugs in
// its `# bug:` header, which `cascade replay` runs on the model and on
// impl-stepped, whose bugs it switches on.

// raceWindow is the most client steps a window holds: the races of the
// catalogue need one to three (a create and the create naming it, a
// delete and a write racing the GC's decision).
const raceWindow = 4

// raceMaxStates bounds each search; a window whose search it cuts counts
// as not reproducing.
const raceMaxStates = 200_000

// raceSearch is one candidate: the setup steps (settled one by one) and
// the window (Ordered ops).
type raceSearch struct {
	surrogate model.BugSet
	coalesce  bool // the target's informers may skip events (Scope.Coalesce)
	foundBy   string
	doc       string
}

// scope is the checker's scope of a candidate under bugs.
func (r *raceSearch) scope(setup, window []string, bugs model.BugSet) check.Scope {
	var lines []string
	for _, s := range setup {
		lines = append(lines, s, "settle")
	}
	return check.Scope{Name: "race", Setup: lines, Ops: window, Ordered: true, Bugs: bugs, Coalesce: r.coalesce,
		MaxStates: raceMaxStates, FoundBy: r.foundBy, Doc: r.doc}
}

// unknownViolation is the first violation of res no documented upstream
// race explains, or nil.
func unknownViolation(res *check.Result) *check.Counterexample {
	for _, ce := range res.Violations {
		if ce.Known == "" {
			return ce
		}
	}
	return nil
}

// reproduces runs the candidate: the surrogate must break a property
// the reference model does not.
func (r *raceSearch) reproduces(setup, window []string) *check.Counterexample {
	if len(window) == 0 {
		return nil
	}
	opts := check.Options{Workers: 1}
	res, err := check.Run(r.scope(setup, window, r.surrogate), opts)
	if err != nil {
		return nil // a setup step the surrogate refuses, or a bad scope
	}
	ce := unknownViolation(res)
	if ce == nil {
		return nil
	}
	ref, err := check.Run(r.scope(setup, window, 0), opts)
	if err != nil || !ref.Complete || unknownViolation(ref) != nil {
		return nil
	}
	return ce
}

// applicable keeps the steps that the surrogate takes successfully, each
// settled, from the empty state: a setup replays only those.
func applicable(surrogate model.BugSet, steps []string) []string {
	m := &model.Model{Bugs: surrogate}
	s := model.NewState()
	var out []string
	for _, line := range steps {
		st, err := model.ParseStep(line)
		if err != nil || st.Actor != model.ActorClient {
			continue
		}
		n, res, err := m.Apply(s, st)
		if err != nil || !res.OK() {
			continue
		}
		settled, _, err := m.Settle(n)
		if err != nil {
			continue
		}
		s = settled
		out = append(out, line)
	}
	return out
}

// raceReproducer searches sent, a failing concurrent run's client steps
// in the order they were sent, for a race the model with surrogate's
// bugs reproduces, within budget. It returns the counterexample, whose
// Trace is the stepped trace, and its number of client steps, or nil
// when no window of the run holds one.
//
// A window ends at a step and holds it and up to raceWindow-1 steps
// before it: the ones just before it, or the latest earlier steps on the
// objects it names (its target, its owners). A race's steps are close in
// time but, among several clients' steps, not always close in the order
// they were sent: a create of an owner and, seven steps on, the create
// of a dependent naming it, whose event a lagging informer delivered
// first. The setup is the other steps before the window's last, in
// order, each settled.
func raceReproducer(surrogate model.BugSet, coalesce bool, sent []string, foundBy, doc string, budget time.Duration) (*check.Counterexample, int) {
	r := &raceSearch{surrogate: surrogate, coalesce: coalesce, foundBy: foundBy, doc: doc}
	deadline := time.Now().Add(budget)
	var setup, window []string
	found := false
search:
	// from the end: the failure was found there
	for j := len(sent) - 1; j >= 0; j-- {
		for _, w := range windows(sent, j) {
			if time.Now().After(deadline) {
				break search
			}
			var before, win []string
			for i := range sent[:j+1] {
				if slices.Contains(w, i) {
					win = append(win, sent[i])
				} else {
					before = append(before, sent[i])
				}
			}
			s := applicable(surrogate, before)
			if r.reproduces(s, win) != nil {
				setup, window, found = s, win, true
				break search
			}
		}
	}
	if !found {
		return nil, 0
	}
	if r.reproduces(nil, window) != nil {
		setup = nil // ddmin keeps at least one step
	}
	setup = ddmin(setup, func(s []string) bool { return r.reproduces(applicable(surrogate, s), window) != nil })
	setup = applicable(surrogate, setup)
	window = simplify(ddmin(window, func(w []string) bool { return r.reproduces(setup, w) != nil }),
		func(w []string) bool { return r.reproduces(setup, w) != nil })
	ce := r.reproduces(setup, window)
	if ce == nil || ce.Trace == "" {
		return nil, 0
	}
	return ce, len(setup) + len(window)
}

// windows lists the windows ending at step j, as indices into sent in
// order, smallest first: j alone; j with the steps just before it; j
// with the latest earlier steps on the objects it names, one, then two,
// then three of them; j with the latest creates of the objects it names,
// alone and with the latest steps on them. A race often starts at a
// create (the GC decides on the new object), which among several
// clients' steps need not be among the latest on the object.
func windows(sent []string, j int) [][]int {
	var out [][]int
	add := func(w []int) {
		slices.Sort(w)
		for _, x := range out {
			if slices.Equal(x, w) {
				return
			}
		}
		out = append(out, w)
	}
	add([]int{j})
	names := objectsOf(sent[j])
	var related []int
	for i := j - 1; i >= 0 && len(related) < raceWindow-1; i-- {
		if slices.ContainsFunc(objectsOf(sent[i]), func(o string) bool { return slices.Contains(names, o) }) {
			related = append(related, i)
		}
	}
	for n := 1; n < raceWindow; n++ {
		if j-n >= 0 {
			w := []int{j}
			for i := j - n; i < j; i++ {
				w = append(w, i)
			}
			add(w)
		}
		for k := n; k <= len(related); k++ {
			// the n-1 latest related steps and the k-th
			w := append([]int{j, related[k-1]}, related[:n-1]...)
			add(w)
		}
	}
	var creates []int
	for _, name := range names {
		for i := j - 1; i >= 0; i-- {
			if o := objectsOf(sent[i]); strings.HasPrefix(sent[i], "create ") && len(o) > 0 && o[0] == name {
				creates = append(creates, i)
				break
			}
		}
	}
	for k := 1; k <= len(creates) && k < raceWindow; k++ {
		w := append([]int{j}, creates[:k]...)
		add(slices.Clone(w))
		for _, i := range related {
			if len(w) == raceWindow {
				break
			}
			if !slices.Contains(w, i) {
				w = append(w, i)
				add(slices.Clone(w))
			}
		}
	}
	slices.SortStableFunc(out, func(a, b []int) int { return len(a) - len(b) })
	return out
}

// objectsOf names the objects a client step touches: its target and the
// owners it names, as API kind, namespace and name.
func objectsOf(line string) []string {
	st, err := model.ParseStep(line)
	if err != nil {
		return nil
	}
	t := st.Target
	out := []string{t.Kind.Info().Kind + "/" + t.Namespace + "/" + t.Name}
	owners := st.Owners
	if st.Owner.Name != "" {
		owners = append(owners, st.Owner)
	}
	for _, o := range owners {
		ns := o.Namespace
		if k, ok := model.KindByName(o.Kind); ok && !k.Info().Namespaced {
			ns = ""
		}
		out = append(out, o.Kind+"/"+ns+"/"+o.Name)
	}
	return out
}

// race searches the failing run's client steps for a race the model with
// the injected bugs reproduces (race.go) and replays it on a stepped impl
// (env.ConfirmStepped); it returns the confirmed race as the run's
// failure, or nil.
func (r *concurrentRun) race(kind, summary string, lines []string) *runFailure {
	if r.env.ConfirmStepped == nil {
		return nil
	}
	inject := strings.Join(r.env.Inject, ",")
	begin := time.Now()
	doc := strings.Join([]string{
		fmt.Sprintf("A race reproducer of a concurrent run of `cascade fuzz --target %s` that failed (%s):", r.env.Target, kind),
		firstLine(summary),
		"No settled run of its client steps shows the injected bug(s); the model checker searched their",
		"interleavings with the GC's and the controllers' steps for this schedule, on which the model with",
		"them breaks the property and the model without them breaks none. impl ran with " + inject + ";",
		"reproduce the schedule with: cascade replay --target impl-stepped THIS.trace",
	}, "\n")
	budget := r.cfg.ShrinkTime
	if budget <= 0 {
		budget = 30 * time.Second
	}
	type found struct {
		ce    *check.Counterexample
		steps int
	}
	f := interruptible(r.ctx, func() found {
		ce, steps := raceReproducer(r.env.Surrogate, r.env.Relist, lines, "cascade fuzz --target "+r.env.Target, doc, budget)
		return found{ce, steps}
	})
	ce, steps := f.ce, f.steps
	if ce == nil {
		progress(r.cfg, "reproduce: no race in the run's client steps reproduces on the model with %s (%s)", inject, time.Since(begin).Round(time.Millisecond))
		return nil
	}
	progress(r.cfg, "reproduce: %d client steps -> a race of %d client steps on the model with %s (%s); replaying it on impl-stepped", len(lines), steps, inject, time.Since(begin).Round(time.Millisecond))
	div, err := r.env.ConfirmStepped(r.ctx, ce.Trace)
	switch {
	case err != nil:
		progress(r.cfg, "reproduce: the stepped replay failed: %v", err)
		return nil
	case div != "":
		progress(r.cfg, "reproduce: impl-stepped does not follow the race: %s", firstLine(div))
		return nil
	}
	progress(r.cfg, "reproduce: impl-stepped with %s follows the race to its violation", inject)
	return &runFailure{
		kind:         "race",
		summary:      fmt.Sprintf("a race of %d client steps, which impl-stepped with %s replays to the violation the model with them predicts: %s\n(the concurrent run failed with %s: %s)", steps, inject, ce.Property+": "+ce.Message, kind, firstLine(summary)),
		trace:        ce.Trace,
		steps:        steps,
		attributed:   true,
		replayTarget: target.ImplStepped,
	}
}
