package fuzz

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/lin"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// ConcurrentEnv is what a concurrent run needs from its target.
type ConcurrentEnv struct {
	Target string
	Admin  *rest.Config
	// Release is the Kubernetes release of the target's control plane
	// (the zero value: model.DefaultRelease): the history is judged on it
	// (lin.Options.Release), and a failure's trace expects what the model
	// does on it.
	Release model.Release
	// Settler waits until the target has gone quiet after a run
	// (replay.DefaultQuiet: no change for a window).
	Settler replay.Target
	// Audit returns the audit records written since its last call
	// (envtest targets). nil makes runs record their own requests
	// client-side and observe everyone else's writes by watch.
	Audit func(ctx context.Context) ([]controlplane.AuditRecord, error)
	// Inject names impl's injected bugs, for reports.
	Inject []string
	// LinTimeout bounds porcupine per run.
	LinTimeout time.Duration
	// Protection: the target runs the deletion-protection webhook, so
	// the history must show it denying (lin.Options.Protection).
	Protection bool
	// Surrogate are the model's switches of the injected bugs, and
	// Confirm replays a trace on the target and returns how the target
	// diverged from it ("" if it did not). With both set, a failing run
	// is first searched for a settled reproducer (settled.go): when the
	// target confirms one, it is the run's report and rapid's shrinking
	// of the concurrent run is skipped.
	Surrogate model.BugSet
	Confirm   func(ctx context.Context, trace string) (string, error)
	// ConfirmStepped replays a stepped trace, a race reproducer
	// (race.go), on a stepped impl with the trace's bugs and returns how
	// it diverged ("" when it follows the model). With it set, a failing
	// run without a settled reproducer is searched for a race.
	ConfirmStepped func(ctx context.Context, trace string) (string, error)
	// GraphChanges returns the events the target's GC applied to its
	// graph since its last call (an in-process GC: impl's,
	// target.Target.TakeGraphChanges); nil when the GC's graph is out of
	// sight. lin then judges the GC's graph races on what the graph held
	// (lin.Options.GraphChanges) instead of on the race window alone.
	GraphChanges func() []history.GraphChange
	// Relist says the target's informers may skip events as relists do
	// (impl's informer-relist fault): runs then also draw short-lived
	// owners (gen.fleeting), and the race search lets the model's
	// informers coalesce events too (model.OpCoalesce).
	Relist bool
	// Limited is the configuration of a principal without update on
	// */finalizers: runs then send some steps as=limited. nil: none.
	Limited *rest.Config
	// Lag says the target's GC sees events late (impl's informer-lag
	// fault): runs then also draw namespaced dependents of cluster-scoped
	// owners (gen.scoped).
	Lag bool
	// Restarts are restarted once in every run, each at a random time
	// (restart.go).
	Restarts []Restart
	// GCTap, when set, records into each run's history the writes of the
	// target's GC that got no answer (target.Target.GCTap).
	GCTap *history.Tap
	// Evidence, when set, returns what the API proxy between
	// kube-controller-manager and kube-apiserver recorded since its last
	// call (proxy.Proxy.Take, upstream): a failing run writes it to
	// EvidenceFile beside its history.
	Evidence func() proxy.Evidence
}

// sent is one client step of a concurrent run as it was executed: sent
// at at, answered at done.
type sent struct {
	client   int
	line     string
	step     model.Step
	at, done time.Time
	res      model.Result
	err      error
}

// landed lists the steps that were sent (err == nil) in the order they
// were answered, the closer guess at the order they took effect in: a
// step's write lands at its last request, and the driver sends a step
// again when a resourceVersion conflict refuses it, so a step sent first
// may land after one another client sent later (found by fuzzing impl: a
// finalizer removal retried past another client's add, which replayed in
// the order sent left the owner stuck and hid a race).
func landed(ss []sent) []string {
	ss = slices.Clone(ss)
	slices.SortStableFunc(ss, func(a, b sent) int { return a.done.Compare(b.done) })
	var lines []string
	for _, x := range ss {
		if x.err == nil {
			lines = append(lines, x.line)
		}
	}
	return lines
}

// concurrentRun is one rapid check of a concurrent run.
type concurrentRun struct {
	ctx     context.Context
	env     ConcurrentEnv
	cfg     Config
	program [][]string // per client, its steps in order
	sent    []sent
	fail    func(kind, summary string, write func(string) (string, error))
	ops     int
	known   []string
	// maybe counts the history's ops whose outcome is unknown; restarts
	// are the run's restarts (restart.go)
	maybe     int
	restartAt []time.Duration
	restarts  []restartDone
	// undecided is the checker's summary when it could not decide the
	// run's history in time ("" when it did).
	undecided string
	checked   time.Duration // how long the check of the history took
	// proxied summarizes the proxy's evidence of a passed run ("" without
	// a proxy)
	proxied string
	// evidence is the proxy's record of the run, once taken (takeEvidence)
	evidence *proxy.Evidence
	// excused names the known races the run passed through, each with
	// what admitted it (lin.Known.Basis)
	excused []string
	// delivered: the history was checked with the proxy's delivery record
	delivered bool
	// graph holds the graph changes the run's GC applied so far
	// (takeGraphChanges; impl only)
	graph []history.GraphChange
	// knownLive names the registry entries that excused a liveness
	// violation of the quiet state
	knownLive []string
}

// takeEvidence takes the proxy's record of the run from the proxy the
// first time, and returns the same record after that.
func (r *concurrentRun) takeEvidence() proxy.Evidence {
	if r.evidence == nil {
		ev := r.env.Evidence()
		r.evidence = &ev
	}
	return *r.evidence
}

// apiServerBreaks are the times the run's kube-apiserver restarts began,
// each of which broke every watch.
func (r *concurrentRun) apiServerBreaks() []time.Time {
	var out []time.Time
	for _, x := range r.restarts {
		if x.name == apiServerRestartName && !x.began.IsZero() {
			out = append(out, x.began)
		}
	}
	return out
}

// takeGraphChanges adds the graph changes the GC applied since the last
// call to the run's and returns them all; nil on targets whose GC's graph
// is out of sight.
func (r *concurrentRun) takeGraphChanges() []history.GraphChange {
	if r.env.GraphChanges != nil {
		r.graph = append(r.graph, r.env.GraphChanges()...)
	}
	return r.graph
}

// RunConcurrent runs cfg.Checks concurrent runs against env.
func RunConcurrent(ctx context.Context, env ConcurrentEnv, cfg Config) (*Report, error) {
	rapidMu.Lock()
	defer rapidMu.Unlock()
	if cfg.Clients <= 0 {
		cfg.Clients = 1
	}
	if env.Audit != nil {
		if _, err := env.Audit(ctx); err != nil { // skip what came before
			return nil, fmt.Errorf("fuzz: audit log: %w", err)
		}
	}
	cfg = withSeed(cfg)
	rep := &Report{Target: env.Target, Inject: env.Inject, Mode: "concurrent", Seed: cfg.Seed}
	start := time.Now()
	// With injected bugs and a surrogate (env.Surrogate, env.Confirm), a
	// failing run whose client steps hold no settled reproducer is kept
	// (held) and fuzzing goes on, while checks and time remain, for a
	// failing run that has one: a trace `cascade replay` reproduces is
	// worth more than the shrunk concurrent run. The first failure found
	// is reported if none does.
	var last, repro, held *runFailure
	var foundAt time.Time
	n, foundRun := 0, 0
	shrinking := false // rapid is rerunning a failed run's variants
	prop := func(t *rapid.T) {
		endShrinking(ctx, shrinking)
		if ctx.Err() != nil {
			return // interrupted: no more runs
		}
		if (cfg.expired() && foundAt.IsZero()) || repro != nil {
			return // out of time, or reproduced: nothing for rapid to shrink
		}
		if held != nil && (cfg.expired() || n >= cfg.Checks) {
			return
		}
		n++
		r := &concurrentRun{ctx: ctx, env: env, cfg: cfg, program: make([][]string, cfg.Clients)}
		runStart := time.Now()
		first := !shrinking
		judged := false // passed or failed: not cut short by an interrupt
		defer func() {
			if judged && first && len(r.sent) > 0 {
				rep.Runs++
				rep.Steps += len(r.sent)
				if rep.RunSteps == nil {
					rep.RunSteps = map[int]int{}
				}
				rep.RunSteps[cfg.runNo(n)] = len(r.sent)
			}
		}()
		defer func() { recoverStop(recover(), errHeld) }()
		r.fail = func(kind, summary string, write func(string) (string, error)) {
			stopIfInterrupted(ctx)
			judged = true
			if env.Evidence != nil {
				write = withEvidence(write, r.takeEvidence())
			}
			if foundAt.IsZero() {
				foundAt, foundRun = time.Now(), n
			}
			last = &runFailure{kind: kind, summary: summary, trace: r.trace(kind, summary), steps: len(r.sent), write: write, evidence: env.Evidence != nil}
			if repro == nil {
				repro = r.reproduce(kind, summary)
			}
			if repro == nil && env.Surrogate != 0 && env.Confirm != nil && n < cfg.Checks && !cfg.expired() {
				if held == nil {
					held = last
				}
				progress(cfg, "run %d/%d failed (%s: %s) without a settled reproducer; fuzzing on for one", cfg.runNo(n), cfg.Checks, kind, clip(firstLine(summary), 400))
				panic(errHeld) // a pass for rapid: no shrinking of this run
			}
			// the failure's kind only: its details name real objects and
			// times, and rapid shrinks only towards the same message
			shrinking = true
			t.Fatalf("%s", kind)
		}
		r.run(t)
		stopIfInterrupted(ctx)
		judged = true
		rep.Ops += r.ops
		rep.Known = append(rep.Known, r.known...)
		took := fmt.Sprintf("%s; %s in all", time.Since(runStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		switch {
		case !first:
		case len(r.sent) == 0:
			progress(cfg, "run %d/%d: drawn empty, not counted (%s)", cfg.runNo(n), cfg.Checks, took)
		case r.undecided != "":
			rep.Undecided = append(rep.Undecided, fmt.Sprintf("run %d (%d steps, %d ops): %s", cfg.runNo(n), len(r.sent), r.ops, r.undecided))
			progress(cfg, "run %d/%d: %d steps by %d clients, %d ops INCONCLUSIVE (the checker could not decide them in %s), quiet state live (%s)", cfg.runNo(n), cfg.Checks, len(r.sent), cfg.Clients, r.ops, r.checked.Round(time.Microsecond), took)
		default:
			cfg.Coverage.record(slices.Concat(r.program...))
			rep.Checks++
			rep.MaybeApplied += r.maybe
			if len(r.excused) > 0 {
				rep.Excused++
			}
			if r.delivered {
				rep.Delivered++
			}
			for _, x := range r.restarts {
				rep.Restarts++
				rep.RestartTime += x.took
			}
			extra := ""
			if len(r.restarts) > 0 {
				extra = fmt.Sprintf("; %s, %d ops maybe applied", restartSummary(r.restarts), r.maybe)
			}
			if len(r.excused) > 0 {
				extra += "; only through known races: " + strings.Join(r.excused, ", ")
			}
			if r.proxied != "" {
				extra += "; proxy: " + r.proxied
			}
			for _, k := range r.knownLive {
				extra += "; quiet state excused by known race " + k
			}
			progress(cfg, "run %d/%d: %d steps by %d clients, %d ops linearizable (checked in %s), quiet state live (%s)%s", cfg.runNo(n), cfg.Checks, len(r.sent), cfg.Clients, r.ops, r.checked.Round(time.Microsecond), took, extra)
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
	if err != nil {
		return rep, err
	}
	if ctx.Err() != nil && held == nil && last == nil {
		rep.Interrupted = true
		return rep, ctx.Err()
	}
	switch {
	case msg == "" && held == nil && last != nil: // interrupted while shrinking
		msg = last.kind + ": " + firstLine(last.summary)
	case msg == "" && held == nil:
		return rep, nil
	case msg == "": // only held failures: the first, unshrunk
		last, msg = held, held.kind+": "+firstLine(held.summary)
	case repro != nil:
		repro.write, repro.evidence = last.write, last.evidence // the concurrent run's history, for the record
		last = repro
	}
	err = finish(cfg, rep, last, foundAt, start, msg, out)
	rep.Failure.Run = cfg.runNo(foundRun)
	if cfg.Shard.Count > 0 && foundRun > 0 {
		// the run's own seed, also when rapid reported no failure (held,
		// or interrupted while shrinking)
		rep.Failure.Seed = RunSeed(cfg.Seed, cfg.runNo(foundRun)-1)
	}
	rep.Failure.Attributed = last != nil && last.attributed
	rep.Failure.ReplayHistory = last != nil && last.replayHistory
	if last != nil {
		rep.Failure.ReplayTarget = last.replayTarget
	}
	rep.Interrupted = ctx.Err() != nil
	return rep, err
}

// clip shortens s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// errHeld ends a failing run that was held (RunConcurrent) as if it had
// passed.
var errHeld = errors.New("fuzz: failure held")

// run draws a program, runs it with one goroutine per client, waits for
// quiet, and checks the history and the final state.
func (r *concurrentRun) run(t *rapid.T) {
	r.draw(t)
	r.exec(t)
}

// draw draws the run's program: every rapid draw of a concurrent run
// happens here, before anything reaches the cluster, so DrawConcurrent
// draws the same programs without one.
func (r *concurrentRun) draw(t *rapid.T) {
	g := &gen{u: r.cfg.Universe, limited: r.env.Limited != nil}
	actions := map[string]func(*rapid.T){}
	for verb, draw := range g.verbs() {
		if verb == "crd" {
			continue // crdFamily below, in few runs
		}
		actions[verb] = func(t *rapid.T) {
			c := rapid.IntRange(0, r.cfg.Clients-1).Draw(t, "client")
			r.program[c] = append(r.program[c], draw(t))
		}
	}
	compound := func(draw func(*rapid.T) []string) func(*rapid.T) {
		return func(t *rapid.T) {
			c := rapid.IntRange(0, r.cfg.Clients-1).Draw(t, "client")
			r.program[c] = append(r.program[c], draw(t)...)
		}
	}
	// a workload and an object its controller would adopt, in one
	// namespace, sent by one client: what the adoption races start from
	// (stepstate.go family), which random creates draw together rarely
	actions["family"] = compound(func(t *rapid.T) []string { return g.family(t, SteppedAdopterKinds) })
	// two objects owning each other, perhaps deleted in the foreground:
	// random creates and add-owners close such a circle rarely (no-cycle-
	// unblock was not found in 127 runs on impl without it)
	actions["ring"] = compound(g.ring)
	if r.env.Relist {
		actions["fleeting"] = compound(g.fleeting)
	}
	if r.env.Lag {
		actions["scoped"] = compound(g.scoped)
	}
	// a CRD and custom resources in one run of eight: on upstream the
	// run then waits out the GC's 30-second discovery sync to settle
	if len(g.u.customKinds()) > 0 && rapid.IntRange(0, 7).Draw(t, "crds") == 0 {
		actions["crd"] = compound(g.crdFamily)
	}
	t.Repeat(actions)
	r.restartAt = drawRestarts(t, r.env.Restarts)
}

// exec runs the drawn program on the cluster and checks its history and
// final state.
func (r *concurrentRun) exec(t *rapid.T) {
	prefix := "cascade-" + driver.NewRunID()
	scope := history.Scope{Prefix: prefix}
	// The driver's writes are recorded client side on every target: the
	// history of a target without an audit log, and on one with it, the
	// writes that got no answer and have no audit record (maybe applied).
	rec := history.NewRecorder(scope)
	admin := rec.Wrap(r.env.Admin, history.ClientActor(0))
	if r.env.GCTap != nil {
		defer r.env.GCTap.Attach(rec)()
	}
	var obs *history.Observer
	if r.env.Audit == nil {
		var err error
		if obs, err = history.NewObserver(r.env.Admin, scope); err != nil {
			r.fatal(t, err)
		}
		if err := obs.Start(r.ctx); err != nil {
			r.fatal(t, err)
		}
		defer func() { _ = obs.Stop() }()
	}
	var limitedCfg *rest.Config
	if r.env.Limited != nil {
		limitedCfg = r.env.Limited
		if rec != nil {
			limitedCfg = rec.Wrap(r.env.Limited, history.ClientActor(0))
		}
	}
	d, err := driver.New(admin, limitedCfg, prefix)
	if err != nil {
		r.fatal(t, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), time.Minute)
		defer cancel()
		_ = d.Cleanup(ctx)
	}()
	if r.env.GraphChanges != nil {
		r.env.GraphChanges() // the earlier runs' and their cleanups'
	}
	if r.env.Evidence != nil {
		r.env.Evidence() // likewise
	}
	if r.env.Audit != nil {
		// the earlier run's cleanup: its deletes of CRDs, whose names no
		// run prefix scopes, would otherwise fall into this history
		if _, err := r.env.Audit(r.ctx); err != nil {
			t.Fatalf("error: %v", err)
		}
	}
	r.execute(d)
	dyn, err := dynamic.NewForConfig(r.env.Admin)
	if err != nil {
		r.fail("error", err.Error(), nil)
	}
	r.settle(d, dyn, prefix)

	var ops []history.Op
	opts := lin.Options{Timeout: r.env.LinTimeout, Protection: r.env.Protection, Release: r.env.Release}
	opts.GraphChanges = r.takeGraphChanges()
	stale := staleFromGraph(opts.GraphChanges)
	if r.env.Evidence != nil {
		// the GC's informers' deliveries: what the GC could have seen
		ev := r.takeEvidence()
		opts.Deliveries = ev.GCDeliveries()
		// the GC's own requests, on the deliveries' clock: when it decided
		opts.GCRequests = ev.GCRequests()
		r.delivered = len(opts.Deliveries) > 0
	}
	if r.env.Audit != nil {
		recs, err := r.env.Audit(r.ctx)
		if err != nil {
			r.fail("error", fmt.Sprintf("audit log: %v", err), nil)
		}
		stale = stale.union(staleFromAudit(recs, r.apiServerBreaks()))
		if ops, err = history.FromAudit(recs, scope); err != nil {
			r.fail("error", fmt.Sprintf("history: %v", err), nil)
		}
		// the audit log records every controller GET: their rechecks
		if opts.Reads, err = history.ReadsFromAudit(recs, scope); err != nil {
			r.fail("error", fmt.Sprintf("history: %v", err), nil)
		}
		opts.ReadsRecorded = true
		// writes whose answer was lost, and which the server never
		// recorded: maybe applied (a restart's)
		if lost := rec.Unanswered(recs); len(lost) > 0 {
			ops = history.Merge(ops, lost)
		}
	} else {
		if err := obs.Stop(); err != nil {
			r.fail("error", fmt.Sprintf("watch: %v", err), nil)
		}
		if err := rec.Err(); err != nil {
			r.fail("error", fmt.Sprintf("recording: %v", err), nil)
		}
		mine := rec.Ops()
		ops = history.Merge(mine, obs.Ops(mine))
	}
	history.AssignLanes(ops)
	r.ops = len(ops)
	for i := range ops {
		if ops[i].Ambiguous() {
			r.maybe++
		}
	}
	began := time.Now()
	res := interruptible(r.ctx, func() lin.Result { return lin.Check(ops, opts) })
	r.checked = time.Since(began)
	for _, k := range res.Known {
		r.known = append(r.known, k.Issue+" (on "+k.Basis+"): "+k.Message)
		r.excused = append(r.excused, k.Issue+" on "+k.Basis)
	}
	r.judge(res)

	objs, err := listRun(r.ctx, dyn, prefix)
	if err != nil {
		r.fail("error", err.Error(), nil)
	}
	v, known := checkLiveness(objs, stale)
	for _, k := range known {
		r.known = append(r.known, k.Known+": "+k.Message)
		r.knownLive = append(r.knownLive, k.Known)
	}
	if v != nil {
		r.fail("liveness", fmt.Sprintf("once quiet: %s", v), nil)
	}
	if r.env.Evidence != nil {
		r.proxied = r.takeEvidence().Summary()
	}
}

// settle waits until the cluster is quiet. After a restart, or after
// creating a CRD, it settles again and again, a second apart, until the
// run's state is live or the bound has passed (liveUntil: the restarts'
// Rewatch, APIServerRewatch for kube-apiserver; CRDRewatch): a quiet
// window cannot tell a GC that is done from one whose informers or work
// items are still backing off, and a fixed wait long enough for the worst
// back-off would cost every run it. Any other run settles once.
func (r *concurrentRun) settle(d *driver.Driver, dyn dynamic.Interface, prefix string) {
	until := liveUntil(r.restarts, d.LastCRD())
	for {
		if err := r.env.Settler.Settle(r.ctx, d); err != nil {
			r.fail("liveness", fmt.Sprintf("the cluster did not go quiet: %v", err), nil)
		}
		if !time.Now().Before(until) {
			return
		}
		objs, err := listRun(r.ctx, dyn, prefix)
		if err != nil {
			r.fail("error", err.Error(), nil)
		}
		if v, _ := checkLiveness(objs, staleFromGraph(r.takeGraphChanges())); v == nil {
			return
		}
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// fatal ends a run that could not be set up: an error, or no verdict at
// all when fuzzing was interrupted.
func (r *concurrentRun) fatal(t *rapid.T, err error) {
	stopIfInterrupted(r.ctx)
	t.Fatalf("error: %v", err)
}

// judge takes the checker's verdict on the run's history: an illegal
// history fails the run; one the checker could not decide in time is no
// verdict on the target, so no failure for rapid to shrink, and the run
// is reported inconclusive.
func (r *concurrentRun) judge(res lin.Result) {
	switch res.Verdict {
	case porcupine.Ok:
	case porcupine.Unknown:
		r.undecided = res.Summary
	default:
		r.fail("linearizability", res.Summary, func(dir string) (string, error) {
			path := filepath.Join(dir, "history.html")
			return path, res.Visualize(path)
		})
	}
}

// execute runs every client's steps in order, the clients at once, and
// the run's restarts at their times; it returns once all are done.
func (r *concurrentRun) execute(d *driver.Driver) {
	waitRestarts := startRestarts(r.ctx, r.env.Restarts, r.restartAt)
	defer func() {
		r.restarts = waitRestarts()
		for _, x := range r.restarts {
			if x.err != nil && r.ctx.Err() == nil {
				r.fail("error", fmt.Sprintf("restart %s: %v", x.name, x.err), nil)
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c, steps := range r.program {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := driver.WithClient(r.ctx, c)
			for _, line := range steps {
				st, err := model.ParseStep(line)
				if err != nil {
					continue // cannot happen: the generator writes trace syntax
				}
				s := sent{client: c, line: line, step: st, at: time.Now()}
				s.res, s.err = doRetrying(ctx, d, st)
				s.done = time.Now()
				mu.Lock()
				r.sent = append(r.sent, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortStableFunc(r.sent, func(a, b sent) int { return a.at.Compare(b.at) })
}

// trace writes the run as a trace: its steps in the order they were sent
// (steps that could not be sent — an owner never created — left out),
// then settle, expecting what the model does when it takes them one at a
// time. Concurrent runs are not replayed exactly by a sequential trace;
// the description says which clients sent what, and the history's
// visualization shows the real interleaving.
func (r *concurrentRun) trace(kind, summary string) string {
	m := &model.Model{Release: r.env.Release}
	s := model.NewState()
	var cmds []string
	var out []string
	for _, x := range r.sent {
		if x.err != nil {
			continue
		}
		n, res, err := m.Apply(s, x.step)
		if err != nil {
			continue
		}
		s = n
		cmds = append(cmds, x.line)
		if !res.OK() {
			out = append(out, "! "+x.line+" -> "+res.String())
		}
	}
	if n, _, err := m.Settle(s); err == nil {
		s = n
	}
	cmds = append(cmds, "settle")
	out = append(out, s.Dump()...)
	desc := []string{
		fmt.Sprintf("A concurrent run of `cascade fuzz --target %s` (%d clients) that failed (%s):", r.env.Target, r.cfg.Clients, kind),
		firstLine(summary),
		"The steps are in the order the clients sent them; the expected output is the model's, taking them one at a time.",
	}
	for c, steps := range r.program {
		desc = append(desc, fmt.Sprintf("client %d sent: %s", c, strings.Join(steps, "; ")))
	}
	if len(r.env.Inject) > 0 {
		desc = append(desc, "impl ran with injected bug(s) "+strings.Join(r.env.Inject, ","))
	}
	headers := []traces.Header{{Key: traces.HeaderFoundBy, Value: "cascade fuzz --target " + r.env.Target}}
	if rel := r.env.Release.Or(); rel != model.DefaultRelease {
		headers = append(headers, traces.Header{Key: traces.HeaderReleases, Value: rel.MinorRange()})
	}
	return traces.Format(desc, headers, []traces.Written{{Commands: cmds, Output: out}})
}
