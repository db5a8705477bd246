package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cascade-k8s/cascade/harness/artifact"
	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/traces"
)

// Case results, as the table, the JSON summary and JUnit name them.
const (
	resultPass  = target.Pass
	resultFail  = target.Fail
	resultError = target.Error
	resultSkip  = target.Skipped
)

// caseResult is one test case of a conform run: a trace, or a randomized
// run of a later phase.
type caseResult struct {
	Phase   string  `json:"phase"`
	Name    string  `json:"name"`
	Path    string  `json:"path,omitempty"`
	Result  string  `json:"result"`
	Seconds float64 `json:"seconds"`
	// Message is the diff of a failure, the error of an error, the reason
	// of a skip.
	Message string `json:"message,omitempty"`
	// Output is the target's output per stanza (failures and errors), with
	// the real messages the comparison leaves out.
	Output [][]string `json:"output,omitempty"`
}

func (c caseResult) outputText() string {
	var b strings.Builder
	for i, st := range c.Output {
		fmt.Fprintf(&b, "stanza %d:\n", i+1)
		for _, l := range st {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// conformReport is the result of a conform run, as --json prints it: the
// shared summary, then the cases.
type conformReport struct {
	summary
	Where       string       `json:"where"`
	Started     time.Time    `json:"started"`
	Passed      int          `json:"passed"`
	Failed      int          `json:"failed"`
	Errors      int          `json:"errors"`
	Skipped     int          `json:"skipped"`
	Interrupted bool         `json:"interrupted,omitempty"`
	Cases       []caseResult `json:"cases"`
	// Known are the known upstream races (model.KnownRaces) the run
	// showed: a passing trace whose '# known:' header names one, or a
	// fuzz run that passed through one.
	Known knownRaces `json:"known_races"`
}

func (r *conformReport) add(c caseResult) {
	switch c.Result {
	case resultPass:
		r.Passed++
	case resultFail:
		r.Failed++
	case resultError:
		r.Errors++
	case resultSkip:
		r.Skipped++
	}
	r.Cases = append(r.Cases, c)
}

// phaseEnv is what a conform phase works with.
type phaseEnv struct {
	target *target.Target
	labels []string
	// add records a case and reports it on the progress stream.
	add func(caseResult)
	// planned is how many cases the current phase expects (0: unknown),
	// for the progress lines.
	planned int
	// progress receives free-form progress lines (io.Discard with -q).
	progress io.Writer
	// seed is the seed of the fuzz phase's runs (0: none ran).
	seed uint64
	// known records the known upstream races the cases showed.
	known *knownRaces
}

// conformPhase is one part of a conform run on a started target. Phases
// run in order on the same target; each records its cases through
// phaseEnv.add. A phase returns an error only when it cannot go on (an
// interrupted run, a target that stopped answering).
type conformPhase struct {
	name string
	// flags registers the phase's own flags on `cascade conform` (nil:
	// none).
	flags func(*pflag.FlagSet)
	run   func(ctx context.Context, env *phaseEnv) error
}

// conformPhases are the phases of `cascade conform`, in order. The trace
// phase replays every embedded scenario and race trace. The bounded
// randomized phase of harness/fuzz belongs after it: it is added to this
// list (with its own flags) where `cascade fuzz` is defined.
var conformPhases = []conformPhase{
	{name: "traces", run: runTracePhase},
}

type conformFlags struct {
	target               targetFlags
	junit, out           string
	labels               []string
	jsonOut, quiet, list bool
	traceTimeout         time.Duration
}

func newConformCmd() *cobra.Command {
	var f conformFlags
	cmd := &cobra.Command{
		Use:   "conform --target model|upstream|impl|impl-stepped|upstream-stepped|kubeconfig [flags]",
		Short: "Run every scenario and race trace on a target: the conformance gate",
		Long: `conform replays every scenario and race trace built into cascade on one target
and compares each with its expectations, as 'cascade replay' does. Traces a
target cannot run are skipped with the reason (see 'cascade replay --help').

Targets:
  model         the model
  upstream      envtest (etcd, kube-apiserver) + kube-controller-manager
                (garbagecollector, replicaset, deployment, replicationcontroller,
                job, cronjob) + cascade's deletion-protection webhook + a
                principal without update on */finalizers (as=limited)
  impl          as upstream, but cascade's reference GC (impl, --inject
                switches on catalogued bugs) instead of kube-controller-manager's
  impl-stepped  envtest + impl in Stepped mode, started per trace with the
                trace's '# bug:' header (and --inject): the traces with GC or
                controller steps, or with a bug
  upstream-stepped
                envtest + kube-controller-manager's garbage collector, and
                a second kube-controller-manager (deployment, replicaset,
                replicationcontroller), behind cascade's API proxy, which
                holds their watch events and their GETs and writes about a
                trace's objects until the trace's gc and controller steps
                release them: the traces of upstream and impl with GC or
                controller steps and no bug; gc coalesce ends a watch so
                that the informer lists again, gc sync waits for the GC's
                next discovery sync (a 30s timer), gc deliver-virtual
                waits for the graph builder's log line of the event,
                apiextensions cleanup for the CRD to go. A trace whose
                step the proxy cannot produce (a cleanup other than right
                after its CRD's DELETE, a gc deliver-virtual other than
                right after the worker step that queued it), that creates
                a CRD again after a sync stopped its monitor, or whose
                ReplicaSet the real controller would scale, is skipped
                naming it. A step whose IO does not come
                within 10s (a relist 65s, a sync 90s), or differs from the
                model's, is a divergence.
                Its fuzz phase is at most 3 lockstep runs (cascade fuzz
                --target upstream-stepped)
  kubeconfig    the cluster of --kubeconfig/--context. cascade works only in
                namespaces it creates (cascade-<run>-*, labelled cascade.dev/run)
                and touches only objects it created; it creates the cascade.dev
                CRDs some traces need only when the cluster lacks them, and
                skips those traces otherwise. Traces with as=limited need
                --limited-context; protection traces need the cluster to call
                cascade's webhook (cascade cluster installs it; --webhook serves
                it from this machine for the run). Up to 100 requests/s.

The envtest binaries come from --kube-bin-dir, $KUBEBUILDER_ASSETS, or
bin/kube/<--kube-version> of the checkout around the working directory or the
executable (bin/kube/` + controlplane.KubeVersion + ` without --kube-version; 'make kube
KUBE_VERSION=vX.Y.Z' builds them). Here and now: ` + releaseInUse + `.
--kube-version names the release they run (by default the release of that
kube-apiserver): traces whose '# releases:' header excludes it are skipped,
the model and the history checks follow its semantics, and known races are
those of that release (kubernetes#114603 before v1.34.0). On the model target
without --kube-version each trace replays on the releases its header names.
--datastore kine runs the envtest targets' kube-apiserver on kine over
SQLite, k3s's datastore, instead of etcd (bin/kine/` + controlplane.KineVersion + `/kine of the
checkout; 'make kine' builds it).

The summary table (trace, result, time) goes to stdout, or a JSON summary
with --json (the schema check and fuzz share, with the fuzz phase's seed and
the command that reproduces the run; see README); progress goes to stderr.
After the table, one line per known upstream race the run showed: a passing
trace whose '# known:' header names it, or a fuzz run that passed through
it ("known upstream race kubernetes#114603, present in v1.33.13: shown by
trace race/kubernetes-114603", the release named for a race only some
releases have; JSON: known_races).
--junit writes a JUnit XML report (one testsuite, one testcase per trace: a
failure carries the diff, a skip its reason). --out DIR writes summary.json,
junit.xml (with --junit too) and, for each failed trace, DIR/<trace>.txt
with the diff and the target's whole output.

Exit codes: 0 no divergence, 1 a divergence or a replay that could not
complete, 2 usage or input error (a bad kubeconfig, an unreachable cluster,
missing binaries), 130 interrupted (the current trace's objects are cleaned
up and the target stopped first; the reports cover what ran).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runConform(cmd, &f) },
	}
	fl := cmd.Flags()
	f.target.register(fl)
	fl.StringVar(&f.junit, "junit", "", "write a JUnit XML report to this file")
	fl.StringVar(&f.out, "out", "", "directory for summary.json, junit.xml and the output of failed traces")
	fl.StringSliceVar(&f.labels, "labels", nil, "run only traces with one of these labels (comma-separated; see --list)")
	fl.BoolVar(&f.jsonOut, "json", false, "print the summary as JSON instead of a table")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fl.BoolVar(&f.list, "list", false, "list the built-in traces with their targets and labels, and exit")
	fl.DurationVar(&f.traceTimeout, "trace-timeout", 3*time.Minute, "give up on one trace after this long")
	for _, p := range conformPhases {
		if p.flags != nil {
			p.flags(fl)
		}
	}
	return cmd
}

// suiteTraces are the traces conform runs: the embedded scenarios and races.
func suiteTraces() ([]*traces.Trace, error) {
	return traces.Embedded(traces.DirScenarios, traces.DirRaces)
}

func traceLabels(tr *traces.Trace) []string {
	var out []string
	for _, l := range strings.Split(tr.Header(traces.HeaderLabels), ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func runConform(cmd *cobra.Command, f *conformFlags) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	all, err := suiteTraces()
	if err != nil {
		return usageErr("%v", err)
	}
	var known []string
	for _, tr := range all {
		for _, l := range traceLabels(tr) {
			if !slices.Contains(known, l) {
				known = append(known, l)
			}
		}
	}
	slices.Sort(known)
	for _, l := range f.labels {
		if !slices.Contains(known, l) {
			return usageErr("--labels: no trace is labelled %q (labels: %s)", l, strings.Join(known, ", "))
		}
	}
	if f.list {
		if t := f.target.name; t != "" && !slices.Contains(target.Names, t) {
			return usageErr("unknown target %q (valid: %s)", t, strings.Join(target.Names, ", "))
		}
		return listTraces(out, all, f.labels)
	}
	if f.traceTimeout <= 0 {
		return usageErr("--trace-timeout must be positive")
	}
	if conformFuzz.checks < 0 || conformFuzz.steps <= 0 || conformFuzz.clients <= 0 {
		return usageErr("--fuzz-checks must be 0 (no fuzz phase) or more, and --fuzz-steps and --fuzz-clients positive (as fuzz's --checks, --steps and --clients)")
	}
	progress := errOut
	if f.quiet {
		progress = io.Discard
	}
	spec, err := f.target.spec(progress)
	if err != nil {
		return err
	}
	spec.TraceTimeout = f.traceTimeout
	if spec.Name != target.Model && spec.Name != target.Kubeconfig {
		// the fuzz phase checks envtest histories from the audit log,
		// where the GC's own requests are told apart
		spec.Audit = true
	}
	for _, p := range []string{f.junit, f.out} {
		if p != "" && strings.HasPrefix(p, "-") {
			return usageErr("report path %q looks like a flag", p)
		}
	}
	// refused now, not after the run: a report path holding a file
	// cascade did not write
	var reports []string
	if f.junit != "" {
		reports = append(reports, f.junit)
	}
	if f.out != "" {
		reports = append(reports, filepath.Join(f.out, "junit.xml"), filepath.Join(f.out, "summary.json"))
	}
	if conformFuzz.checks > 0 && spec.Name != target.Model && conformFuzz.out != "" {
		reports = append(reports, fuzz.OutputFiles(conformFuzz.out)...)
	}
	if err := artifact.Check(reports...); err != nil {
		return usageErr("%v", err)
	}

	ctx := cmd.Context()
	rep := &conformReport{Started: time.Now(), Known: knownRaces{}}
	rep.Target = spec.Name
	t, err := startTarget(ctx, spec)
	if err != nil {
		return err
	}
	rep.Where = t.Where
	env := &phaseEnv{target: t, labels: f.labels, progress: progress, known: &rep.Known}
	done := 0 // cases of the current phase
	env.add = func(c caseResult) {
		rep.add(c)
		done++
		of := ""
		if env.planned > 0 {
			of = fmt.Sprintf("/%d", env.planned)
		}
		fmt.Fprintf(progress, "conform %s %s [%d%s] %s: %s (%s)\n", spec.Name, c.Phase, done, of, c.Name, c.Result, seconds(time.Duration(c.Seconds*float64(time.Second))))
	}
	var phaseErr error
	for _, p := range conformPhases {
		if ctx.Err() != nil {
			break
		}
		done, env.planned = 0, 0
		if phaseErr = p.run(ctx, env); phaseErr != nil {
			break
		}
	}
	rep.Interrupted = ctx.Err() != nil
	rep.summary = newSummary(cmd, spec.Name, "fuzz-seed", env.seed, t.Spec.Release) // with the release the target detected
	rep.Seconds = time.Since(rep.Started).Seconds()
	switch {
	case rep.Interrupted:
		rep.Result = summaryInterrupted
	case phaseErr != nil || rep.Failed > 0 || rep.Errors > 0:
		rep.Result = summaryFail
	default:
		rep.Result = summaryPass
	}

	if err := printConform(out, rep, f.jsonOut); err != nil {
		return closeTarget(t, err)
	}
	if err := writeConformReports(rep, f.junit, f.out); err != nil {
		return closeTarget(t, &exitError{code: 1, err: err})
	}
	reportsWhere(progress, f.junit, f.out)
	var result error
	switch {
	case rep.Interrupted:
		result = errInterrupted
	case phaseErr != nil:
		result = &exitError{code: 1, err: phaseErr}
	case rep.Failed > 0 || rep.Errors > 0:
		result = errViolation
	}
	return closeTarget(t, result)
}

// runTracePhase replays the selected traces one after the other.
func runTracePhase(ctx context.Context, env *phaseEnv) error {
	all, err := suiteTraces()
	if err != nil {
		return err
	}
	var selected []*traces.Trace
	for _, tr := range all {
		if len(env.labels) == 0 || slices.ContainsFunc(traceLabels(tr), func(l string) bool { return slices.Contains(env.labels, l) }) {
			selected = append(selected, tr)
		}
	}
	env.planned = len(selected)
	for _, tr := range selected {
		if ctx.Err() != nil {
			return nil // interrupted: runConform reports it
		}
		v := env.target.Check(ctx, tr)
		if ctx.Err() != nil && v.Skip == "" && v.Divergence == nil {
			return nil // interrupted mid-trace: no verdict
		}
		c := caseResult{Phase: "traces", Name: traces.ShortName(tr), Path: tr.Path, Result: v.Result(), Seconds: v.Elapsed.Seconds()}
		switch c.Result {
		case resultPass:
			if id := tr.Header(traces.HeaderKnown); id != "" {
				env.known.add(id, "trace "+c.Name, 1, "")
			}
		case resultSkip:
			c.Message = v.Skip
		case resultFail:
			c.Message, c.Output = v.Divergence.Error(), v.Outs
		case resultError:
			c.Message, c.Output = v.Err.Error(), v.Outs
			if v.Divergence != nil {
				c.Message = v.Divergence.Error() + "\n" + c.Message
			}
		}
		env.add(c)
	}
	return nil
}

// printConform prints the summary table (or JSON) and, after the table,
// each failure's diff.
func printConform(w io.Writer, rep *conformReport, jsonOut bool) error {
	if jsonOut {
		return writeJSON(w, rep)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TRACE\tRESULT\tTIME\tNOTE")
	for _, c := range rep.Cases {
		note := ""
		if c.Result == resultSkip {
			note = c.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Result, seconds(time.Duration(c.Seconds*float64(time.Second))), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range rep.Cases {
		if c.Result == resultFail || c.Result == resultError {
			fmt.Fprintf(w, "\n--- %s %s\n%s\n", strings.ToUpper(c.Result), c.Name, c.Message)
		}
	}
	if lines := rep.Known.lines(rep.judged()); len(lines) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(lines, "\n"))
	}
	state := ""
	if rep.Interrupted {
		state = " (interrupted)"
	}
	_, err := fmt.Fprintf(w, "\n%s: %d passed, %d failed, %d errors, %d skipped in %s%s\n", rep.Target, rep.Passed, rep.Failed, rep.Errors, rep.Skipped,
		seconds(time.Duration(rep.Seconds*float64(time.Second))), state)
	return err
}

// writeConformReports writes the JUnit file and the --out directory.
func writeConformReports(rep *conformReport, junitPath, outDir string) error {
	write := func(path string, f func(io.Writer) error) error {
		if err := artifact.Write(path, f); err != nil {
			return fmt.Errorf("reports: %w", err)
		}
		return nil
	}
	junit := func(w io.Writer) error { return writeJUnit(w, rep) }
	if junitPath != "" {
		if err := write(junitPath, junit); err != nil {
			return err
		}
	}
	if outDir == "" {
		return nil
	}
	// --out holds every report, --junit's copy too
	if err := write(filepath.Join(outDir, "junit.xml"), junit); err != nil {
		return err
	}
	if err := write(filepath.Join(outDir, "summary.json"), func(w io.Writer) error { return writeJSON(w, rep) }); err != nil {
		return err
	}
	for _, c := range rep.Cases {
		if c.Result != resultFail && c.Result != resultError {
			continue
		}
		if err := write(filepath.Join(outDir, filepath.FromSlash(c.Name)+".txt"), func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%s on %s: %s\n%s\n\n%s", c.Name, rep.Target, c.Result, c.Message, c.outputText())
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// reportsWhere says on the progress stream where writeConformReports
// wrote the reports (nothing when none was asked for).
func reportsWhere(w io.Writer, junitPath, outDir string) {
	var at []string
	if junitPath != "" {
		at = append(at, "JUnit in "+junitPath)
	}
	if outDir != "" {
		what := "summary.json"
		if junitPath == "" {
			what += ", junit.xml"
		}
		at = append(at, what+" and each failed trace's output in "+outDir)
	}
	if len(at) > 0 {
		fmt.Fprintf(w, "conform: reports: %s\n", strings.Join(at, "; "))
	}
}

// listTraces prints the built-in traces with the targets their header
// names and their labels; with labels, only those with one of them. (It
// does not filter by target: which traces a target runs is decided when
// it runs them, see target.Skip, and upstream-stepped runs upstream's.)
func listTraces(w io.Writer, all []*traces.Trace, labels []string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TRACE\tTARGETS\tLABELS\tBUG")
	for _, tr := range all {
		on := strings.ReplaceAll(tr.Header(traces.HeaderTargets), " ", "")
		if on == "" {
			on = "all"
		}
		if len(labels) > 0 && !slices.ContainsFunc(traceLabels(tr), func(l string) bool { return slices.Contains(labels, l) }) {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", traces.ShortName(tr), on, strings.Join(traceLabels(tr), ","), tr.Header(traces.HeaderBug))
	}
	return tw.Flush()
}
