package fuzz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/model"
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
	// (lin.Options.GraphChanges) instead of on the race window alone, and
	// a failing run writes them to GraphChangesFile beside its history.
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
	// shrunk is the failure being shrunk: the run's, then the last
	// candidate that failed the same way
	var shrunk *runFailure
	var foundAt time.Time
	n, foundRun := 0, 0
	shrinking := false // rapid is rerunning a failed run's variants
	broken := false    // a restart failed twice: the control plane may be down
	prop := func(t *rapid.T) {
		endShrinking(ctx, shrinking)
		if ctx.Err() != nil {
			return // interrupted: no more runs
		}
		if broken {
			return // no run, and no shrinking, on a control plane that did not come back
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
			evidence := ""
			switch {
			case env.Evidence != nil:
				write, evidence = withEvidence(write, r.takeEvidence()), EvidenceFile
			case env.GraphChanges != nil:
				write, evidence = withGraphChanges(write, r.takeGraphChanges()), GraphChangesFile
			}
			if foundAt.IsZero() {
				foundAt, foundRun = time.Now(), n
			}
			last = &runFailure{kind: kind, summary: summary, trace: r.trace(kind, summary), steps: len(r.sent), write: write, evidence: evidence}
			if r.restartFailed {
				// Every later run, and every candidate rapid would
				// shrink this one to, would run on a control plane that
				// did not come back, and fail on that: the session ends
				// here, reporting this run unshrunk, or what was found
				// before it (a failure held, or the smallest candidate
				// rapid accepted while shrinking one), a finding about
				// the target.
				broken = true
				which := fmt.Sprintf("run %d/%d", cfg.runNo(n), cfg.Checks)
				if shrinking {
					last = shrunk
					which = fmt.Sprintf("shrinking run %d/%d", cfg.runNo(foundRun), cfg.Checks)
				} else if held == nil {
					held = last
				}
				progress(cfg, "%s: a run failed (%s: %s): the control plane did not come back, so no more runs and no shrinking", which, kind, clip(firstLine(summary), 400))
				panic(errHeld)
			}
			if !shrinking || kind == shrunk.kind {
				// rapid accepts a candidate that fails as the run it
				// shrinks did (t.Fatalf below, the kind its message)
				shrunk = last
			}
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
			rep.Refused += r.refused
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
				extra = fmt.Sprintf("; %s, %d ops maybe applied, %d writes refused", restartSummary(r.restarts), r.maybe, r.refused)
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
	cfg.onRun = func(k int) {
		if !broken { // the runs after a restart that failed twice do not run
			rep.RunNumbers = append(rep.RunNumbers, k+1)
		}
	}
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
	if seed, ok := cfg.failingRunSeed(foundRun, out); ok {
		rep.Failure.Seed = seed
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
