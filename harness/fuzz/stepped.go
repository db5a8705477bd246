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
	"github.com/cascade-k8s/cascade/harness/target"
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
	// When Start is nil the runs drive the model with the Surrogate bugs
	// in impl's place: that is how the generator is tested against every
	// bug of the catalogue in seconds (TestGeneratorReachesBugs).
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
	// AdopterKinds are the owner kinds (short names: rs, rc, deploy, herd)
	// whose adopting controller Start runs in impl, stepped: the runs
	// then take controller steps too, and the model runs the same
	// controllers. None: controller steps only feed the model's caches.
	AdopterKinds []string
	// Surrogate are the model's switches of the injected bugs. When set,
	// a failing run is shrunk against the model with them on standing in
	// for impl (modelSystem), and the result confirmed on impl.
	Surrogate model.BugSet
	// Hold, on upstream-stepped, holds kube-controller-manager's traffic
	// about a run's objects at the proxy; the run's internal steps
	// release it (upstreamSystem). Start is nil then.
	Hold func(ctx context.Context, d *driver.Driver) (*target.UpstreamHold, error)
	// Steppable, when set, says which enabled internal steps the target
	// can take: the generator draws no other.
	Steppable func(model.Step) bool
	// SettleControllers are the owner kinds (short names) whose adopting
	// controllers the target runs unstepped, their traffic held until a
	// settle (upstream-stepped's workload kube-controller-manager): the
	// model runs them too, so that its settle adopts and releases as
	// theirs, and the generator draws none of their steps.
	SettleControllers []string
	// Release is the Kubernetes release the model follows (the zero
	// value: model.DefaultRelease): upstream-stepped's binaries', whose
	// GC and API server both change between releases. impl-stepped keeps
	// the default, since impl's GC is v1.36 and v1.37's whatever the
	// binaries (README, Releases).
	Release model.Release
}

// internalVerbs are the rapid action keys of internal steps: each takes
// one enabled step of its group, chosen by rapid. Controller steps are
// offered only when impl runs its adopter (AdopterKinds).
var internalVerbs = map[string]func(st model.Step) bool{
	"gc event": func(st model.Step) bool {
		return (st.Actor == model.ActorGC && st.Op == model.OpDeliver) || st.Op == model.OpDeliverVirtual
	},
	"gc work": func(st model.Step) bool {
		switch st.Op {
		case model.OpAttemptToDelete, model.OpAttemptToOrphan, model.OpSend, model.OpSync:
			return true
		}
		return false
	},
	"gc coalesce": func(st model.Step) bool { return st.Actor == model.ActorGC && st.Op == model.OpCoalesce },
	"gc lose":     func(st model.Step) bool { return st.Op == model.OpLose },
	"controller": func(st model.Step) bool {
		switch st.Op {
		case model.OpDeliver, model.OpAdopt, model.OpRelease:
			return st.Actor == model.ActorController
		}
		return false
	},
}

// offered reports whether a run offers the internal verb: fault steps
// only under their switch, controller steps only with impl's adopter.
func (env SteppedEnv) offered(verb string) bool {
	switch verb {
	case "gc coalesce":
		return env.Coalesce
	case "gc lose":
		return env.Bugs.Has(model.BugLostFirstUpdate)
	case "controller":
		return len(env.AdopterKinds) > 0
	}
	return true
}

// steppable reports whether the target can take the enabled internal
// step st (every step, without Steppable).
func (env SteppedEnv) steppable(st model.Step) bool {
	return env.Steppable == nil || env.Steppable(st)
}

// steppable reports whether the run's system can take the enabled
// internal step st now.
func (r *steppedRun) steppable(st model.Step) bool {
	if !r.env.steppable(st) {
		return false
	}
	us, ok := r.sys.(upstreamSystem)
	return !ok || us.retryable(st)
}

// steppedRun is one rapid check of a stepped run: a lockstep judge over
// impl, whose steps rapid draws.
type steppedRun struct {
	lockstep
	ctx context.Context
	env SteppedEnv
	cfg Config
	it  *impl.Target
	d   *driver.Driver
	// hold is the run's hold on upstream-stepped's proxy
	hold *target.UpstreamHold
}

// implSystem is a Stepped impl driven through the driver.
type implSystem struct{ r *steppedRun }

func (is implSystem) client(st model.Step, line string) (model.Result, error) {
	return is.r.d.Do(is.r.ctx, st, is.r.rvMapper())
}

func (is implSystem) internal(st model.Step, line string) (model.Result, error, error) {
	if st.Actor == model.ActorAPIExtensions {
		// the real apiextensions-apiserver cleans up by itself (the
		// lockstep takes its step right after the CRD's delete); the
		// next compare waits for it
		return model.Result{Code: 200}, nil, nil
	}
	real, err := is.r.d.RealLine(line)
	if err != nil {
		return model.Result{}, nil, err
	}
	writeErr, err := is.r.it.Step(is.r.ctx, real)
	if errors.Is(err, step.ErrNotEnabled) {
		return model.Result{}, err, nil
	}
	if err != nil {
		return model.Result{}, nil, err
	}
	return resultOf(writeErr), nil, nil
}

// takes: without impl's adopter only the model's controller caches see
// controller steps; nobody adopts here.
func (is implSystem) takes(st model.Step) bool {
	if st.Actor != model.ActorController {
		return true
	}
	kinds := is.r.env.AdopterKinds
	if st.Op == model.OpAdopt || st.Op == model.OpRelease {
		return len(kinds) > 0
	}
	// the model's controller watches every adopting kind and what it
	// adopts; impl's adopter watches only the kinds it manages and
	// theirs, so an event of another (a Herd's, when impl does not
	// manage Herds) feeds only the model's caches
	short := st.Target.Kind.Info().Short
	return slices.ContainsFunc(kinds, func(k string) bool {
		kind, _ := model.KindByShort(k)
		return k == short || kind.Info().Adopts == short
	})
}

func (is implSystem) dump() ([]string, error) { return is.r.d.Dump(is.r.ctx) }

// redump waits up to a second for impl's asynchronous events.
func (is implSystem) redump(want []string) ([]string, error) { return redumpUntil(is.dump, want) }

// redumpUntil dumps again until the dump equals want or a second has
// passed, and returns the last dump.
func redumpUntil(dump func() ([]string, error), want []string) ([]string, error) {
	deadline := time.Now().Add(time.Second)
	for {
		real, err := dump()
		if err != nil || slices.Equal(want, real) || time.Now().After(deadline) {
			return real, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (is implSystem) settle() error { return is.r.it.Settle(is.r.ctx) }

// newRun makes a run on the shared impl, or on the surrogate model when
// there is no impl, with a fresh model.
func (env SteppedEnv) newRun(ctx context.Context, cfg Config, it *impl.Target) *steppedRun {
	r := &steppedRun{ctx: ctx, env: env, cfg: cfg, it: it}
	opts := model.Options{Coalesce: env.Coalesce}
	r.lockstep = lockstep{m: env.model(env.Bugs), s: model.NewState(), opts: opts, sys: implSystem{r}}
	if it == nil {
		r.sys = &modelSystem{m: env.model(env.Bugs | env.Surrogate), s: model.NewState(), opts: opts}
	}
	return r
}

// model is the reference model of the runs, under bugs.
func (env SteppedEnv) model(bugs model.BugSet) *model.Model {
	// never nil: a nil Controllers runs every controller
	controllers := append(append([]string{}, env.AdopterKinds...), env.SettleControllers...)
	return &model.Model{Bugs: bugs, Controllers: controllers, Release: env.Release}
}

// RunStepped runs cfg.Checks stepped runs against env.
func RunStepped(ctx context.Context, env SteppedEnv, cfg Config) (*Report, error) {
	rapidMu.Lock()
	defer rapidMu.Unlock()
	cfg = withSeed(cfg)
	rep := &Report{Target: env.Target, Inject: env.Inject, Mode: "stepped", Seed: cfg.Seed}
	start := time.Now()
	var first, last *runFailure
	var foundAt time.Time
	n, foundRun := 0, 0
	shrinking := false // rapid is rerunning a failed run's variants
	var it *impl.Target
	if env.Start != nil {
		var err error
		if it, err = env.Start(ctx); err != nil {
			if ctx.Err() != nil {
				rep.Interrupted = true
				return rep, ctx.Err()
			}
			return nil, fmt.Errorf("fuzz: start impl: %w", err)
		}
		defer func() { _ = it.Stop() }()
	}
	prop := func(t *rapid.T) {
		endShrinking(ctx, shrinking)
		if ctx.Err() != nil {
			return // interrupted: no more runs
		}
		if cfg.expired() && foundAt.IsZero() {
			return
		}
		n++
		r := env.newRun(ctx, cfg, it)
		runStart, counted := time.Now(), !shrinking
		judged := false // passed or failed: not cut short by an interrupt
		defer func() {
			if judged && counted && len(r.done) > 0 {
				rep.Runs++
				rep.Steps += r.stepCount()
				if rep.RunSteps == nil {
					rep.RunSteps = map[int]int{}
				}
				rep.RunSteps[cfg.runNo(n)] = r.stepCount()
			}
		}()
		defer func() { recoverStop(recover()) }()
		r.fail = func(kind, summary string) {
			stopIfInterrupted(ctx)
			judged = true
			if foundAt.IsZero() {
				foundAt, foundRun = time.Now(), n
			}
			last = r.failure(kind, summary)
			if first == nil {
				first = last
			}
			shrinking = true
			t.Fatalf("%s: %s", kind, stable(summary, r.prefixer()))
		}
		r.run(t)
		stopIfInterrupted(ctx)
		judged = true
		if counted && len(r.done) > 0 {
			cfg.Coverage.record(r.lines())
			rep.Checks++
			rep.InternalSteps += r.internals
			if r.otherOrder > 0 {
				rep.OtherOrders++
			}
			through := ""
			if len(r.known) > 0 {
				rep.Known = append(rep.Known, r.known...)
				rep.Excused++
				through = ", only through known races: " + strings.Join(r.knownIDs, ", ")
			}
			progress(cfg, "run %d/%d: %d steps (%d internal, taken by %s) agree with the model%s (%s; %s in all)", cfg.runNo(n), cfg.Checks, r.stepCount(), r.internals, env.Target, through,
				time.Since(runStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		}
	}
	rep.Shard = cfg.Shard
	if cfg.Shard.Count > 0 {
		rep.CampaignRuns = cfg.Checks
	}
	cfg.onRun = func(k int) { rep.RunNumbers = append(rep.RunNumbers, k+1) }
	out, err := runRapid("cascade-fuzz-"+env.Target, cfg, prop)
	msg := out.message()
	rep.Elapsed = time.Since(start)
	if ctx.Err() != nil && last == nil {
		rep.Interrupted = true
		return rep, ctx.Err()
	}
	if msg == "" && last != nil && err == nil { // interrupted while shrinking
		msg = last.kind + ": " + firstLine(last.summary)
	}
	if err != nil || msg == "" {
		return rep, err
	}
	if last != nil && env.Surrogate != 0 && ctx.Err() == nil {
		if better := env.shrinkBySurrogate(ctx, cfg, it, first, last); better != nil {
			last = better
		}
		rep.Elapsed = time.Since(start)
	}
	err = finish(cfg, rep, last, foundAt, start, msg, out)
	rep.Failure.Run = cfg.runNo(foundRun)
	if seed, ok := cfg.failingRunSeed(foundRun, out); ok {
		rep.Failure.Seed = seed
	}
	rep.Failure.Attributed = last != nil && last.attributed
	rep.Interrupted = ctx.Err() != nil
	return rep, err
}

// lines are the run's steps as trace lines, its settles' included.
func (r *steppedRun) lines() []string {
	var out []string
	for _, w := range r.done {
		out = append(out, w.Commands...)
	}
	return out
}

// failure is the run's failure report, with the trace so far.
func (r *steppedRun) failure(kind, summary string) *runFailure {
	return &runFailure{kind: kind, summary: summary, trace: r.trace(kind, summary), steps: len(r.steps),
		script: slices.Clone(r.steps)}
}

// prefixer is the run's driver for stable, if it has one.
func (r *steppedRun) prefixer() interface{ Prefix() string } {
	if r.d == nil {
		return nil
	}
	return r.d
}

// begin makes the run's driver and its namespaces, and settles the shared
// impl.
func (r *steppedRun) begin() error {
	if r.env.Hold != nil {
		return r.beginUpstream()
	}
	if r.it == nil {
		return nil
	}
	var err error
	if r.d, err = driver.New(r.env.Admin, r.env.Limited, "cascade-"+driver.NewRunID()); err != nil {
		return err
	}
	// the universe's namespaces exist before the run, and impl's GC has
	// taken their events when it settles (the model has none for them)
	if err := r.d.EnsureNamespaces(r.ctx, r.cfg.Universe.Namespaces); err != nil {
		return err
	}
	if err := r.it.Settle(r.ctx); err != nil {
		return fmt.Errorf("settle impl before the run: %w", err)
	}
	return r.forgetCustomResources()
}

// forgetCustomResources brings the shared impl's GC to the monitors of
// the model's fresh one, which has none for a custom resource: an earlier
// run's cleanup deleted its CRDs, but the GC keeps their monitors until a
// discovery sync (`gc sync`) drops them. Kept, such a monitor's informer
// lists and watches again, after a backoff of up to 30 seconds, once a
// later run creates the CRD again; the model's `gc sync` starts a monitor
// that lists at once, impl's finds nothing to start, and the events the
// model queues arrive late or not at all (a stepped GC takes no sync by
// itself). The cleanup waited for the CRDs to go; discovery follows
// within moments, so this syncs until it has.
func (r *steppedRun) forgetCustomResources() error {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	for {
		custom := r.customMonitors()
		if len(custom) == 0 {
			return nil
		}
		if _, err := r.it.Step(ctx, "gc sync"); err != nil {
			return fmt.Errorf("discovery sync before the run: %w", err)
		}
		if len(r.customMonitors()) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("impl's GC still monitors %s, whose CRDs an earlier run deleted", strings.Join(custom, ", "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// customMonitors lists the custom resources of the trace language that
// impl's GC monitors.
func (r *steppedRun) customMonitors() []string {
	var out []string
	for _, gvr := range r.it.GC.Monitored() {
		for _, k := range model.Kinds {
			if k.Custom && gvr.Resource == k.Resource && strings.HasPrefix(k.APIVersion, gvr.Group+"/") {
				out = append(out, gvr.GroupResource().String())
			}
		}
	}
	return out
}

// end removes what the run created. The next run's begin settles impl,
// which takes the deletions' events, so that it starts from empty queues:
// one settle per run, each costing at least impl's quiet wait.
func (r *steppedRun) end() {
	if r.hold != nil {
		r.hold.Release() // the cleanup's deletions need the GC
	}
	if r.d == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), time.Minute)
	defer cancel()
	_ = r.d.Cleanup(ctx)
}

// run is one check: rapid's actions on the model and impl, then both
// settled and compared.
func (r *steppedRun) run(t *rapid.T) {
	if err := r.begin(); err != nil {
		stopIfInterrupted(r.ctx)
		t.Fatalf("error: %v", err)
	}
	defer r.end()
	g := &gen{u: r.cfg.Universe, state: func() *model.State { return r.s }, hot: func() []string { return hotKeys(r.m, r.s) },
		limited: r.it == nil || r.env.Limited != nil}
	r.repeat(t, r.actions(t, g))
	r.settle()
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
		{Key: traces.HeaderTargets, Value: r.env.traceTargets()},
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
	headers = append(headers, traces.ReleaseHeaders(r.env.Release)...)
	return traces.Format(desc, headers, r.done)
}

// traceTargets is a failing run's targets header: the model and the
// target the run failed on.
func (env SteppedEnv) traceTargets() string {
	if env.Hold != nil {
		return "model," + target.UpstreamStepped
	}
	return "model,impl"
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
