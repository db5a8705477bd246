// Package fuzz is cascade's randomized conformance: rapid generates runs
// of trace commands, a real target executes them, and every run is judged
// against the model. A failing run is shrunk by rapid and written out as
// a trace file that `cascade replay` runs again, with rapid's fail file
// and, for concurrent runs, porcupine's visualization of the history.
//
// Two ways of running, by target:
//
//   - Stepped (impl-stepped): a rapid state machine whose actions are the
//     trace commands — client verbs and the GC's and adopter's internal
//     steps — drives the model and a Stepped impl in lockstep. After every
//     action the real state dump must equal the model's, every result
//     code must agree, and the model's safety properties must hold; when
//     the run ends both are settled and the quiescent properties checked.
//     Interleavings are the fuzzer's to choose, so a failure replays
//     exactly and shrinks well.
//   - Concurrent (upstream, impl, kubeconfig): rapid draws a program of
//     client steps for several driver clients, which run at the same time
//     against a GC that runs by itself. The recorded history (the audit
//     log, or client-side recording plus a watch) must be linearizable
//     against the API server's semantics with every GC and controller
//     write permitted at its linearization point (harness/lin), and once
//     the cluster is quiet its state must satisfy the model's quiescent
//     properties (liveness).
package fuzz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

// Config configures Run.
type Config struct {
	// Checks is the number of random runs (rapid's checks).
	Checks int
	// Steps is the average number of actions per run.
	Steps int
	// Seed makes the runs reproducible; 0 picks one at random.
	Seed uint64
	// Clients is the number of concurrent driver clients of a concurrent
	// run (ignored when stepped).
	Clients int
	// ShrinkTime bounds rapid's minimization of a failing run.
	ShrinkTime time.Duration
	// Universe is what client steps range over.
	Universe Universe
	// Out is the directory failure artifacts go to ("" = none written).
	Out string
	// Progress receives one line per run.
	Progress io.Writer
	// FailFile replays a rapid fail file instead of generating runs.
	FailFile string
	// Deadline, if set, ends fuzzing: runs that would start after it
	// pass at once without taking a step.
	Deadline time.Time
	// Coverage, if set, counts the steps of every run that passed (a
	// failing run and rapid's shrinking of it are not counted).
	Coverage *Coverage
	// Shard, when it has a Count, runs only its slice of the Checks runs,
	// each from its own seed (RunSeed); see Shard.
	Shard Shard
	// onRun is told the campaign run (from 0) a shard starts.
	onRun func(k int)
}

// expired reports whether cfg's deadline has passed.
func (cfg Config) expired() bool { return !cfg.Deadline.IsZero() && time.Now().After(cfg.Deadline) }

// Failure describes a failing run after shrinking.
type Failure struct {
	// Kind is divergence, property, linearizability, liveness or error.
	Kind string
	// Summary is one paragraph naming the property, the divergence or
	// the illegal operation.
	Summary string
	// Steps is the shrunk run's step count: its client and internal
	// steps, without those of its final settle (the model checker's
	// counterexample lengths do not count a final settle either).
	Steps int
	// Trace, History and FailFile are the artifacts written ("" if none);
	// Evidence is the evidence file of the failing run: the proxy's
	// record (upstream behind the proxy, EvidenceFile) or the GC's graph
	// changes (impl, GraphChangesFile).
	Trace, History, FailFile, Evidence string
	// FoundAfter is the time from the start of Run to the first failing
	// run (before shrinking).
	FoundAfter time.Duration
	// Run is the number of the first failing run, from 1.
	Run int
	// Attributed: the failure was shrunk against the model with the
	// injected bugs, which reproduces it while the model alone does not,
	// and impl confirmed the shrunk run. It is the injected bugs'.
	Attributed bool
	// Seed reproduces the failure with the same configuration.
	Seed uint64
	// ReplayHistory: the trace is a settled reproducer, confirmed by
	// replaying it with its history checked (`cascade replay --history`).
	ReplayHistory bool
	// ReplayTarget is where the trace replays when not on the run's
	// target: impl-stepped for a race reproducer, whose `# bug:` header
	// switches the bugs on.
	ReplayTarget string
}

// Report is the outcome of Run.
type Report struct {
	Target string
	Inject []string // impl's injected bugs
	Mode   string   // stepped or concurrent
	// Seed is rapid's seed: the runs again with the same configuration
	// (a Config.Seed of 0 is replaced by a random one, reported here).
	Seed uint64
	// Runs are the runs that took at least one step, up to and including
	// the first failing one (shrinking's reruns are not counted).
	Runs int
	// Checks are the runs that took at least one step and passed: a run
	// drawn empty, or skipped after the deadline or an interrupt, is not
	// a passed run.
	Checks int
	// Steps are the actions Runs took.
	Steps int
	// InternalSteps are the internal steps (GC and controller) the
	// target itself took in the passed stepped runs, a settle's included
	// on targets that follow the model's settle path.
	InternalSteps int
	// OtherOrders counts the passed stepped runs whose target, settling
	// by itself, ended where another interleaving of the model's
	// internal steps than its canonical settle ends (model.SettlesTo).
	OtherOrders int
	Ops         int // history operations checked (concurrent)
	// Known lists the known races the passed runs went through, one
	// line each, "ID (on BASIS): message" (lin.Known.Basis).
	Known []string
	// Excused counts the passed runs that passed only through a known
	// race; Delivered the passed runs whose history was checked with the
	// API proxy's delivery record (lin.Options.Deliveries; upstream
	// behind the proxy).
	Excused, Delivered int
	Elapsed            time.Duration
	Failure            *Failure
	// Restarts counts the restarts runs did (--restart-apiserver,
	// --restart-gc) and RestartTime their total time, each from its
	// start until the component served again; MaybeApplied counts the
	// history operations checked whose outcome was unknown (no answer,
	// or a server error), which the checker took as maybe applied, and
	// Refused the writes whose connection was refused (the server was
	// down): never sent, so in no history (history.Recorder.Refused).
	Restarts     int
	RestartTime  time.Duration
	MaybeApplied int
	Refused      int
	// Interrupted: the context was cancelled. The run it cancelled has no
	// verdict and is neither passed nor failed; nothing was shrunk or
	// written.
	Interrupted bool

	// Undecided names the runs whose history the checker could not
	// decide in time (lin's Unknown verdict), one line each: neither
	// passed nor failed, they say nothing of the target.
	Undecided []string

	// Shard is the slice of the campaign run (Config.Shard) and
	// RunNumbers the campaign numbers (from 1) of the runs it started,
	// in order; empty when not sharded.
	Shard      Shard
	RunNumbers []int
	// CampaignRuns is the campaign's size (Config.Checks) when sharded.
	CampaignRuns int
	// RunSteps are the steps of each run counted in Runs, by campaign
	// run number (from 1): the same runs draw the same steps, sharded or
	// not (a concurrent run's sent steps, as drawn).
	RunSteps map[int]int
}

// OK reports whether no run failed.
func (r *Report) OK() bool { return r.Failure == nil }

// errInterrupted ends a run whose context was cancelled: it has no
// verdict. The run's property function recovers it, so rapid sees a pass
// and neither shrinks nor writes a fail file.
var errInterrupted = errors.New("fuzz: interrupted")

// stopIfInterrupted ends the run with errInterrupted when ctx is
// cancelled: what failed then is the cancellation, not the target.
func stopIfInterrupted(ctx context.Context) {
	if ctx.Err() != nil {
		panic(errInterrupted)
	}
}

// interruptible returns f's result, unless ctx is cancelled first: then
// the run ends with errInterrupted and f finishes in the background with
// nobody waiting for it. It is for the work that takes no context and may
// take a minute: porcupine, and the model searches for reproducers.
func interruptible[T any](ctx context.Context, f func() T) T {
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-ctx.Done():
		panic(errInterrupted)
	}
}

// endShrinking ends rapid's shrinking of a failure when fuzzing is
// interrupted: rapid takes no context and would try candidates, each
// passing at once, until its shrink time is spent. runtime.Goexit unwinds
// rapid.Check (rapid recovers panics, not Goexit) before it reports, and
// the failure is reported as found, unshrunk.
func endShrinking(ctx context.Context, shrinking bool) {
	if shrinking && ctx.Err() != nil {
		runtime.Goexit()
	}
}

// recoverStop recovers the panics that end a run early without failing it
// (errInterrupted, and extra) and re-raises any other. It must be called
// directly by a deferred function.
func recoverStop(x any, extra ...error) {
	if x == nil || x == errInterrupted {
		return
	}
	for _, e := range extra {
		if x == e {
			return
		}
	}
	panic(x)
}

// withSeed returns cfg with a random seed when it has none, so that the
// report can name the seed that reproduces the runs, and with one check
// for a fail file's replay. Drawn seeds stay
// below 2^53, which every JSON reader holds exactly.
func withSeed(cfg Config) Config {
	if cfg.Seed == 0 {
		cfg.Seed = 1 + rand.Uint64N(1<<53-1)
	}
	if cfg.FailFile != "" {
		// the fail file's one run is the campaign (runRapid): counted,
		// printed and held as run 1 of 1
		cfg.Checks = 1
	}
	return cfg
}

// runFailure is what a failing run reports through rapid: the failure
// and the artifacts that explain it, kept for the last (shrunk) failing
// run.
type runFailure struct {
	kind, summary string
	trace         string // trace file text
	steps         int
	script        []string                         // a stepped run's steps, for shrinking
	attributed    bool                             // shrunk by surrogate: the injected bugs' failure
	replayHistory bool                             // confirmed by a replay with its history checked
	replayTarget  string                           // where the trace replays, when not the run's target
	write         func(dir string) (string, error) // extra artifact (history HTML)
	evidence      string                           // the evidence file write also writes (EvidenceFile, GraphChangesFile), "" for none
}

// finish turns the last failing run into a Failure with artifacts; msg
// is the summary when no run recorded the failure.
func finish(cfg Config, rep *Report, last *runFailure, foundAt time.Time, start time.Time, msg string, out rapidOutcome) error {
	f := &Failure{Kind: "error", Summary: msg, Seed: cfg.Seed}
	if !foundAt.IsZero() {
		f.FoundAfter = foundAt.Sub(start)
	}
	if out.seed != 0 {
		f.Seed = out.seed
	}
	if last != nil {
		f.Kind, f.Summary, f.Steps = last.kind, last.summary, last.steps
	}
	rep.Failure = f
	if cfg.Out == "" {
		return nil
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return fmt.Errorf("fuzz: %w", err)
	}
	var errs []error
	var err error
	if f.FailFile, err = moveFailFile(out.failFile, cfg.Out, out.fresh); err != nil {
		errs = append(errs, err)
	}
	if f.FailFile == "" && out.failed && cfg.FailFile != "" {
		f.FailFile = cfg.FailFile // the replayed fail file failed again, where it is
	}
	if last != nil {
		f.Trace = filepath.Join(cfg.Out, TraceFile)
		errs = append(errs, artifact.WriteFile(f.Trace, []byte(last.trace)))
		if last.write != nil {
			f.History, err = last.write(cfg.Out)
			errs = append(errs, err)
		}
		if last.evidence != "" {
			f.Evidence = filepath.Join(cfg.Out, last.evidence)
		}
	}
	summary := fmt.Sprintf("%s: %s\n", f.Kind, f.Summary)
	errs = append(errs, artifact.WriteFile(filepath.Join(cfg.Out, SummaryFile), []byte(summary)))
	return errors.Join(errs...)
}

// progress writes one progress line, if asked to.
func progress(cfg Config, format string, args ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, format+"\n", args...)
	}
}

// Context is threaded through rapid's property functions, which take no
// context of their own.
type runCtx struct {
	ctx context.Context
}
