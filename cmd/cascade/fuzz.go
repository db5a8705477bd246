package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cascade-k8s/cascade/harness/artifact"
	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/model"
)

type fuzzFlags struct {
	target, kubeconfig, context, binDir, datastore, out, failFile string
	inject, kinds                                                 []string
	seed                                                          uint64
	checks, steps, clients                                        int
	shrinkTime, informerLag, informerRelist, writeDelay           time.Duration
	restartAPIServer, restartGC, restartKCM                       time.Duration
	json, coverage, noProxy, quiet                                bool
	kubeVersion, kcmVersion                                       string
	shard                                                         string
	shards                                                        int
}

func newFuzzCmd() *cobra.Command {
	cmd, _ := fuzzCmdAndFlags()
	return cmd
}

// fuzzCmdAndFlags is the fuzz command and the flags it parses into.
func fuzzCmdAndFlags() (*cobra.Command, *fuzzFlags) {
	f := &fuzzFlags{}
	cmd := &cobra.Command{
		Use:   "fuzz --target T",
		Short: "Randomized conformance: rapid-generated runs judged by the model, linearizability and liveness",
		Long: `fuzz draws random runs of trace commands with rapid and judges each against the
model. A failing run is shrunk and written to --out as failure.trace (replay it
with 'cascade replay'), rapid's fail file (--failfile replays it) and, for
concurrent runs, history.html (porcupine's view of the recorded history).

  --target impl-stepped  stepped runs: rapid chooses client steps and the GC's
                         internal steps (deliver, attemptToDelete, send, ...);
                         impl takes each in lockstep with the model, and after
                         every step the real state must equal the model's, the
                         answers must agree and the safety properties hold.
  --target upstream-stepped
                         stepped runs on the real kube-controller-manager's
                         garbage collector behind cascade's API proxy: each
                         GC step rapid draws is taken by releasing held watch
                         events and requests (README "The stepped upstream
                         target"). Rapid draws only the steps the proxy can
                         produce (gc deliver, attemptToDelete, delete, patch,
                         unblock, attemptToOrphan; no controller, coalesce,
                         sync or deliver-virtual step, none the real GC's idle
                         workers have taken ahead of the model: README
                         "Lockstep fuzzing on the real binary") and no
                         custom kind (their CRDs need the GC's discovery
                         sync). The final settle takes those steps in
                         lockstep first, then lets the real GC settle.
  --target upstream|impl|kubeconfig
                         concurrent runs: --clients driver clients send their
                         steps at once while the GC runs by itself. The
                         recorded history (the audit log on envtest; on
                         kubeconfig the driver's own requests plus a watch)
                         must be linearizable with every GC and controller
                         write permitted where it lands, and once the cluster
                         is quiet its state must be live (garbage collected,
                         no GC finalizer stuck).

--inject switches on a catalogued bug in impl (impl, impl-stepped); fuzzing
should then fail. On impl, a failing run's client steps are searched on the
model for a settled reproducer (each step, then settle) that the model with
the bug predicts; confirmed by a replay on impl, it is the failure.trace, to
replay with 'cascade replay --target impl --inject BUG --history'. Without
one, the model checker searches the run's client steps, in the order they
were sent, for a race: a schedule of the GC's and the controllers' steps on
which the model with the bug breaks a property and the model without it
breaks none. Confirmed on a stepped impl, that stepped trace is the
failure.trace, to replay with 'cascade replay --target impl-stepped'. A
failure with neither is held while fuzzing goes on for one. Three faults
make races likely on a GC that runs by itself: --informer-lag delays impl's
informer events (each resource's in order; the lookup races),
--informer-relist breaks the GC's watches now and then and relists them
later, so that only each object's last state is seen (an owner created
and deleted unseen; the race search then lets the model's informers skip
events too), and --write-delay holds each GC write before it is sent (a
client write lands between the GC's GET and its DELETE). When no fault
flag is given, --inject switches on the fault its race needs and says so on
stderr: --informer-lag 200ms for lookup-ignores-scope and
adopt-without-recheck, --informer-relist 300ms for forget-unobserved-virtual,
--write-delay 200ms for delete-without-rv-precondition; any fault flag, 0
included, turns that off. On impl, impl's adopter stands in for
kube-controller-manager's Deployment, ReplicaSet and ReplicationController
controllers (it adopts and releases, and creates nothing; the job and
cronjob controllers stay kube-controller-manager's), as on impl-stepped,
and --informer-lag also lags each of its watch streams (its cache may show
an owner live after the owner's deletion; its recheck GET is not lagged). On
envtest targets the audit log records the controllers' GETs, so an adoption
to an owner being deleted is the known race kubernetes#42938 only after the
controller's own recheck GET showed the owner live. On impl the harness also
records each informer event the GC's graph builder has applied, so every
excuse that the GC had not yet seen a write (kubernetes#26120,
kubernetes#124378, stale-graph, kubernetes#32339's orphaning) holds only
when its graph had not applied the write when it decided, never on the
race window (a restarted GC's graph counts from its restart). A failing run
writes those graph changes to --out as graph-changes.jsonl beside
history.html.

On --target upstream kube-controller-manager talks to kube-apiserver through
cascade's API proxy (README "The API proxy"), which records every watch event
it hands to the controller manager's informers, with its moment, and every
request of its clients with its answer. Each run's history is checked with
it: an excuse that the GC had not yet seen a write (kubernetes#26120,
kubernetes#124378, stale-graph, kubernetes#32339's orphaning) holds only when
no event carrying the write had been handed to the GC's informers when it
decided, never on the race window; each run's progress line names the known
races it passed through and what admitted each. A failing run writes that
evidence to --out as evidence.jsonl beside history.html. --no-proxy lets the
controller manager talk to kube-apiserver directly (no evidence, no faults;
for measuring the proxy's overhead). Behind the proxy the three faults above apply to the
real binary too: --informer-lag holds each event of each of the controller
manager's watch streams (each stream's in order), --informer-relist ends an
informer's watch now and then with 410 Expired, so that it lists again, and
holds that list (an informer breaks at most once per 2m5s, so that client-go's
relist back-off stays under 1.6 s), and --write-delay holds each write of its
garbage collector. The faults draw their times from --seed.

Three faults restart a component once in every concurrent run, at a random
time up to D after its clients start (rapid draws it, so --seed fixes it):
--restart-apiserver D (upstream, impl) stops kube-apiserver gracefully and
starts it again on the same etcd (or kine), port, certificates and audit log,
--restart-gc D (impl) stops impl's GC, cancelling what it has in flight,
and starts a new one with an empty graph, and --restart-kcm D (upstream)
kills kube-controller-manager (SIGKILL) and starts it again, returning once
its GC collects; the last two are aimed at a moment when a GC write is in
flight (within 5 s of the drawn time; on upstream the proxy sees it). Clients resend a step that got
no answer, as a real client does; each write whose answer was lost and that
the audit log does not hold is in the history as maybe applied. The run
must still be linearizable and, once quiet, live; after a kube-apiserver
restart it settles again, a second apart, until its state is live or 150 s
have passed (client-go's informer and work-item back-offs after the
outage, see README), after a kube-controller-manager restart until 45 s
have passed, and after creating a CRD until 2 minutes after the
create (the GC's informer of a CRD created again lists after its
back-off). Each run's progress line
names its restarts, their time, its ops maybe applied and its writes refused
(sent while the server was down: never received, so in no history); the
--json summary totals them (restarts, restart_seconds, maybe_applied,
refused_writes).

The history is judged on the Kubernetes release of the control plane
(--kube-version, by default the release of the kube-apiserver binary in use;
kubeconfig: the default release unless named): before v1.34.0 an update of a
removed object carrying its UID answers 409 Conflict (kubernetes#132470), and
a GC DELETE carries no resourceVersion precondition, so that a client write
between the GC's GET and its DELETE goes unnoticed: the known race
kubernetes#114603, reported as present in that release when the GC's
recorded GET and the write show it.

--coverage prints, after the summary, what the runs that passed exercised of
the trace language: client verbs × kinds, request and owner-reference options,
delete policies and (stepped runs) internal steps, each with its step count,
and the rows no step reached (to stderr with --json).

--datastore kine runs an envtest target's kube-apiserver on kine over
SQLite, k3s's datastore, instead of etcd (bin/kine/v0.17.5/kine of the
checkout; 'make kine' builds it).

--shard i/n runs the i-th (from 0) of n disjoint slices of the campaign's
--checks runs: every n-th run from the (i+1)-th, each from the seed rapid's
own loop gives it (the k-th check, from 0, draws from --seed + k(k+1)/2),
so that the n shards together run exactly the unsharded campaign's runs.
--shards n takes i from $JOB_COMPLETION_INDEX, as in an Indexed Job's pod;
a shard's --out defaults to out/fuzz/shard-I, and its --json summary names
the shard, the campaign's runs it started and a failing run's own seed.
'cascade campaign merge' joins the shards' summaries (README "Campaigns").

A run whose history the checker cannot decide within a minute is
inconclusive: no verdict on the target, so it is neither shrunk nor counted
as passed, and fuzzing goes on.

Progress goes to stderr, a line per run with its own time; the summary goes
to stdout and names the seed and the command that runs the same runs again
(--json: the schema check and conform share, see README). SIGINT or SIGTERM
stops fuzzing within seconds: the run it cuts short is neither passed nor
failed and nothing of it is written to --out, the run's objects are removed
and the control plane stopped. A failure found before the signal is still
reported and written, shrunk as far as rapid got, with its run's seed. Exit codes: 0 every run passed, 1 a run
failed, 2 usage or input error, 3 no run failed but the checker could not
decide some run's history, 130 interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runFuzz(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "", "upstream, impl, impl-stepped, upstream-stepped or kubeconfig (required)")
	fl.StringSliceVar(&f.inject, "inject", nil, "bug to switch on in impl ('cascade check --list-bugs'); repeatable")
	fl.Uint64Var(&f.seed, "seed", 0, "rapid's seed (0: random; the summary prints the one to reproduce with)")
	fl.IntVar(&f.checks, "checks", 20, "number of random runs")
	fl.IntVar(&f.steps, "steps", 30, "average number of steps per run")
	fl.IntVar(&f.clients, "clients", 4, "concurrent driver clients (concurrent runs)")
	fl.DurationVar(&f.shrinkTime, "shrink-time", time.Minute, "time budget for shrinking a failing run (and for searching it for a race)")
	fl.DurationVar(&f.informerLag, "informer-lag", 0, "impl: delay each of the GC's informer events by a random time up to this, each resource's in order, and each event of impl's adopter's watch streams (the adopter runs on every --target impl run), each stream's in order; upstream: the proxy holds each event of each of kube-controller-manager's watch streams likewise (a fault; 0: none; unset: what an injected bug's race needs, see above)")
	fl.DurationVar(&f.informerRelist, "informer-relist", 0, "impl: break each of the GC's watches now and then and relist up to this later, handing on each object's last state only; upstream: the proxy ends kube-controller-manager's watches now and then with 410 Expired and holds the relist up to this (a fault; 0: none; unset: what an injected bug's race needs, see above)")
	fl.DurationVar(&f.writeDelay, "write-delay", 0, "impl, upstream: hold each GC write a random time up to this before sending it (on upstream the proxy holds it) (a fault; 0: none; unset: what an injected bug's race needs, see above)")
	fl.BoolVar(&f.noProxy, "no-proxy", false, "upstream: let kube-controller-manager talk to kube-apiserver directly, not through cascade's API proxy (no evidence, no faults; for measuring the proxy's overhead)")
	fl.DurationVar(&f.restartKCM, "restart-kcm", 0, "upstream: kill kube-controller-manager and start it again once per run, at a random time up to this after the run's clients start, aimed at a GC write in flight (a fault; 0: none)")
	fl.DurationVar(&f.restartAPIServer, "restart-apiserver", 0, "upstream, impl: restart kube-apiserver on the same etcd once per run, at a random time up to this after the run's clients start (a fault; 0: none)")
	fl.DurationVar(&f.restartGC, "restart-gc", 0, "impl: restart impl's GC (an empty graph, rebuilt from fresh lists) once per run, at a random time up to this after the run's clients start, aimed at a GC write in flight (a fault; 0: none)")
	fl.StringSliceVar(&f.kinds, "kinds", fuzz.DefaultUniverse.Kinds, "kinds random steps create (short names)")
	fl.StringVar(&f.out, "out", "out/fuzz", "directory for failure artifacts (a shard's default: out/fuzz/shard-I); refused before the runs if it holds a file of theirs cascade did not write")
	fl.StringVar(&f.failFile, "failfile", "", "replay a rapid fail file written by an earlier failure: its one run, and no random runs after it (a file rapid cannot replay is an error, exit 2)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the kubeconfig target (default: $KUBECONFIG, ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "context of the kubeconfig target (default: the current one)")
	fl.StringVar(&f.binDir, "kube-bin-dir", "", "etcd, kube-apiserver and kube-controller-manager for envtest targets (default: $KUBEBUILDER_ASSETS, else bin/kube/<--kube-version> of the checkout, bin/kube/"+controlplane.KubeVersion+" without it)")
	fl.StringVar(&f.datastore, "datastore", "", datastoreUsage+" (default etcd)")
	registerKubeVersion(fl, &f.kubeVersion)
	registerKCMVersion(fl, &f.kcmVersion)
	registerShard(fl, &f.shard, &f.shards, "the campaign's runs, i/n counting from 0 (the shards together run exactly the unsharded campaign's runs, each from its own seed")
	fl.BoolVar(&f.json, "json", false, "print the summary as JSON")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr: the summary, an interrupt's line and errors only")
	fl.BoolVar(&f.coverage, "coverage", false, "print the coverage table: verbs × kinds, options, policies and internal steps the passing runs hit")
	return cmd, f
}

// spec is the target the flags ask fuzzing for. Concurrent runs on impl
// use impl's own adopter for the built-in workloads, as stepped runs do
// (target.Spec.Adopter); stepped runs on upstream-stepped run the GC
// alone, as their model does (target.Spec.GCOnly).
func (f *fuzzFlags) spec(inject bugs.Set, log io.Writer) target.Spec {
	return target.Spec{Name: f.target, Inject: inject, Kubeconfig: f.kubeconfig, Context: f.context, BinDir: f.binDir, Datastore: f.datastore, Log: log,
		InformerLag: f.informerLag, InformerRelist: f.informerRelist, WriteDelay: f.writeDelay,
		RestartAPIServer: f.restartAPIServer, RestartGC: f.restartGC, RestartKCM: f.restartKCM, NoProxy: f.noProxy, FaultSeed: f.seed,
		Audit: f.target != target.Kubeconfig, Adopter: f.target == target.Impl, GCOnly: f.target == target.UpstreamStepped}
}

// checkArgs checks fuzz's flags as far as they can be checked without a
// control plane, and returns the bugs to inject, the shard and the
// universe they ask for. campaign run checks a fuzz campaign's flags with
// it before it creates anything.
func (f *fuzzFlags) checkArgs(fl *pflag.FlagSet) (inject bugs.Set, shard fuzz.Shard, u fuzz.Universe, err error) {
	fail := func(format string, args ...any) (bugs.Set, fuzz.Shard, fuzz.Universe, error) {
		return nil, fuzz.Shard{}, fuzz.Universe{}, usageErr(format, args...)
	}
	switch {
	case f.target == "":
		return fail("fuzz needs --target (upstream, impl, impl-stepped, upstream-stepped or kubeconfig)")
	case f.target == target.Model:
		return fail("the model is fuzzing's oracle, not a target: use upstream, impl, impl-stepped, upstream-stepped or kubeconfig")
	case !slices.Contains(target.Names, f.target):
		return fail("unknown target %q (valid: upstream, impl, impl-stepped, upstream-stepped, kubeconfig)", f.target)
	case f.checks <= 0 || f.steps <= 0 || f.clients <= 0:
		return fail("--checks, --steps and --clients must be positive")
	case f.shrinkTime < 0:
		return fail("--shrink-time %s: want 0 or more", f.shrinkTime)
	case f.informerLag < 0 || f.informerRelist < 0 || f.writeDelay < 0:
		return fail("--informer-lag, --informer-relist and --write-delay must be 0 or more")
	}
	if inject, err = bugs.Parse(f.inject); err != nil {
		return fail("%v", err)
	}
	if _, err := parseKubeVersion(f.kubeVersion); err != nil {
		return nil, fuzz.Shard{}, fuzz.Universe{}, err
	}
	if _, _, err := withKCMVersion(model.Release{}, f.kcmVersion); err != nil {
		return nil, fuzz.Shard{}, fuzz.Universe{}, err
	}
	if shard, err = parseShardFlags(f.shard, f.shards); err != nil {
		return nil, fuzz.Shard{}, fuzz.Universe{}, err
	}
	if shard.Count > 0 && f.failFile != "" {
		return fail("--failfile replays one run: it takes no --shard or --shards")
	}
	if f.failFile != "" {
		if err := fuzz.CheckFailFile(f.failFile); err != nil {
			return fail("--failfile: %v", err)
		}
	}
	u = fuzz.DefaultUniverse
	u.Kinds = f.kinds
	if f.target == target.UpstreamStepped {
		// CRDs need the GC's discovery sync, which the proxy cannot step
		custom := slices.DeleteFunc(slices.Clone(f.kinds), func(k string) bool { return slices.Contains(fuzz.UpstreamSteppedKinds(f.kinds), k) })
		if fl.Changed("kinds") && len(custom) > 0 {
			return fail("upstream-stepped cannot fuzz custom kinds (%s): their CRDs need the GC's discovery sync, which the API proxy cannot step", strings.Join(custom, ", "))
		}
		u.Kinds = fuzz.UpstreamSteppedKinds(f.kinds)
	}
	if err := u.Validate(); err != nil {
		return fail("%v", err)
	}
	if err := f.spec(inject, io.Discard).Validate(); err != nil {
		return fail("%v", err)
	}
	return inject, shard, u, nil
}

func runFuzz(cmd *cobra.Command, f *fuzzFlags) error {
	inject, shard, u, err := f.checkArgs(cmd.Flags())
	if err != nil {
		return err
	}
	shardOut(cmd.Flags(), &f.out, shard)
	if f.out != "" {
		if err := artifact.Check(fuzz.OutputFiles(f.out)...); err != nil {
			return usageErr("--out: %v", err)
		}
	}
	quietLogs()
	if f.seed == 0 {
		// drawn here, not by fuzz, so that the faults' times (FaultSeed)
		// follow the seed the summary prints
		f.seed = 1 + rand.Uint64N(1<<53-1)
	}
	// progress: what fuzz says while it works, none under --quiet (the
	// summary, an interrupt's line and errors still come)
	progress := cmd.ErrOrStderr()
	if f.quiet {
		progress = io.Discard
	}
	spec := f.spec(inject, progress)
	if f.target == target.Kubeconfig {
		spec.Release, err = kubeconfigRelease(f.kubeconfig, f.context, f.kubeVersion)
	} else {
		var dir string
		if spec.Release, dir, err = resolveRelease(f.kubeVersion, f.kcmVersion, f.binDir, target.JudgesKCM(f.target)); dir != "" {
			spec.BinDir = dir
		}
	}
	if err == nil {
		spec.Release, spec.KCMNamed, err = withKCMVersion(spec.Release, f.kcmVersion)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "fuzz %s: %s\n", f.target, releaseNote(spec.Release))
	if err := spec.Validate(); err != nil {
		return usageErr("%v", err)
	}
	fl := cmd.Flags()
	if !fl.Changed("informer-lag") && !fl.Changed("informer-relist") && !fl.Changed("write-delay") {
		if line := spec.DefaultRaceFaults(); line != "" {
			fmt.Fprintln(progress, line)
		}
	}
	ctx := cmd.Context()
	t, err := target.Start(ctx, spec)
	var inErr *target.InputError
	if errors.As(err, &inErr) {
		return usageErr("%v", err)
	}
	if err != nil {
		return err
	}
	defer func() { _ = t.Close() }()
	cfg := fuzz.Config{Checks: f.checks, Steps: f.steps, Seed: f.seed, Clients: f.clients, ShrinkTime: f.shrinkTime,
		Universe: u, Out: f.out, Progress: progress, FailFile: f.failFile, Shard: shard}
	if f.coverage {
		cfg.Coverage = fuzz.NewCoverage()
	}
	rep, err := fuzz.OnTarget(ctx, t, cfg)
	if ctx.Err() != nil && (rep == nil || rep.Failure == nil) {
		// the run the signal cut short has no verdict: no summary that
		// could pass for one, only what ran before it
		if rep != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "cascade fuzz: interrupted after %d passed runs (%d steps), seed %d\n", rep.Checks, rep.Steps, rep.Seed)
			if f.json {
				sum := newSummary(cmd, f.target, "seed", rep.Seed, t.Spec.Release)
				sum.Reproduce = shardReproduce(sum.Reproduce, shard)
				_ = printFuzz(cmd.OutOrStdout(), sum, rep, true)
			}
		}
		return errInterrupted
	}
	// a failure whose artifacts could not all be written is still
	// reported: the finding is the run's, the error only the files'
	var artifacts error
	if err != nil && rep != nil && rep.Failure != nil {
		artifacts, err = err, nil
	}
	var ffErr *fuzz.FailFileError
	if errors.As(err, &ffErr) {
		return usageErr("--failfile: %v", err)
	}
	if err != nil {
		return err
	}
	sum := newSummary(cmd, f.target, "seed", rep.Seed, t.Spec.Release)
	sum.Reproduce = shardReproduce(sum.Reproduce, shard)
	if err := printFuzz(cmd.OutOrStdout(), sum, rep, f.json); err != nil {
		return err
	}
	if cfg.Coverage != nil {
		w := cmd.OutOrStdout()
		if f.json {
			w = cmd.ErrOrStderr()
		}
		if err := cfg.Coverage.Write(w); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return errInterrupted
	}
	if artifacts != nil {
		return &exitError{code: 1, err: fmt.Errorf("the failure's artifacts: %w", artifacts)}
	}
	return fuzzResult(rep)
}

// errInconclusive makes cascade fuzz exit 3: no run failed, but the
// checker could not decide the history of some.
var errInconclusive = &exitError{code: 3, err: errors.New("")}

// fuzzResult is what fuzz exits with once it has printed rep: 1 when a
// run failed, 3 when none did but some run was inconclusive, else 0.
func fuzzResult(rep *fuzz.Report) error {
	switch {
	case !rep.OK():
		return errViolation
	case len(rep.Undecided) > 0:
		return errInconclusive
	}
	return nil
}

// fuzzSummary is `cascade fuzz --json`: the shared summary, then the runs.
type fuzzSummary struct {
	summary
	// Mode is stepped or concurrent.
	Mode   string   `json:"mode"`
	Inject []string `json:"inject"`
	// Runs took at least one step, up to the first failing one; Passed of
	// them passed.
	Runs   int `json:"runs"`
	Passed int `json:"runs_passed"`
	Steps  int `json:"steps"`
	// InternalSteps are the internal steps the target took (stepped runs).
	InternalSteps int `json:"internal_steps"`
	// OtherOrders are the passed stepped runs whose target settled in an
	// order of its own that the model allows (fuzz.Report.OtherOrders).
	OtherOrders int `json:"settled_in_other_order,omitempty"`
	// HistoryOps are the history operations checked (concurrent runs).
	HistoryOps int        `json:"history_ops"`
	Known      knownRaces `json:"known_races"`
	// ExcusedRuns are the passed runs that passed only through a known
	// race, DeliveryRecordRuns those checked with the API proxy's
	// delivery record (upstream behind the proxy).
	ExcusedRuns        int `json:"excused_runs"`
	DeliveryRecordRuns int `json:"delivery_record_runs"`
	// Restarts are the restarts the passed runs did (--restart-apiserver,
	// --restart-gc), RestartSeconds their total time, MaybeApplied
	// the history operations those runs checked with no known outcome,
	// and RefusedWrites the writes whose connection was refused while a
	// server was down (never sent: in no history).
	Restarts       int     `json:"restarts"`
	RestartSeconds float64 `json:"restart_seconds"`
	MaybeApplied   int     `json:"maybe_applied"`
	RefusedWrites  int     `json:"refused_writes"`
	// Inconclusive are the runs whose history the checker could not
	// decide in time, one line each: no verdict on the target.
	Inconclusive []string `json:"inconclusive_runs"`
	// Failure is the first failing run, shrunk (null when all passed).
	Failure *fuzzFailure `json:"failure"`
	// Shard, ShardCount, Checks and RunNumbers: a shard's summary
	// (--shard, --shards) names its slice (i of n), the campaign's runs
	// (--checks) and the campaign numbers of the runs it started.
	Shard      *int  `json:"shard,omitempty"`
	ShardCount int   `json:"shard_count,omitempty"`
	Checks     int   `json:"checks,omitempty"`
	RunNumbers []int `json:"run_numbers,omitempty"`
	// RunSteps are the steps of each counted run by its campaign number
	// (from 1), sharded or not: the same runs take the same steps.
	RunSteps map[int]int `json:"run_steps"`
}

// fuzzFailure is a failing run in fuzzSummary.
type fuzzFailure struct {
	Kind    string `json:"kind"`
	Summary string `json:"summary"`
	// Steps is the shrunk run's length; Run the failing run's number.
	Steps int `json:"steps"`
	Run   int `json:"run"`
	// FoundAfter is the time from the start to the failing run.
	FoundAfter float64 `json:"found_after_seconds"`
	Attributed bool    `json:"attributed_to_injected_bugs"`
	Trace      string  `json:"trace_file,omitempty"`
	History    string  `json:"history_file,omitempty"`
	// Evidence is the evidence file: the proxy's record (upstream,
	// evidence.jsonl) or the GC's graph changes (impl,
	// graph-changes.jsonl).
	Evidence string `json:"evidence_file,omitempty"`
	FailFile string `json:"fail_file,omitempty"`
	// Replay is the command that replays the trace.
	Replay string `json:"replay_command,omitempty"`
	// Seed is the failing run's own seed: --seed it --checks 1 runs
	// that run alone.
	Seed uint64 `json:"run_seed,omitempty"`
	// TraceText is the trace itself, in a shard's summary (--shard,
	// --shards), so that a campaign's merge has it where the shard's
	// --out is gone with its pod.
	TraceText string `json:"trace,omitempty"`
}

func newFuzzSummary(s summary, rep *fuzz.Report) fuzzSummary {
	s.Seconds = rep.Elapsed.Seconds()
	switch {
	case rep.Failure != nil:
		s.Result = summaryFail
	case rep.Interrupted:
		s.Result = summaryInterrupted
	case len(rep.Undecided) > 0:
		s.Result = summaryInconclusive
	default:
		s.Result = summaryPass
	}
	out := fuzzSummary{summary: s, Mode: rep.Mode, Inject: append([]string{}, rep.Inject...), Runs: rep.Runs, Passed: rep.Checks,
		Steps: rep.Steps, InternalSteps: rep.InternalSteps, OtherOrders: rep.OtherOrders, HistoryOps: rep.Ops, Known: fuzzKnownRaces(rep.Known), ExcusedRuns: rep.Excused, DeliveryRecordRuns: rep.Delivered, Inconclusive: append([]string{}, rep.Undecided...),
		Restarts: rep.Restarts, RestartSeconds: rep.RestartTime.Seconds(), MaybeApplied: rep.MaybeApplied, RefusedWrites: rep.Refused, RunSteps: map[int]int{}}
	maps.Copy(out.RunSteps, rep.RunSteps)
	if f := rep.Failure; f != nil {
		out.Failure = &fuzzFailure{Kind: f.Kind, Summary: f.Summary, Steps: f.Steps, Run: f.Run, FoundAfter: f.FoundAfter.Seconds(),
			Attributed: f.Attributed, Trace: f.Trace, History: f.History, Evidence: f.Evidence, FailFile: f.FailFile, Replay: replayCommand(rep, s.Datastore), Seed: f.Seed}
		if rep.Shard.Count > 0 && f.Trace != "" {
			if b, err := os.ReadFile(f.Trace); err == nil {
				out.Failure.TraceText = string(b)
			}
		}
	}
	if rep.Shard.Count > 0 {
		i := rep.Shard.Index
		out.Shard, out.ShardCount, out.Checks = &i, rep.Shard.Count, rep.CampaignRuns
		out.RunNumbers = append([]int{}, rep.RunNumbers...)
	}
	return out
}

// replayCommand is the command that replays a failure's trace on the
// datastore it failed on ("" when no trace was written).
func replayCommand(rep *fuzz.Report, datastore string) string {
	f := rep.Failure
	if f == nil || f.Trace == "" {
		return ""
	}
	store := ""
	if datastore != "" {
		store = "--datastore " + datastore + " "
	}
	if f.ReplayTarget != "" { // the trace's # bug: header switches the bugs on
		return fmt.Sprintf("cascade replay --target %s %s%s", f.ReplayTarget, store, f.Trace)
	}
	history := ""
	if f.ReplayHistory {
		history = "--history "
	}
	return fmt.Sprintf("cascade replay --target %s %s%s%s%s", rep.Target, store, injectFlag(rep), history, f.Trace)
}

func printFuzz(w io.Writer, s summary, rep *fuzz.Report, asJSON bool) error {
	if asJSON {
		return writeJSON(w, newFuzzSummary(s, rep))
	}
	fmt.Fprintf(w, "target %s (%s runs): %d runs passed", rep.Target, rep.Mode, rep.Checks)
	if rep.Runs > rep.Checks {
		fmt.Fprintf(w, " of %d", rep.Runs)
	}
	fmt.Fprintf(w, ", %d steps", rep.Steps)
	if rep.Mode == "stepped" {
		fmt.Fprintf(w, " (%d internal steps taken by the target)", rep.InternalSteps)
	}
	if rep.Ops > 0 {
		fmt.Fprintf(w, ", %d history operations checked", rep.Ops)
	}
	fmt.Fprintf(w, " in %s, seed %d\n", rep.Elapsed.Round(time.Millisecond), rep.Seed)
	if rep.OtherOrders > 0 {
		fmt.Fprintf(w, "%d of %d passed runs settled in an order of the target's own that the model's internal steps also take (not its canonical settle's)\n", rep.OtherOrders, rep.Checks)
	}
	if rep.Restarts > 0 {
		fmt.Fprintf(w, "%d restarts in %s, %d history operations maybe applied, %d writes refused\n", rep.Restarts, rep.RestartTime.Round(time.Millisecond), rep.MaybeApplied, rep.Refused)
	}
	if rep.Excused > 0 || rep.Delivered > 0 {
		fmt.Fprintf(w, "%d of %d passed runs only through a known race; %d checked with the API proxy's delivery record\n", rep.Excused, rep.Checks, rep.Delivered)
	}
	for _, l := range fuzzKnownRaces(rep.Known).lines(s.judged()) {
		fmt.Fprintln(w, l)
	}
	for _, u := range rep.Undecided {
		fmt.Fprintf(w, "INCONCLUSIVE %s\n", u)
	}
	if f := rep.Failure; f != nil {
		shrunk := "shrunk to"
		if rep.Interrupted {
			shrunk = "interrupted while shrinking,"
		}
		fmt.Fprintf(w, "FAILED (%s) in run %d after %s, %s %d steps, seed %d:\n  %s\n", f.Kind, f.Run, f.FoundAfter.Round(time.Millisecond), shrunk, f.Steps, f.Seed, strings.ReplaceAll(f.Summary, "\n", "\n  "))
		for _, a := range []struct{ what, path string }{{"trace", f.Trace}, {"history", f.History}, {evidenceLabel(f.Evidence), f.Evidence}, {"rapid fail file", f.FailFile}} {
			if a.path != "" {
				fmt.Fprintf(w, "  %s: %s\n", a.what, a.path)
			}
		}
		if c := replayCommand(rep, s.Datastore); c != "" {
			fmt.Fprintf(w, "  replay: %s\n", c)
		}
	}
	fmt.Fprintf(w, "reproduce: %s\n", s.Reproduce)
	return nil
}

func injectFlag(rep *fuzz.Report) string {
	if len(rep.Inject) == 0 {
		return ""
	}
	return "--inject " + strings.Join(rep.Inject, ",") + " "
}

// conformFuzz are the flags of conform's fuzz phase.
var conformFuzz struct {
	checks, steps, clients int
	seed                   uint64
	out                    string
}

// conformUpstreamSteppedChecks bounds the fuzz phase's runs on
// upstream-stepped: each lockstep run on the real GC takes 4 to 25 s
// (README "Lockstep fuzzing on the real binary"), ten times impl-stepped's.
const conformUpstreamSteppedChecks = 3

// The fuzz phase of `cascade conform`: a bounded number of random runs
// after the traces, on every target but the model (the oracle).
func init() {
	conformPhases = append(conformPhases, conformPhase{
		name: "fuzz",
		flags: func(fl *pflag.FlagSet) {
			fl.IntVar(&conformFuzz.checks, "fuzz-checks", 10, fmt.Sprintf("random runs after the traces (0: none; at most %d on upstream-stepped, whose lockstep runs on the real GC cost about 10 s each)", conformUpstreamSteppedChecks))
			fl.IntVar(&conformFuzz.steps, "fuzz-steps", 20, "average steps per random run")
			fl.IntVar(&conformFuzz.clients, "fuzz-clients", 4, "concurrent driver clients of a random run")
			fl.Uint64Var(&conformFuzz.seed, "fuzz-seed", 1, "rapid's seed for the random runs (0: random)")
			fl.StringVar(&conformFuzz.out, "fuzz-out", "out/conform/fuzz", "directory for a failing random run's artifacts")
		},
		run: runFuzzPhase,
	})
}

func runFuzzPhase(ctx context.Context, env *phaseEnv) error {
	if conformFuzz.checks == 0 {
		return nil
	}
	if env.target.Spec.Name == target.Model {
		return nil // the model is fuzzing's oracle, not a target
	}
	checks := conformFuzz.checks
	if env.target.Spec.Name == target.UpstreamStepped {
		checks = min(checks, conformUpstreamSteppedChecks)
	}
	env.planned = 1
	cfg := fuzz.Config{Checks: checks, Steps: conformFuzz.steps, Clients: conformFuzz.clients, Seed: conformFuzz.seed,
		ShrinkTime: time.Minute, Universe: fuzz.DefaultUniverse, Out: conformFuzz.out, Progress: env.progress}
	start := time.Now()
	rep, err := fuzz.OnTarget(ctx, env.target, cfg)
	if rep != nil {
		env.seed = rep.Seed
		env.known.merge(fuzzKnownRaces(rep.Known))
	}
	if ctx.Err() != nil && (rep == nil || rep.Failure == nil) {
		return nil // interrupted: runConform reports it
	}
	name := fmt.Sprintf("fuzz/%d-runs-seed-%d", checks, env.seed)
	c := caseResult{Phase: "fuzz", Name: name, Seconds: time.Since(start).Seconds()}
	switch {
	case err != nil && (rep == nil || rep.OK()):
		c.Result, c.Message = resultError, err.Error()
	case !rep.OK():
		s := summary{Reproduce: fuzzCommand(env.target.Spec, rep.Seed), Datastore: env.target.Spec.Datastore}
		var b strings.Builder
		_ = printFuzz(&b, s, rep, false)
		if err != nil { // the failure stands; its files could not all be written
			fmt.Fprintf(&b, "the failure's artifacts: %v\n", err)
		}
		c.Result, c.Message = resultFail, b.String()
	case len(rep.Undecided) > 0: // no verdict on the target: not a failure
		c.Result, c.Message = resultError, "inconclusive: "+strings.Join(rep.Undecided, "; ")
	default:
		c.Result = resultPass
		c.Message = fmt.Sprintf("%d runs, %d steps, %d history operations, seed %d", rep.Checks, rep.Steps, rep.Ops, rep.Seed)
	}
	env.add(c)
	return nil
}

// fuzzCommand is the `cascade fuzz` command line that repeats conform's
// fuzz phase on spec's target.
func fuzzCommand(spec target.Spec, seed uint64) string {
	args := []string{"cascade fuzz --target", spec.Name}
	for _, b := range spec.Inject.Names() {
		args = append(args, "--inject", b)
	}
	if spec.Kubeconfig != "" {
		args = append(args, "--kubeconfig", shellQuote(spec.Kubeconfig))
	}
	if spec.Context != "" {
		args = append(args, "--context", shellQuote(spec.Context))
	}
	if spec.Datastore != "" {
		args = append(args, "--datastore", spec.Datastore)
	}
	checks := conformFuzz.checks
	if spec.Name == target.UpstreamStepped {
		checks = min(checks, conformUpstreamSteppedChecks)
	}
	args = append(args, fmt.Sprintf("--checks %d --steps %d --clients %d --seed %d", checks, conformFuzz.steps, conformFuzz.clients, seed))
	return strings.Join(args, " ")
}

// evidenceLabel names a failure's evidence file in the report: the
// proxy's record (upstream) or the GC's graph changes (impl).
func evidenceLabel(path string) string {
	if filepath.Base(path) == fuzz.GraphChangesFile {
		return "GC graph changes"
	}
	return "proxy evidence"
}
