package fuzz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/step"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// SteppedEnv is what a stepped run needs from its target.
type SteppedEnv struct {
	Target         string // for reports and trace headers
	Admin, Limited *rest.Config
	// Start starts the Stepped impl the runs share (informers synced).
	// Every run begins and ends by settling it, so that no run meets
	// another's leftovers in its queues; starting one per run would cost
	// more than the run (the webhook's TLS server and registration).
	Start func(ctx context.Context) (*impl.Target, error)
	// Bugs are the model's switches. A stepped run gives the model only
	// the fault switches (lost-first-update: informer behaviour, not GC
	// logic), which make fault steps exist; every other injected bug lives
	// in impl alone and shows as a divergence from the model.
	Bugs model.BugSet
	// Inject names impl's injected bugs, for trace headers.
	Inject []string
	// Coalesce lets runs take informer relists that skip an event.
	Coalesce bool
	// Adopter says Start runs impl's adopting controller, whose steps
	// the runs then take too.
	Adopter bool
}

// internalVerbs are the rapid action keys of internal steps: each takes
// one enabled step of its verb, chosen by rapid, or is skipped when none
// is enabled. Controller steps exist only for impl's adopter (Herds).
var internalVerbs = map[string]func(st model.Step) bool{
	"gc deliver":         func(st model.Step) bool { return st.Actor == model.ActorGC && st.Op == model.OpDeliver },
	"gc deliver-virtual": func(st model.Step) bool { return st.Op == model.OpDeliverVirtual },
	"gc coalesce":        func(st model.Step) bool { return st.Actor == model.ActorGC && st.Op == model.OpCoalesce },
	"gc lose":            func(st model.Step) bool { return st.Op == model.OpLose },
	"gc attemptToDelete": func(st model.Step) bool { return st.Op == model.OpAttemptToDelete },
	"gc attemptToOrphan": func(st model.Step) bool { return st.Op == model.OpAttemptToOrphan },
	"gc send":            func(st model.Step) bool { return st.Op == model.OpSend },
	"gc sync":            func(st model.Step) bool { return st.Op == model.OpSync },
	"controller deliver": func(st model.Step) bool {
		return st.Actor == model.ActorController && st.Op == model.OpDeliver && herdOrPod(st.Target.Kind)
	},
	"controller adopt": func(st model.Step) bool {
		return st.Op == model.OpAdopt && st.By.Kind.Info().Short == "herd"
	},
}

func herdOrPod(k model.KindID) bool {
	s := k.Info().Short
	return s == "herd" || s == "pod"
}

// steppedRun is one rapid check of a stepped run.
type steppedRun struct {
	ctx  context.Context
	env  SteppedEnv
	cfg  Config
	m    *model.Model
	s    *model.State
	it   *impl.Target
	d    *driver.Driver
	done []traces.Written // one stanza per step, with the model's output
	fail func(kind, summary string)
}

// RunStepped runs cfg.Checks stepped runs against env.
func RunStepped(ctx context.Context, env SteppedEnv, cfg Config) (*Report, error) {
	rapidMu.Lock()
	defer rapidMu.Unlock()
	rep := &Report{Target: env.Target, Inject: env.Inject, Mode: "stepped"}
	start := time.Now()
	var last *runFailure
	var foundAt time.Time
	n := 0
	it, err := env.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("fuzz: start impl: %w", err)
	}
	defer func() { _ = it.Stop() }()
	prop := func(t *rapid.T) {
		if cfg.expired() && foundAt.IsZero() {
			return
		}
		n++
		m := &model.Model{Bugs: env.Bugs, Controllers: []string{}}
		if env.Adopter {
			m.Controllers = []string{"herd"}
		}
		r := &steppedRun{ctx: ctx, env: env, cfg: cfg, m: m, s: model.NewState(), it: it}
		r.fail = func(kind, summary string) {
			if foundAt.IsZero() {
				foundAt = time.Now()
			}
			last = &runFailure{kind: kind, summary: summary, trace: r.trace(kind, summary), steps: len(r.done)}
			t.Fatalf("%s: %s", kind, stable(summary, r.d))
		}
		r.run(t)
		rep.Steps += len(r.done)
		if foundAt.IsZero() {
			rep.Checks++
			progress(cfg, "run %d/%d: %d steps agree with the model (%s)", n, cfg.Checks, len(r.done), time.Since(start).Round(time.Millisecond))
		}
	}
	msg, failFile, err := runRapid("cascade-fuzz-"+env.Target, cfg, prop)
	rep.Elapsed = time.Since(start)
	if err != nil || msg == "" {
		return rep, err
	}
	return rep, finish(cfg, rep, last, foundAt, start, msg, failFile)
}

// run is one check: a fresh impl and driver, rapid's actions, then both
// settled and compared.
func (r *steppedRun) run(t *rapid.T) {
	if err := r.it.Settle(r.ctx); err != nil {
		t.Fatalf("error: settle impl before the run: %v", err)
	}
	var err error
	if r.d, err = driver.New(r.env.Admin, r.env.Limited, "cascade-"+driver.NewRunID()); err != nil {
		t.Fatalf("error: %v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), time.Minute)
		defer cancel()
		_ = r.d.Cleanup(ctx)
		_ = r.it.Settle(ctx) // the deletions' events: the next run starts from empty queues
	}()
	g := &gen{u: r.cfg.Universe}
	actions := map[string]func(*rapid.T){}
	for verb, draw := range g.verbs() {
		actions[verb] = func(t *rapid.T) { r.client(t, draw(t)) }
	}
	for verb, match := range internalVerbs {
		if (verb == "gc coalesce" && !r.env.Coalesce) || (strings.HasPrefix(verb, "controller ") && !r.env.Adopter) {
			continue
		}
		actions[verb] = func(t *rapid.T) { r.internal(t, match) }
	}
	actions[""] = func(t *rapid.T) { r.compare(t) }
	t.Repeat(actions)
	r.settle(t)
}

// client takes one client step on the model and through the driver.
func (r *steppedRun) client(t *rapid.T, line string) {
	st, err := model.ParseStep(line)
	if err != nil {
		t.Fatalf("error: generated step %q does not parse: %v", line, err)
	}
	next, want, err := r.m.Apply(r.s, st)
	if err != nil {
		// e.g. an owner never created: not a step a trace can take. A
		// no-op, not a skip: rapid counts an action that skips after
		// drawing as invalid and ends runs that have too many.
		return
	}
	got, err := r.d.Do(r.ctx, st, r.rvMapper())
	if err != nil {
		r.fail("error", fmt.Sprintf("%s: %v", line, err))
	}
	r.taken(t, st, line, want, got, next)
}

// internal takes one enabled internal step of a verb on both.
func (r *steppedRun) internal(t *rapid.T, match func(model.Step) bool) {
	var enabled []model.Step
	for _, st := range r.m.Enabled(r.s, model.Options{Coalesce: r.env.Coalesce}) {
		if match(st) {
			enabled = append(enabled, st)
		}
	}
	if len(enabled) == 0 {
		t.Skip("not enabled")
	}
	st := enabled[rapid.IntRange(0, len(enabled)-1).Draw(t, "which")]
	line := st.String()
	next, want, err := r.m.Apply(r.s, st)
	if err != nil {
		t.Fatalf("error: the model offered %q and then refused it: %v", line, err)
	}
	r.internalStep(t, st, line, want, next)
}

// internalStep takes on impl an internal step the model has taken, and
// compares.
func (r *steppedRun) internalStep(t *rapid.T, st model.Step, line string, want model.Result, next *model.State) {
	if st.Actor == model.ActorController && !r.env.Adopter {
		// only the model's controller caches see it: nobody adopts here
		r.s = next
		return
	}
	real, err := r.d.RealLine(line)
	if err != nil {
		r.fail("error", fmt.Sprintf("%s: %v", line, err))
	}
	writeErr, err := r.it.Step(r.ctx, real)
	if errors.Is(err, step.ErrNotEnabled) {
		r.done = append(r.done, traces.Written{Commands: []string{line}, Output: output(line, want, next)})
		r.fail("divergence", fmt.Sprintf("the model takes %q but impl cannot: %v", line, err))
	}
	if err != nil {
		r.fail("error", fmt.Sprintf("%s: %v", line, err))
	}
	r.taken(t, st, line, want, resultOf(writeErr), next)
}

// resultOf turns a stepped write's answer into the model's Result.
func resultOf(writeErr error) model.Result {
	if writeErr == nil {
		return model.Result{Code: 200}
	}
	var status apierrors.APIStatus
	if errors.As(writeErr, &status) {
		s := status.Status()
		return model.Result{Code: int(s.Code), Reason: string(s.Reason), Message: s.Message}
	}
	return model.Result{Reason: "Error", Message: writeErr.Error()}
}

// taken records a step both sides took, then checks that their answers
// agree and that the model's safety properties hold on the transition.
func (r *steppedRun) taken(t *rapid.T, st model.Step, line string, want, got model.Result, next *model.State) {
	prev := r.s
	r.s = next
	r.done = append(r.done, traces.Written{Commands: []string{line}, Output: output(line, want, next)})
	if want.OK() != got.OK() || (!want.OK() && (want.Code != got.Code || want.Reason != got.Reason)) {
		r.fail("divergence", fmt.Sprintf("%q: the model answers %s, impl %s", line, want, got))
	}
	for _, v := range r.m.CheckTransition(&model.Transition{Prev: prev, Next: next, Step: st, Result: want}) {
		if v.Known == "" {
			r.fail("property", fmt.Sprintf("%q violates %s", line, v))
		}
	}
}

// output is a stanza's expected output: a refusal line, then the dump.
func output(line string, res model.Result, s *model.State) []string {
	var out []string
	if !res.OK() {
		out = append(out, "! "+line+" -> "+res.String())
	}
	return append(out, s.Dump()...)
}

// compare is rapid's invariant check after every action: impl's real
// state equals the model's.
func (r *steppedRun) compare(t *rapid.T) {
	if len(r.done) == 0 {
		return
	}
	real, err := r.d.Dump(r.ctx)
	if err != nil {
		r.fail("error", fmt.Sprintf("dump: %v", err))
	}
	if want := r.s.Dump(); !slices.Equal(want, real) {
		r.fail("divergence", fmt.Sprintf("after %q the state differs (-model +impl):\n  %s", r.done[len(r.done)-1].Commands[0], strings.Join(traces.DiffLines(want, real), "\n  ")))
	}
}

// settle ends a run: the model runs to quiescence and impl takes the
// same internal steps in the same order (two settles in their own orders
// could end apart where the outcome is not confluent, such as whether a
// warning event is emitted before its object goes); then impl must have
// nothing left to do, the states must agree, and the model's quiescent
// properties must hold.
func (r *steppedRun) settle(t *rapid.T) {
	_, path, err := r.m.Settle(r.s)
	if err != nil {
		r.fail("error", fmt.Sprintf("model settle: %v", err))
	}
	for _, sd := range path {
		r.internalStep(t, sd.Step, sd.Step.String(), sd.Result, sd.State)
	}
	r.done = append(r.done, traces.Written{Commands: []string{"settle"}, Output: r.s.Dump()})
	if err := r.it.Settle(r.ctx); err != nil {
		r.fail("error", fmt.Sprintf("impl settle: %v", err))
	}
	r.compare(t)
	for _, v := range r.m.CheckQuiescent(r.s) {
		if v.Known == "" {
			r.fail("property", fmt.Sprintf("at quiescence: %s", v))
		}
	}
}

// rvMapper maps if-rv=N as replay does: current when the model's object
// is at N.
func (r *steppedRun) rvMapper() driver.RVMapper {
	return func(tg model.Target, n int) bool {
		o := r.s.Lookup(tg.Kind, tg.Namespace, tg.Name)
		return o != nil && o.RV == n
	}
}

// trace renders the run so far as a trace file: one stanza per step,
// each expecting the model's output, so that `cascade replay` on the model
// passes and on the failing target shows the difference.
func (r *steppedRun) trace(kind, summary string) string {
	desc := []string{
		fmt.Sprintf("A stepped run of `cascade fuzz --target %s` that failed (%s):", r.env.Target, kind),
		firstLine(summary),
		"Each stanza expects the model's state.",
	}
	if len(r.env.Inject) > 0 {
		desc = append(desc, "impl ran with injected bug(s) "+strings.Join(r.env.Inject, ",")+"; reproduce with:",
			"  cascade replay --target impl-stepped --inject "+strings.Join(r.env.Inject, ",")+" THIS.trace")
	}
	headers := []traces.Header{
		{Key: traces.HeaderFoundBy, Value: "cascade fuzz --target " + r.env.Target},
		{Key: traces.HeaderTargets, Value: "model,impl"},
	}
	var modelBugs []string
	for _, b := range r.env.Bugs.List() {
		modelBugs = append(modelBugs, b.String())
	}
	if len(modelBugs) > 0 {
		headers = append(headers, traces.Header{Key: traces.HeaderBug, Value: strings.Join(modelBugs, ",")})
	}
	if kind == "property" {
		headers = append(headers, traces.Header{Key: traces.HeaderProperty, Value: propertyName(summary)})
	}
	return traces.Format(desc, headers, r.done)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// propertyName extracts the property a violation message names.
func propertyName(summary string) string {
	for _, p := range model.Properties {
		if strings.Contains(summary, p.Name) {
			return p.Name
		}
	}
	return ""
}
