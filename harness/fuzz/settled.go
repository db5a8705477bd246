package fuzz

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// Settled reproducers of concurrent failures.
//
// A concurrent run on impl has no schedule to replay: its clients raced
// each other and a GC that ran by itself, and its trace lists the steps
// in the order they were sent, which a sequential replay does not
// reproduce. When impl runs with injected bugs, many of them show
// without any race, in a run where the GC catches up after every client
// step. Such a run is a trace any target replays as written: each stanza
// is one client step and `settle`, and `cascade replay --target impl`
// settles by watching the cluster go quiet.
//
// The search runs on models, as shrinking by surrogate does (shrink.go):
// the reference model and the model with the injected bugs switched on
// (the surrogate) each take the run's client steps, settling by
// themselves after each, and the search keeps the subsequences on which
// their answers or states differ while the reference model's own
// properties hold. ddmin and simplify minimize it; the result is then
// replayed on the real target, and reported only if the target diverges
// from the trace there too. Bugs that need a race (an informer lagging,
// a write landing between a GET and a DELETE) have no settled
// reproducer; their failures keep the concurrent trace.

// settledRun takes client steps on the reference model and the surrogate,
// each settling by itself after every step.
type settledRun struct {
	ref, sur *model.Model
	rs, ss   *model.State
	// loseAuto makes the surrogate lose the GC informer's first update
	// that shows an object being deleted, as impl's Auto mode does under
	// lost-first-update (impl/gc/monitors.go); the model's `gc lose` is a
	// step of its own, which no settle takes.
	loseAuto bool
	// done: one stanza per client step the reference model took, with
	// its answer and settled state.
	done []traces.Written
	// taken: the client steps of the stanzas.
	taken []string
}

// newSettledRun starts a settled run from the empty state. The reference
// model runs every adopting controller, as the impl target's
// kube-controller-manager does and as replay's model does.
func newSettledRun(surrogate model.BugSet) *settledRun {
	return &settledRun{
		ref: &model.Model{}, sur: &model.Model{Bugs: surrogate},
		rs: model.NewState(), ss: model.NewState(),
		loseAuto: surrogate.Has(model.BugLostFirstUpdate),
	}
}

// verdict of a settled run.
type verdict int

const (
	agree    verdict = iota // the two models agree throughout
	differ                  // they disagree, and the reference model's properties hold
	refFails                // the reference model breaks a property by itself
)

// run takes steps and returns the verdict and, for differ, what differs.
func (r *settledRun) run(steps []string) (verdict, string) {
	for _, line := range steps {
		st, err := model.ParseStep(line)
		if err != nil || st.Actor != model.ActorClient {
			continue
		}
		rn, want, err := r.ref.Apply(r.rs, st)
		if err != nil {
			continue // not a step the reference model can take here
		}
		if v := r.ref.CheckTransition(&model.Transition{Prev: r.rs, Next: rn, Step: &st, Result: want}); unknown(v) {
			return refFails, ""
		}
		sn, got, err := r.sur.Apply(r.ss, st)
		if err != nil {
			return differ, fmt.Sprintf("%q: the model with the injected bugs refuses it: %v", line, err)
		}
		broke := r.broken(r.ss, sn, st, got)
		r.rs, r.ss = rn, sn
		if ok, s := r.settleRef(); !ok {
			return refFails, s
		}
		if err := r.settleSur(&broke); err != nil {
			return differ, fmt.Sprintf("after %q the model with the injected bugs does not settle: %v", line, err)
		}
		out := output(line, want, r.rs)
		r.done = append(r.done, traces.Written{Commands: []string{line, "settle"}, Output: out})
		r.taken = append(r.taken, line)
		if broke != "" {
			return differ, fmt.Sprintf("after %q the model with the injected bugs breaks %s", line, broke)
		}
		if want.OK() != got.OK() || (!want.OK() && (want.Code != got.Code || want.Reason != got.Reason)) {
			return differ, fmt.Sprintf("%q: the model answers %s, the model with the injected bugs %s", line, want, got)
		}
		if a, b := r.rs.Dump(), r.ss.Dump(); !slices.Equal(a, b) {
			return differ, fmt.Sprintf("after %q and settle the state differs (-model +with the injected bugs):\n  %s", line, strings.Join(traces.DiffLines(a, b), "\n  "))
		}
	}
	return agree, ""
}

// unknown reports whether any violation is not a documented upstream race.
func unknown(vs []*model.Violation) bool {
	return slices.ContainsFunc(vs, func(v *model.Violation) bool { return v.Known == "" })
}

// settleRef settles the reference model, checking its safety properties
// on every step of the path and its quiescent ones at the end.
func (r *settledRun) settleRef() (bool, string) {
	n, path, err := r.ref.Settle(r.rs)
	if err != nil {
		return false, err.Error()
	}
	prev := r.rs
	for _, sd := range path {
		if unknown(r.ref.CheckTransition(&model.Transition{Prev: prev, Next: sd.State, Step: &sd.Step, Result: sd.Result})) {
			return false, ""
		}
		prev = sd.State
	}
	r.rs = n
	return !unknown(r.ref.CheckQuiescent(n)), ""
}

// broken names the first safety property of the reference model that the
// surrogate's transition breaks ("" if none): a GC write the
// specification forbids shows in the history even when a later write
// undoes it before the cluster settles (`cascade replay --history`).
func (r *settledRun) broken(prev, next *model.State, st model.Step, res model.Result) string {
	for _, v := range r.ref.CheckTransition(&model.Transition{Prev: prev, Next: next, Step: &st, Result: res}) {
		if v.Known == "" {
			return v.Error()
		}
	}
	return ""
}

// settleSur settles the surrogate, noting in broke the first safety
// property a step of its path breaks; under loseAuto it loses every
// update that first shows an object being deleted before the GC can
// deliver it, anywhere along the way.
func (r *settledRun) settleSur(broke *string) error {
	for range 1000 {
		r.ss = r.loseDeletionUpdates(r.ss)
		n, path, err := r.sur.Settle(r.ss)
		if err != nil {
			return err
		}
		cut := -1
		if r.loseAuto {
			cut = slices.IndexFunc(path, func(sd model.Settled) bool { return r.loseStep(sd.State) != nil })
		}
		if cut >= 0 {
			path = path[:cut+1]
		}
		prev := r.ss
		for _, sd := range path {
			if *broke == "" {
				*broke = r.broken(prev, sd.State, sd.Step, sd.Result)
			}
			prev = sd.State
		}
		if cut < 0 {
			r.ss = n
			return nil
		}
		r.ss = path[cut].State
	}
	return fmt.Errorf("lost updates kept coming")
}

// loseDeletionUpdates takes the surrogate's `gc lose` steps that impl's
// Auto mode takes, until none is left.
func (r *settledRun) loseDeletionUpdates(s *model.State) *model.State {
	for r.loseAuto {
		st := r.loseStep(s)
		if st == nil {
			return s
		}
		n, _, err := r.sur.Apply(s, *st)
		if err != nil {
			return s
		}
		s = n
	}
	return s
}

// loseStep is an enabled `gc lose` whose event is the first update to
// show its object being deleted: the GC informer's cache has the object
// not deleting, the event has it deleting.
func (r *settledRun) loseStep(s *model.State) *model.Step {
	if !r.loseAuto {
		return nil
	}
	for _, st := range r.sur.Enabled(s, model.Options{}) {
		if st.Op != model.OpLose {
			continue
		}
		if s.GC.Watch.Queues == nil {
			return nil
		}
		q := s.GC.Watch.Queues[st.Target.Kind]
		if len(q) == 0 || !q[0].Obj.Deleting {
			continue
		}
		for i := range s.GC.Watch.Cache {
			if c := &s.GC.Watch.Cache[i]; c.UID == q[0].Obj.UID && !c.Deleting {
				return &st
			}
		}
	}
	return nil
}

// settledDiffers reports whether the client steps make the two models
// disagree while the reference model's properties hold.
func settledDiffers(surrogate model.BugSet) func([]string) bool {
	return func(steps []string) bool {
		v, _ := newSettledRun(surrogate).run(steps)
		return v == differ
	}
}

// settledReproducer searches the client steps of a failing concurrent
// run, in the order they were sent, for a settled reproducer of the
// injected bugs, and returns it as a trace with the model's expectations
// and the number of its client steps; "" when the models agree on the
// settled run (the failure needs a race, or is not the bugs').
func settledReproducer(surrogate model.BugSet, sent []string, header func(summary string, steps int) ([]string, []traces.Header)) (string, int) {
	fails := settledDiffers(surrogate)
	if !fails(sent) {
		return "", 0
	}
	steps := simplify(ddmin(sent, fails), fails)
	r := newSettledRun(surrogate)
	_, summary := r.run(steps)
	desc, headers := header(summary, len(r.taken))
	return traces.Format(desc, headers, r.done), len(r.taken)
}

// reproduce searches the failing run for a settled reproducer of the
// injected bugs and replays it on the target; it returns the confirmed
// reproducer as the run's failure, or nil.
func (r *concurrentRun) reproduce(kind, summary string) *runFailure {
	if r.env.Surrogate == 0 || r.env.Confirm == nil {
		return nil
	}
	lines := landed(r.sent)
	begin := time.Now()
	inject := strings.Join(r.env.Inject, ",")
	type found struct {
		trace string
		steps int
	}
	f := interruptible(r.ctx, func() found {
		trace, steps := settledReproducer(r.env.Surrogate, lines, r.settledHeader(kind, summary, inject))
		return found{trace, steps}
	})
	trace, steps := f.trace, f.steps
	if trace == "" {
		if rf := r.race(kind, summary, lines); rf != nil {
			return rf
		}
		progress(r.cfg, "reproduce: the model with %s gives no settled or race reproducer of the %d-step run; shrinking the concurrent run", inject, len(lines))
		return nil
	}
	progress(r.cfg, "reproduce: %d client steps -> a %d-step settled reproducer on the model with %s (%s); replaying it on %s", len(lines), steps, inject, time.Since(begin).Round(time.Millisecond), r.env.Target)
	div, err := r.env.Confirm(r.ctx, trace)
	switch {
	case err != nil:
		progress(r.cfg, "reproduce: replay failed: %v; shrinking the concurrent run", err)
		return nil
	case div == "":
		progress(r.cfg, "reproduce: %s agrees with the settled reproducer; shrinking the concurrent run", r.env.Target)
		return nil
	}
	progress(r.cfg, "reproduce: %s diverges from it too", r.env.Target)
	return &runFailure{
		kind:          "divergence",
		summary:       fmt.Sprintf("the %d-step settled reproducer diverges on %s: %s\n(the concurrent run failed with %s: %s)", steps, r.env.Target, div, kind, firstLine(summary)),
		trace:         trace,
		steps:         steps,
		attributed:    true,
		replayHistory: true,
	}
}

// settledHeader describes a settled reproducer of the run that failed
// with kind and summary (settledReproducer's header).
func (r *concurrentRun) settledHeader(kind, summary, inject string) func(predicted string, steps int) ([]string, []traces.Header) {
	return func(predicted string, steps int) ([]string, []traces.Header) {
		desc := []string{
			fmt.Sprintf("A settled reproducer of a concurrent run of `cascade fuzz --target %s` that failed (%s):", r.env.Target, kind),
			firstLine(summary),
			fmt.Sprintf("Each of its %d client steps is followed by settle, so the GC catches up before the next; the expected output is the model's.", steps),
			"The model with the injected bug(s) predicts the divergence: " + firstLine(predicted),
		}
		// the state diff under that line, indented as it comes
		_, diff, _ := strings.Cut(predicted, "\n")
		for l := range strings.Lines(diff) {
			desc = append(desc, strings.TrimRight(l, "\n"))
		}
		desc = append(desc, "impl ran with injected bug(s) "+inject+"; reproduce with:",
			"  cascade replay --target "+r.env.Target+" --inject "+inject+" --history THIS.trace")
		return desc, []traces.Header{{Key: traces.HeaderFoundBy, Value: "cascade fuzz --target " + r.env.Target}}
	}
}
