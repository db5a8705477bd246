package fuzz

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// system is what a lockstep run drives beside the reference model: a
// Stepped impl through the driver (implSystem), or, while shrinking, the
// model with the injected bugs switched on standing in for it
// (modelSystem).
type system interface {
	// client performs a client step the reference model has accepted.
	// An error means the request could not be made at all.
	client(st model.Step, line string) (model.Result, error)
	// internal takes an internal or fault step the reference model has
	// taken. notEnabled reports that the system has no such step to take.
	internal(st model.Step, line string) (res model.Result, notEnabled, err error)
	// takes reports whether the system takes st at all: impl without its
	// adopter leaves controller steps to the model's caches alone.
	takes(st model.Step) bool
	// dump is the system's state in the model's dump format.
	dump() ([]string, error)
	// settle runs the system to quiescence by itself.
	settle() error
}

// lockstep is the judge of a stepped run: every step is taken on the
// reference model and on the system, and after each one their answers and
// states must agree and the model's safety properties hold. RunStepped
// draws the steps with rapid; script replays a fixed list of them, which
// is how a failing run is shrunk and confirmed.
type lockstep struct {
	m    *model.Model
	s    *model.State
	opts model.Options
	sys  system
	// done is the trace so far: one stanza per step, with the model's
	// output.
	done []traces.Written
	// steps are the client and internal steps taken, without those a
	// settle took: what a script replays.
	steps []string
	// fail reports a failure and must not return (rapid's Fatalf, or a
	// panic with stopRun).
	fail func(kind, summary string)
	// dirty: a step since the last compare changed what a dump shows
	// (the store or the events), by the model's account. Steps that only
	// move informer events or decide work (most of the GC's) change
	// neither, and impl's Stepped mode writes only on the steps that
	// send; a write impl made where the model made none shows at the
	// next compare.
	dirty bool
	// internals counts the internal steps the system took.
	internals int
	// known are the violations the registry excused (model.Violation's
	// Known), one line each in fuzz.Report.Known's form with the basis
	// "lockstep": the run passed through a known race, the model's
	// classification of the step both sides took. knownIDs are their
	// races, each once.
	known, knownIDs []string
	// otherOrder counts the steps settledOtherwise put in the trace
	// before the final settle (0: the system's own settle ended where
	// the model's canonical one does); they are the model's, not steps
	// of the run.
	otherOrder int
	// settleNote, when set, says why settledOtherwise found no order of
	// the model's that ends where the system's settle did; compare adds
	// it to the divergence.
	settleNote string
}

// client takes one client step on both. A step the model cannot take
// (an owner never created: not a step a trace can take) is a no-op.
func (l *lockstep) client(line string) {
	st, err := model.ParseStep(line)
	if err != nil {
		l.fail("error", fmt.Sprintf("generated step %q does not parse: %v", line, err))
	}
	next, want, err := l.m.Apply(l.s, st)
	if err != nil {
		return
	}
	if g, ok := l.sys.(clientRefuser); ok && g.refuses(next) {
		return
	}
	got, err := l.sys.client(st, line)
	if err != nil {
		l.fail("error", fmt.Sprintf("%s: %v", line, err))
	}
	l.steps = append(l.steps, line)
	l.taken(st, line, want, got, next)
	l.takeEager()
}

// takeEager takes, right after a step, the steps the system takes by
// itself at once, with no step between: the apiextensions cleanup of
// every CRD being deleted (a real apiextensions-apiserver deletes a
// terminating CRD's resources by itself and cannot be stepped), and
// those the system names eager (upstream-stepped's virtual delete
// events). The model takes each as the next step.
//
// A step that would leave the state as it is is not taken: the
// apiextensions cleanup of a CRD whose custom resources still carry
// finalizers stays enabled and changes nothing until they go (the real
// finalizer controller waits the same way), and taking it again and
// again would never end.
func (l *lockstep) takeEager() {
	ea, _ := l.sys.(eagerSystem)
	for {
		here := string(l.s.Encode(nil))
		i := slices.IndexFunc(l.m.Enabled(l.s, l.opts), func(st model.Step) bool {
			if st.Actor != model.ActorAPIExtensions && (ea == nil || !ea.eager(st)) {
				return false
			}
			next, _, err := l.m.Apply(l.s, st)
			return err != nil || string(next.Encode(nil)) != here
		})
		if i < 0 {
			return
		}
		l.take(l.m.Enabled(l.s, l.opts)[i])
	}
}

// clientRefuser is a system on which some client steps the model
// accepts are not taken: refuses reports it of the step that leaves the
// model in next (upstream-stepped: one after which the model would settle
// with a ReplicaSet or ReplicationController its real controller scales).
// The step is dropped as one the model refuses.
type clientRefuser interface{ refuses(next *model.State) bool }

// eagerSystem is a system that takes some internal steps by itself the
// moment they are enabled.
type eagerSystem interface{ eager(st model.Step) bool }

// stateSystem is a system that takes an internal step knowing the
// model's states around it and its result (upstream-stepped, which reads
// from them what IO the real controller manager is to do).
type stateSystem interface {
	internalWith(st model.Step, prev, next *model.State, want model.Result) (res model.Result, notEnabled, err error)
}

// selfSettler is a system that settles by itself rather than taking the
// model's settle path step by step (upstream-stepped: steps such as
// deliver-virtual cannot be taken through the proxy one at a time).
type selfSettler interface{ settlesAlone() bool }

// settleFirstSystem is a system that settles by itself, in an order of
// its own, after it has taken in lockstep, in the model's canonical
// order, the internal steps settleFirst names (upstream-stepped: every
// step the proxy can produce). Where the outcome of a settle depends on
// the order (a known race such as the stale graph's unblock putting back
// a reference the orphaning removed), two settles in their own orders
// can end apart; taking the steps in lockstep first leaves the system
// only the steps the model cannot step it through.
type settleFirstSystem interface {
	settleFirst(st model.Step) bool
	// settleBegun names the steps the system has begun and finishes in
	// its own settle, unstepped: the model takes them alone after the
	// settleFirst steps and before its settle path, so that its path
	// starts where the system's work started (upstream-stepped: an
	// orphan pass the proxy cannot step, whose dependents the real
	// worker read when it took the owner).
	settleBegun(st model.Step) bool
}

// MaxSettleFirst bounds the steps takeFirst takes before a settle.
const MaxSettleFirst = 500

// takeFirst takes, before a settle, the enabled steps the system names
// (settleFirstSystem), the first in the model's canonical order each
// time, until none is enabled; then, on the model alone, those the
// system has begun.
func (l *lockstep) takeFirst() {
	sf, ok := l.sys.(settleFirstSystem)
	if !ok {
		return
	}
	for range MaxSettleFirst {
		en := l.m.Enabled(l.s, l.opts)
		i := slices.IndexFunc(en, sf.settleFirst)
		if i < 0 {
			break
		}
		l.take(en[i])
	}
	for range MaxSettleFirst {
		en := l.m.Enabled(l.s, l.opts)
		i := slices.IndexFunc(en, sf.settleBegun)
		if i < 0 {
			return
		}
		line := en[i].String()
		next, want, err := l.m.Apply(l.s, en[i])
		if err != nil {
			l.fail("error", fmt.Sprintf("the model offered %q and then refused it: %v", line, err))
		}
		l.steps = append(l.steps, line)
		l.done = append(l.done, traces.Written{Commands: []string{line}, Output: output(line, want, next)})
		l.s = next
	}
}

// namedSystem is a system with a name of its own for reports.
type namedSystem interface{ name() string }

// take takes an internal step the model has enabled on both.
func (l *lockstep) take(st model.Step) {
	line := st.String()
	next, want, err := l.m.Apply(l.s, st)
	if err != nil {
		l.fail("error", fmt.Sprintf("the model offered %q and then refused it: %v", line, err))
	}
	l.steps = append(l.steps, line)
	l.internal(st, line, want, next)
	if _, eager := l.sys.(eagerSystem); eager && l.sys.takes(st) {
		l.takeEager()
	}
}

// internal takes on the system an internal step the model has taken.
func (l *lockstep) internal(st model.Step, line string, want model.Result, next *model.State) {
	if !l.sys.takes(st) {
		if ea, ok := l.sys.(eagerSystem); ok && ea.eager(st) {
			// the system took it by itself within the step before: the
			// trace names it, so that it replays on the model
			l.done = append(l.done, traces.Written{Commands: []string{line}, Output: output(line, want, next)})
		}
		l.s = next
		return
	}
	var got model.Result
	var notEnabled, err error
	if ss, ok := l.sys.(stateSystem); ok {
		got, notEnabled, err = ss.internalWith(st, l.s, next, want)
	} else {
		got, notEnabled, err = l.sys.internal(st, line)
	}
	if notEnabled != nil {
		l.done = append(l.done, traces.Written{Commands: []string{line}, Output: output(line, want, next)})
		l.fail("divergence", fmt.Sprintf("the model takes %q but the %s cannot: %v", line, l.sysName(), notEnabled))
	}
	if err != nil {
		l.fail("error", fmt.Sprintf("%s: %v", line, err))
	}
	l.internals++
	l.taken(st, line, want, got, next)
}

func (l *lockstep) sysName() string {
	if _, ok := l.sys.(*modelSystem); ok {
		return "model with the injected bugs"
	}
	if n, ok := l.sys.(namedSystem); ok {
		return n.name()
	}
	return "impl"
}

// taken records a step both sides took, then checks that their answers
// agree and that the model's safety properties hold on the transition.
func (l *lockstep) taken(st model.Step, line string, want, got model.Result, next *model.State) {
	prev := l.s
	l.s = next
	l.dirty = l.dirty || !model.SameStore(prev, next) || len(prev.Events) != len(next.Events)
	l.done = append(l.done, traces.Written{Commands: []string{line}, Output: output(line, want, next)})
	if want.OK() != got.OK() || (!want.OK() && (want.Code != got.Code || want.Reason != got.Reason)) {
		l.fail("divergence", fmt.Sprintf("%q: the model answers %s, %s %s", line, want, l.sysName(), got))
	}
	for _, v := range l.m.CheckTransition(&model.Transition{Prev: prev, Next: next, Step: &st, Result: want}) {
		if v.Known == "" {
			l.fail("property", fmt.Sprintf("%q violates %s", line, v))
		}
		l.excused(v.Known, fmt.Sprintf("%q violates %s", line, v))
	}
}

// compare checks that the system's state equals the model's, when a step
// since the last compare changed it.
func (l *lockstep) compare() {
	if len(l.done) == 0 || !l.dirty {
		return
	}
	l.dirty = false
	l.check(l.realDump(l.s.Dump()))
}

// realDump is the system's state, dumped again while it differs from
// want for as long as the system's outcome may lag (eventual).
func (l *lockstep) realDump(want []string) []string {
	real, err := l.sys.dump()
	if err != nil {
		l.fail("error", fmt.Sprintf("dump: %v", err))
	}
	if ev, ok := l.sys.(eventual); ok && !slices.Equal(want, real) {
		if real, err = ev.redump(want); err != nil {
			l.fail("error", fmt.Sprintf("dump: %v", err))
		}
	}
	return real
}

// check fails the run when the system's dump real differs from the
// model's state.
func (l *lockstep) check(real []string) {
	want := l.s.Dump()
	if !slices.Equal(want, real) {
		note := ""
		if l.settleNote != "" {
			note = "\n" + l.settleNote
		}
		l.fail("divergence", fmt.Sprintf("after %q the state differs (-model +%s):\n  %s%s", l.done[len(l.done)-1].Commands[0], l.sysName(), strings.Join(traces.DiffLines(want, real), "\n  "), note))
	}
}

// settleSteps takes the model's settle path on both, each step recorded
// as a step of the run: the GC catching up in the middle of a run. It
// reports whether there was anything to take.
func (l *lockstep) settleSteps() bool {
	end, path, err := l.m.Settle(l.s)
	if err != nil {
		l.fail("error", fmt.Sprintf("model settle: %v", err))
	}
	if l.settlesAlone() {
		if len(path) == 0 {
			return false
		}
		l.steps = append(l.steps, "settle")
		l.s = end
		l.done = append(l.done, traces.Written{Commands: []string{"settle"}, Output: l.s.Dump()})
		if err := l.sys.settle(); err != nil {
			l.fail("error", fmt.Sprintf("%s settle: %v", l.sysName(), err))
		}
		l.dirty = true
		return true
	}
	for _, sd := range path {
		line := sd.Step.String()
		l.steps = append(l.steps, line)
		l.internal(sd.Step, line, sd.Result, sd.State)
	}
	return len(path) > 0
}

// settlesAlone reports whether the system settles by itself
// (selfSettler) rather than along the model's path.
func (l *lockstep) settlesAlone() bool {
	s, ok := l.sys.(selfSettler)
	return ok && s.settlesAlone()
}

// settle ends a run: the model runs to quiescence and the system takes
// the same internal steps in the same order (two settles in their own
// orders could end apart where the outcome is not confluent, such as
// whether a warning event is emitted before its object goes); then the
// system must have nothing left to do, the states must agree, and the
// model's quiescent properties must hold.
func (l *lockstep) settle() {
	l.takeFirst()
	start := l.s
	end, path, err := l.m.Settle(l.s)
	if err != nil {
		l.fail("error", fmt.Sprintf("model settle: %v", err))
	}
	if l.settlesAlone() {
		l.s = end
	} else {
		for _, sd := range path {
			l.internal(sd.Step, sd.Step.String(), sd.Result, sd.State)
		}
	}
	l.done = append(l.done, traces.Written{Commands: []string{"settle"}, Output: l.s.Dump()})
	if err := l.sys.settle(); err != nil {
		l.fail("error", fmt.Sprintf("%s settle: %v", l.sysName(), err))
	}
	// the system settled by itself: whatever it did shows now
	real := l.realDump(l.s.Dump())
	if l.settlesAlone() {
		l.settledOtherwise(start, real)
	}
	l.dirty = false
	l.check(real)
	for _, v := range l.m.CheckQuiescent(l.s) {
		if v.Known == "" {
			l.fail("property", fmt.Sprintf("at quiescence: %s", v))
		}
		l.excused(v.Known, fmt.Sprintf("at quiescence: %s", v))
	}
}

// excused records that the run passed through known race id.
func (l *lockstep) excused(id, msg string) {
	l.known = append(l.known, id+" (on lockstep): "+msg)
	if !slices.Contains(l.knownIDs, id) {
		l.knownIDs = append(l.knownIDs, id)
	}
}

// settledOtherwise follows, on the model, the order a system that
// settles by itself (selfSettler) took, where it is not Settle's. The
// model's Settle takes one schedule, Enabled's canonical order; the real
// GC left to settle takes its own (each resource's informer hands on its
// events on a goroutine of its own), and where the outcome depends on the
// order its end may be another (testdata/open's seed11-run141 before
// this: the graph builder took rc/d's creation before cronjob/ns3/a's
// deletion, and addDependentToOwners reported OwnerRefInvalidNamespace
// for the owner it still saw). If some interleaving of the model's
// internal steps from where the settle began reaches the system's end,
// quiescent (model.SettlesTo), the model takes that interleaving instead:
// the trace names its steps before "settle", and the run is counted
// (otherOrder). An end no interleaving reaches is left to check to
// report. No timing enters: the model alone says which ends a settle may
// have.
func (l *lockstep) settledOtherwise(start *model.State, real []string) {
	if slices.Equal(l.s.Dump(), real) {
		return
	}
	path, found, err := l.m.SettlesTo(start, real, reorders)
	switch {
	case err != nil:
		l.settleNote = fmt.Sprintf("the search for an order of the GC's deliveries that ends there stopped: %v", err)
		return
	case !found || len(path) == 0:
		l.settleNote = "no order of the GC's pending deliveries ends there on the model either (model.SettlesTo)"
		return
	}
	settle := l.done[len(l.done)-1]
	l.done = l.done[:len(l.done)-1]
	for _, sd := range path {
		line := sd.Step.String()
		l.done = append(l.done, traces.Written{Commands: []string{line}, Output: output(line, sd.Result, sd.State)})
	}
	l.s = path[len(path)-1].State
	settle.Output = l.s.Dump()
	l.done = append(l.done, settle)
	l.otherOrder = len(path)
}

// stepCount is the number of the run's steps: the trace's stanzas but
// those settledOtherwise added.
func (l *lockstep) stepCount() int { return len(l.done) - l.otherOrder }

// reorders names the steps whose order a real settle varies
// (model.SettlesTo): the GC informers' deliveries, one goroutine per
// resource feeding one graph builder.
func reorders(st model.Step) bool {
	return st.Actor == model.ActorGC && st.Op == model.OpDeliver
}

// script replays steps as a run: client steps as drawn, internal steps
// only when the model has them enabled (shrinking removes the steps that
// enabled others), "settle" as the model's settle path, a compare after
// each, and the final settle.
func (l *lockstep) script(steps []string) {
	for _, line := range steps {
		if line == "settle" {
			l.settleSteps()
			l.compare()
			continue
		}
		st, err := model.ParseStep(line)
		if err != nil {
			l.fail("error", fmt.Sprintf("step %q does not parse: %v", line, err))
		}
		if st.Actor == model.ActorClient {
			l.client(line)
		} else if en, ok := l.enabled(line); ok {
			l.take(en)
		} else {
			continue
		}
		l.compare()
	}
	l.settle()
}

// enabled finds the enabled internal step spelled line.
func (l *lockstep) enabled(line string) (model.Step, bool) {
	for _, st := range l.m.Enabled(l.s, l.opts) {
		if st.String() == line {
			return st, true
		}
	}
	return model.Step{}, false
}

// eventual is a system whose state reaches a step's outcome only
// eventually in part: impl records its Warning events through client-go's
// asynchronous broadcaster, so an OwnerRefInvalidNamespace event may land
// just after the step that emitted it returned.
type eventual interface {
	// redump dumps again until the dump equals want or a short wait ends,
	// and returns the last dump.
	redump(want []string) ([]string, error)
}

// stopRun is the panic a scripted run's fail raises; guard recovers it.
type stopRun struct{ kind, summary string }

// guard runs f with l.fail panicking stopRun, and returns the failure
// (nil if f ran through).
func (l *lockstep) guard(f func()) (failed *stopRun) {
	l.fail = func(kind, summary string) { panic(&stopRun{kind, summary}) }
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(*stopRun)
			if !ok {
				panic(r)
			}
			failed = s
		}
	}()
	f()
	return nil
}

// output is a stanza's expected output: a refusal line, then the dump.
func output(line string, res model.Result, s *model.State) []string {
	var out []string
	if !res.OK() {
		out = append(out, "! "+line+" -> "+res.String())
	}
	return append(out, s.Dump()...)
}

// modelSystem is the model with the injected bugs switched on, standing
// in for impl while a failing run is shrunk: impl's bug switches restore
// the same documented behaviours as the model's (impl/bugs mirrors
// model/bugs.go), so a run on which the two models disagree is a run on
// which impl is expected to disagree with the reference model. Shrinking
// asks it thousands of questions in the time impl answers one; every
// answer it gives is confirmed on impl before it is reported.
type modelSystem struct {
	m    *model.Model
	s    *model.State
	opts model.Options
}

func (ms *modelSystem) client(st model.Step, line string) (model.Result, error) {
	next, res, err := ms.m.Apply(ms.s, st)
	if err != nil {
		return model.Result{}, fmt.Errorf("refused by the model with the injected bugs: %w", err)
	}
	ms.s = next
	return res, nil
}

func (ms *modelSystem) internal(st model.Step, line string) (model.Result, error, error) {
	next, res, err := ms.m.Apply(ms.s, st)
	if errors.Is(err, model.ErrNotEnabled) {
		return model.Result{}, err, nil
	}
	if err != nil {
		return model.Result{}, nil, err
	}
	ms.s = next
	return res, nil, nil
}

func (ms *modelSystem) takes(model.Step) bool { return true }

func (ms *modelSystem) dump() ([]string, error) { return ms.s.Dump(), nil }

func (ms *modelSystem) settle() error {
	s, _, err := ms.m.Settle(ms.s)
	if err != nil {
		return err
	}
	ms.s = s
	return nil
}
