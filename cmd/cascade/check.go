package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cascade-k8s/cascade/harness/artifact"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/model/check"
)

type checkFlags struct {
	preset, universe               string
	setup, ops, bugs, constraints  []string
	expect                         []string
	coalesce, noSymmetry           bool
	noReduction, reduction         bool
	maxDepth, maxStates, workers   int
	out                            string
	jsonOut, quiet, strict         bool
	listBugs, listProps, listScope bool
	listKnown, listUniverses       bool
	classes                        bool
	expectStates                   int64
	kubeVersion, kcmVersion        string
	shard                          string
	shards                         int
}

// maxCheckWorkers bounds --workers: a worker holds its own decoder,
// output chunks and frontier share, so a count far above any machine's
// cores only costs memory (--workers 3000000 took 7.9 GB before any
// search), and 1024 is above any.
const maxCheckWorkers = 1024

func newCheckCmd() *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check [--preset NAME | --universe NAME | --setup CMD... --op CMD...] [flags]",
		Short: "Explore the model exhaustively and write the shortest counterexamples",
		Long: `check explores every interleaving of a bounded scope of the model breadth-first
and reports, for each property it breaks, the shortest path to a violation,
written as a trace file that 'cascade replay', the datadriven tests and the
scenario suite can run again.

A scope is a preset (--preset, see --list-presets) or built from flags:
--setup commands build the initial state (not explored; 'settle' allowed),
--op commands are client requests the environment may send, each at most once,
in any order, interleaved with every GC, controller and informer step.
A universe (--universe, see --list-universes) is bounds instead of a scope:
the search starts from every initial ownership graph the bounds allow, up to
symmetry (objects of one kind, namespace and create arguments are
interchangeable), and sends up to the universe's budget of requests from its
op alphabet, repeats allowed. It reports the shortest counterexample of every
violation class (property, known race or none, kind of step that broke it),
each written as a trace; an unclassified class fails the run. A universe is
searched with partial-order reduction (sleep sets: a GC step that leaves the
store as it was, an informer delivery, a virtual event, a discovery sync or an
attemptToDelete pass, is not taken right after a step it commutes with when
the search takes it before that step instead): the same distinct states,
violations and counterexamples, fewer transitions; the output says how many
were skipped. --reduction searches a preset or custom scope with it too (by
default they are searched unreduced: every transition taken and counted, but
the successor of a step the sleep sets put to sleep, reached elsewhere by the
same path, is not claimed again). --no-reduction is the plain search: no sleep
sets at all, every transition applied, checked and claimed; it does not rest
on the independence relation, so it is the oracle for the other two.

--shard i/n explores only every n-th of a universe's initial graphs from the
i-th; --shards n takes i from $JOB_COMPLETION_INDEX, as in an Indexed Job's
pod. The shards together find exactly the unsharded search's violation
classes, each with a counterexample as short; a state reached from the
graphs of two shards is explored by both. A shard's --out defaults to
out/counterexamples/shard-I, its --json names its graphs and carries each
class's trace, and ops never reached are judged over all the shards by
'cascade campaign merge' (README "Campaigns").

Properties (--list-properties) are checked on every transition (always),
in every quiescent state (quiescent liveness) or must be witnessed at least
once (sometimes; a preset that never witnesses one it expects is vacuous and
fails). --bug switches on a catalogued bug (--list-bugs). Violations that are
documented upstream races are reported as known, naming their entry in the
known-race registry (--list-known), and do not fail the run unless --strict.
--kube-version picks the Kubernetes release the model follows (default: the
release of the kube-apiserver binary in use: ` + releaseInUse + `); some races are
known only in the releases that have them (kubernetes#114603 before v1.34.0:
cascade check --preset owner-swap --kube-version v1.33.13).

Progress goes to stderr once a second; the result goes to stdout as text or
--json (the schema conform and fuzz share; see README). An interrupt ends the
search at once, writing no result (with --json, a summary whose result is
"interrupted", and a shard's slice).

Examples:
  cascade check --preset orphan-adoption --bug adopt-without-recheck
  cascade check --preset all-policies --json
  cascade check --universe pair
  cascade check --setup 'create cm/a' --setup 'create cm/b owner=cm/a,block' --setup settle \
                --op 'delete cm/a propagation=Foreground' --constraint 'events<=4'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCheck(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.preset, "preset", "", "named scope (see --list-presets)")
	fl.StringVar(&f.universe, "universe", "", "named universe: every initial graph of its bounds (see --list-universes)")
	fl.StringArrayVar(&f.setup, "setup", nil, "setup command for a custom scope (repeatable; trace syntax, or 'settle')")
	fl.StringArrayVar(&f.ops, "op", nil, "client request the environment may send once (repeatable)")
	fl.StringArrayVar(&f.bugs, "bug", nil, "switch on a catalogued bug (repeatable; see --list-bugs)")
	fl.StringArrayVar(&f.constraints, "constraint", nil, "prune states beyond METRIC<=N or METRIC<N (repeatable; metrics: "+strings.Join(check.MetricNames(), ", ")+", objects.KIND)")
	fl.StringArrayVar(&f.expect, "expect", nil, "reachability property the scope must witness (repeatable)")
	fl.BoolVar(&f.coalesce, "coalesce", false, "let informer relists skip superseded events (presets set their own)")
	fl.BoolVar(&f.noSymmetry, "no-symmetry", false, "do not merge states that differ only in UID assignment")
	fl.BoolVar(&f.noReduction, "no-reduction", false, "the plain search: no partial-order reduction (sleep sets) of any kind, every transition applied, checked and claimed; a universe uses reduction unless this, a preset or custom scope only with --reduction, and otherwise skips only the claims of successors the sleep sets prove reached elsewhere")
	fl.BoolVar(&f.reduction, "reduction", false, "search a preset or custom scope with partial-order reduction too (sleep sets; the same states and counterexamples, fewer transitions; universes use it unless --no-reduction)")
	fl.IntVar(&f.maxDepth, "max-depth", 0, "stop expanding at this depth (0: unbounded)")
	fl.IntVar(&f.maxStates, "max-states", 0, "stop at the end of the breadth-first level where the distinct states reach this many (0: unbounded)")
	fl.IntVar(&f.workers, "workers", min(runtime.GOMAXPROCS(0), maxCheckWorkers), fmt.Sprintf("parallel workers (1 to %d; default: the cores Go may use)", maxCheckWorkers))
	fl.Int64Var(&f.expectStates, "expect-states", 0, "about how many distinct states the search will store (from an earlier run): the visited table starts that large instead of doubling its way there, as SPIN's -w sizes pan's; changes no result (0: unknown)")
	fl.StringVar(&f.out, "out", "out/counterexamples", "directory for counterexample trace files (a shard's default: out/counterexamples/shard-I); a file there cascade did not write is never replaced")
	fl.BoolVar(&f.jsonOut, "json", false, "print the result as JSON")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	fl.BoolVar(&f.strict, "strict", false, "fail on known upstream races too")
	fl.BoolVar(&f.listBugs, "list-bugs", false, "list the bug catalogue and exit")
	fl.BoolVar(&f.listProps, "list-properties", false, "list the named properties and exit")
	fl.BoolVar(&f.listScope, "list-presets", false, "list the preset scopes and exit")
	fl.BoolVar(&f.listKnown, "list-known", false, "list the registry of known upstream races and exit")
	registerKubeVersion(fl, &f.kubeVersion)
	registerKCMVersion(fl, &f.kcmVersion)
	fl.BoolVar(&f.classes, "classes", false, "report and write the shortest counterexample of every violation class, not only of every property (always on for --universe)")
	fl.BoolVar(&f.listUniverses, "list-universes", false, "list the named universes with their bounds and exit")
	registerShard(fl, &f.shard, &f.shards, "a universe's initial graphs, i/n counting from 0: every n-th graph from the i-th (the shards together find every violation class the unsharded search finds")
	return cmd
}

func runCheck(cmd *cobra.Command, f *checkFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var lists []string
	for _, l := range []struct {
		on   bool
		name string
	}{{f.listBugs, "--list-bugs"}, {f.listProps, "--list-properties"}, {f.listScope, "--list-presets"}, {f.listKnown, "--list-known"}, {f.listUniverses, "--list-universes"}} {
		if l.on {
			lists = append(lists, l.name)
		}
	}
	if len(lists) > 1 {
		return usageErr("%s: give one list at a time", strings.Join(lists, " and "))
	}
	switch {
	case f.listBugs:
		return listBugs(stdout)
	case f.listProps:
		return listProperties(stdout)
	case f.listScope:
		return listPresets(stdout)
	case f.listKnown:
		return listKnown(stdout)
	case f.listUniverses:
		return listUniverses(stdout)
	}
	scope, err := buildScope(f)
	if err != nil {
		return err
	}
	shard, graphs, err := shardScope(cmd, f, &scope)
	if err != nil {
		return err
	}
	// the model needs no binaries: a release named wins over theirs
	if f.kubeVersion != "" {
		scope.Release, err = parseKubeVersion(f.kubeVersion)
	} else if scope.Release, _, err = resolveRelease("", "", "", false); err != nil {
		// binaries that cannot be read leave the model, which needs
		// none, on the default release
		fmt.Fprintf(stderr, "check: %v: judging the default release, %s (--kube-version names another)\n", err, model.DefaultRelease)
		scope.Release, err = model.DefaultRelease, nil
	}
	if err == nil {
		scope.Release, _, err = withKCMVersion(scope.Release, f.kcmVersion)
	}
	if err != nil {
		return err
	}
	if !f.quiet {
		fmt.Fprintln(stderr, "check: "+releaseNote(scope.Release))
	}
	// --no-reduction is the plain search: no sleep sets at all, not even
	// the unreduced search's skipped claims (check.Options.Plain)
	opts := check.Options{Workers: f.workers, Plain: f.noReduction, ExpectStates: f.expectStates}
	if !f.quiet {
		opts.Progress = func(p check.Progress) {
			fmt.Fprintf(stderr, "check %s: states=%d distinct=%d depth=%d queue=%d %.0f distinct/s\n", scope.Name, p.Generated, p.Distinct, p.Depth, p.Queue, p.StatesPerSecond())
		}
	}
	// the search takes no context: on an interrupt cascade exits without
	// waiting for it, before any result is written; --json prints only
	// the shared summary then, result interrupted, so that a reader of
	// stdout gets JSON either way
	start := time.Now()
	type outcome struct {
		res *check.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := check.Run(scope, opts)
		done <- outcome{res, err}
	}()
	var o outcome
	select {
	case <-cmd.Context().Done():
		if f.jsonOut {
			s := newSummary(cmd, "model", "", 0, scope.Release)
			s.Reproduce = shardReproduce(s.Reproduce, shard)
			s.Result = summaryInterrupted
			if shard.Count == 0 {
				s.Seconds = time.Since(start).Seconds()
				_ = writeJSON(stdout, s)
				return errInterrupted
			}
			// a shard's summary names its slice, so that campaign merge
			// reports the campaign interrupted rather than the file
			none := &check.Result{Scope: scope.Name}
			out := newCheckSummary(s, none, nil, nil)
			out.Seconds = time.Since(start).Seconds()
			addShard(&out, none, shard, scope, graphs)
			_ = writeJSON(stdout, out)
		}
		return errInterrupted
	case o = <-done:
	}
	res := o.res
	if o.err != nil {
		return usageErr("%v", o.err)
	}
	// A trace that cannot be written (its path holds a file cascade did
	// not write) is still printed, with the verdict; the error comes last.
	files, writeErr := writeCounterexamples(f.out, scope, res)
	classes := f.classes || f.universe != ""
	classFiles := map[string]string{}
	if classes {
		var err error
		classFiles, err = writeClassTraces(f.out, scope, res)
		writeErr = errors.Join(writeErr, err)
	}
	// a shard's ops and expectations are judged over all the shards, by
	// campaign merge: one slice of the graphs may never reach an op
	failed := shard.Count == 0 && (len(res.Vacuous) > 0 || res.VacuousScope() != "")
	for _, v := range res.Violations {
		failed = failed || v.Known == "" || f.strict
	}
	if f.jsonOut {
		s := newSummary(cmd, "model", "", 0, scope.Release)
		s.Reproduce = shardReproduce(s.Reproduce, shard)
		s.Result = summaryPass
		if failed {
			s.Result = summaryFail
		}
		out := newCheckSummary(s, res, files, classFiles)
		if shard.Count > 0 {
			addShard(&out, res, shard, scope, graphs)
		}
		err = writeJSON(stdout, out)
	} else {
		err = printText(stdout, res, files, shard.Count == 0)
		if err == nil && classes {
			err = printClasses(stdout, res, classFiles)
		}
		if err == nil && shard.Count > 0 {
			printShard(stdout, shard, scope, graphs)
		}
	}
	if err != nil {
		return err
	}
	if writeErr != nil {
		return writeErr
	}
	if failed {
		return errViolation
	}
	return nil
}

func buildScope(f *checkFlags) (check.Scope, error) {
	var scope check.Scope
	switch {
	case f.preset != "" && (len(f.setup) > 0 || len(f.ops) > 0):
		return scope, usageErr("--preset cannot be combined with --setup or --op")
	case f.universe != "" && (f.preset != "" || len(f.setup) > 0 || len(f.ops) > 0):
		return scope, usageErr("--universe cannot be combined with --preset, --setup or --op")
	case f.universe != "":
		u, err := check.UniverseByName(f.universe)
		if err != nil {
			return scope, usageErr("%v", err)
		}
		scope = u.Scope()
	case f.preset != "":
		p, err := check.Preset(f.preset)
		if err != nil {
			return scope, usageErr("%v", err)
		}
		scope = p
	case len(f.setup) > 0 || len(f.ops) > 0:
		scope = check.Scope{Name: customName(f), Setup: f.setup, Ops: f.ops, FoundBy: customCommand(f)}
	default:
		return scope, usageErr("give a scope: --preset NAME (see --list-presets) or --setup/--op commands")
	}
	scope.Symmetry = !f.noSymmetry
	if f.reduction && f.noReduction {
		return scope, usageErr("--reduction and --no-reduction contradict each other: give one")
	}
	scope.Reduction = (scope.Reduction || f.reduction) && !f.noReduction
	scope.Coalesce = scope.Coalesce || f.coalesce
	scope.MaxDepth, scope.MaxStates = f.maxDepth, f.maxStates
	scope.Expect = append(scope.Expect, f.expect...)
	for _, name := range f.bugs {
		b, err := model.BugByName(name)
		if err != nil {
			return scope, usageErr("--bug: %v", err)
		}
		scope.Bugs = scope.Bugs.With(b)
	}
	for _, c := range f.constraints {
		con, err := check.ParseConstraint(c)
		if err != nil {
			return scope, usageErr("--constraint: %v", err)
		}
		scope.Constraints = append(scope.Constraints, con)
	}
	if f.maxDepth < 0 || f.maxStates < 0 || f.workers < 1 {
		return scope, usageErr("--max-depth and --max-states must be >= 0 and --workers >= 1")
	}
	if f.workers > maxCheckWorkers {
		return scope, usageErr("--workers %d: at most %d (each worker keeps its own buffers; more workers than cores only take turns)", f.workers, maxCheckWorkers)
	}
	if f.expectStates < 0 || f.expectStates > check.MaxExpectStates {
		return scope, usageErr("--expect-states must be 0 (unknown) to %d, got %d", check.MaxExpectStates, f.expectStates)
	}
	return scope, nil
}

// writeCounterexamples writes each trace to DIR/<scope>[-<bugs>]-<property>.trace.
func writeCounterexamples(dir string, scope check.Scope, res *check.Result) (map[string]string, error) {
	var ts []traceFile
	for _, v := range res.Violations {
		ts = append(ts, traceFile{key: v.Property, suffix: strings.ReplaceAll(v.Property, " ", "-"), text: v.Trace})
	}
	return writeTraceFiles(dir, scope, ts)
}

// traceFile is a counterexample to write: its key in writeTraceFiles's
// map, the last part of its file name, and its text.
type traceFile struct{ key, suffix, text string }

// writeTraceFiles writes each trace to DIR/<scope>[-<bugs>]-<suffix>.trace
// and maps its key to the path. A trace that cannot be written is left
// out of the map, and its error joined to the one returned; the others
// are written.
func writeTraceFiles(dir string, scope check.Scope, ts []traceFile) (map[string]string, error) {
	files := map[string]string{}
	if len(ts) == 0 {
		return files, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return files, fmt.Errorf("cannot create --out directory: %v", err)
	}
	prefix := scope.Name
	if scope.Bugs != 0 {
		prefix += "-" + strings.ReplaceAll(scope.Bugs.String(), ",", "+")
	}
	var errs []error
	for _, t := range ts {
		path := filepath.Join(dir, prefix+"-"+t.suffix+".trace")
		if err := artifact.WriteFile(path, []byte(t.text)); err != nil {
			errs = append(errs, fmt.Errorf("cannot write counterexample: %v", err))
			continue
		}
		files[t.key] = path
	}
	return files, errors.Join(errs...)
}

// customCommand is the found-by command of a custom scope's
// counterexamples: its setup, ops and the flags that shape its search
// (the bugs and the release are added by the checker).
func customCommand(f *checkFlags) string {
	args := []string{"cascade check"}
	for _, s := range f.setup {
		args = append(args, "--setup", shellQuote(s))
	}
	for _, o := range f.ops {
		args = append(args, "--op", shellQuote(o))
	}
	for _, c := range f.constraints {
		args = append(args, "--constraint", shellQuote(c))
	}
	if f.coalesce {
		args = append(args, "--coalesce")
	}
	return strings.Join(args, " ")
}

// customName names a custom scope "custom-" and 8 hex digits of its
// command (customCommand: setup, ops and the flags that shape the
// search), so that two custom scopes' counterexamples in one --out do
// not take each other's file names.
func customName(f *checkFlags) string {
	h := fnv.New32a()
	_, _ = io.WriteString(h, customCommand(f))
	return fmt.Sprintf("custom-%08x", h.Sum32())
}

// reductionLine says whether the search used partial-order reduction
// and, when it did, how many transitions it skipped: the unreduced
// search takes transitions+skipped and finds the same distinct states.
func reductionLine(res *check.Result) string {
	if !res.Reduced {
		return "reduction: none"
	}
	return fmt.Sprintf("reduction: sleep sets, %d transitions skipped (unreduced: %d distinct states, %d transitions)",
		res.Slept, res.Distinct, res.Generated+res.Slept)
}

// printText prints the result; vacuity says whether it judges the
// scope's vacuity (a shard's is judged over all the shards).
func printText(w io.Writer, res *check.Result, files map[string]string, vacuity bool) error {
	rate := float64(res.Distinct) / max(res.Elapsed.Seconds(), 1e-9)
	complete := "complete"
	if !res.Complete {
		complete = "INCOMPLETE (a bound cut the search)"
	}
	fmt.Fprintf(w, "scope %s, mode %s: %d distinct states, %d transitions, depth %d, %s, %s (%.0f distinct states/s)\n",
		res.Scope, res.Bugs, res.Distinct, res.Generated, res.Depth, complete, res.Elapsed.Round(time.Millisecond), rate)
	fmt.Fprintf(w, "fingerprint collision probability: %.2g\n", res.CollisionProbability)
	fmt.Fprintln(w, reductionLine(res))
	violated := map[string]*check.Counterexample{}
	for _, v := range res.Violations {
		violated[v.Property] = v
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROPERTY\tKIND\tRESULT")
	for _, p := range model.Properties {
		verdict := "holds"
		switch {
		case p.Kind == model.Sometimes && res.Witnessed[p.Name]:
			verdict = "witnessed"
		case p.Kind == model.Sometimes:
			verdict = "not witnessed"
			for _, vp := range res.Vacuous {
				switch {
				case vp == p.Name && !res.Complete:
					verdict = "NOT WITNESSED within the bound that cut the search (--max-depth, --max-states)"
				case vp == p.Name:
					verdict = "NOT WITNESSED: the scope is vacuous for it"
				}
			}
		case violated[p.Name] != nil && violated[p.Name].Known != "":
			v := violated[p.Name]
			verdict = fmt.Sprintf("violated, %s (%s) -> %s", knownRaceWord(v.Known), plural(len(v.Steps), "step"), files[p.Name])
		case violated[p.Name] != nil:
			v := violated[p.Name]
			verdict = fmt.Sprintf("VIOLATED in %s -> %s", plural(len(v.Steps), "step"), files[p.Name])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.Kind, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if why := res.VacuousScope(); why != "" && vacuity {
		fmt.Fprintf(w, "VACUOUS: %s; the properties above say nothing about it (exit 1)\n", why)
	}
	for _, v := range res.Violations {
		fmt.Fprintf(w, "\n%s: %s\n", v.Property, v.Message)
		for i, s := range v.Steps {
			fmt.Fprintf(w, "  %2d  %s\n", i+1, s)
		}
	}
	return nil
}

// checkViolation is a violation, or a violation class's shortest
// counterexample, in checkSummary.
type checkViolation struct {
	Property string `json:"property"`
	Class    string `json:"class,omitempty"`
	Root     string `json:"initial_graph,omitempty"`
	// RootIndex is a class's initial graph's number in its universe
	// (cascade check --list-universes counts them), for a universe.
	RootIndex *int     `json:"initial_graph_index,omitempty"`
	Known     string   `json:"known,omitempty"`
	Message   string   `json:"message"`
	Steps     []string `json:"steps"`
	Trace     string   `json:"trace_file"`
	// TraceText is the trace itself, in a shard's summary, so that a
	// campaign's merge has it where the shard's --out is gone.
	TraceText string `json:"trace,omitempty"`
}

// checkSummary is `cascade check --json`: the shared summary, then the
// search's.
type checkSummary struct {
	summary
	Scope                string           `json:"scope"`
	Mode                 string           `json:"mode"`
	Distinct             int64            `json:"distinct_states"`
	Generated            int64            `json:"transitions"`
	Reduction            string           `json:"reduction"`
	Skipped              int64            `json:"transitions_skipped"`
	Depth                int              `json:"depth"`
	Complete             bool             `json:"complete"`
	StatesPerSecond      float64          `json:"distinct_states_per_second"`
	CollisionProbability float64          `json:"collision_probability"`
	Violations           []checkViolation `json:"violations"`
	Roots                int              `json:"initial_states"`
	Classes              []checkViolation `json:"classes"`
	Witnessed            []string         `json:"witnessed"`
	Vacuous              []string         `json:"vacuous"`
	VacuousScope         string           `json:"vacuous_scope,omitempty"`
	NeverReached         []string         `json:"never_reached"`
	// Shard, ShardCount, Graphs and GraphIndexes: a shard's summary
	// (--shard, --shards) names its slice (i of n), its universe's initial
	// graphs and the numbers of those it started from.
	Shard        *int  `json:"shard,omitempty"`
	ShardCount   int   `json:"shard_count,omitempty"`
	Graphs       int   `json:"initial_graphs,omitempty"`
	GraphIndexes []int `json:"graph_indexes,omitempty"`
}

func newCheckSummary(s summary, res *check.Result, files, classFiles map[string]string) checkSummary {
	s.Seconds = res.Elapsed.Seconds()
	out := checkSummary{summary: s, Scope: res.Scope, Mode: res.Bugs.String(), Distinct: res.Distinct, Generated: res.Generated, Depth: res.Depth, Complete: res.Complete,
		Reduction: map[bool]string{false: "none", true: "sleep-sets"}[res.Reduced], Skipped: res.Slept,
		VacuousScope: res.VacuousScope(), NeverReached: append([]string{}, res.NeverReached...),
		StatesPerSecond:      float64(res.Distinct) / max(res.Elapsed.Seconds(), 1e-9),
		CollisionProbability: res.CollisionProbability, Violations: []checkViolation{}, Witnessed: []string{}, Vacuous: append([]string{}, res.Vacuous...)}
	for _, v := range res.Violations {
		out.Violations = append(out.Violations, checkViolation{Property: v.Property, Known: v.Known, Message: v.Message, Steps: v.Steps, Trace: files[v.Property]})
	}
	out.Roots, out.Classes = res.Roots, []checkViolation{}
	for _, v := range res.Classes {
		cv := checkViolation{Property: v.Property, Class: v.Class, Root: v.Root, Known: v.Known, Message: v.Message, Steps: v.Steps, Trace: classFiles[v.Class]}
		if v.Root != "" {
			cv.RootIndex = &v.RootIndex
		}
		out.Classes = append(out.Classes, cv)
	}
	for p, ok := range res.Witnessed {
		if ok {
			out.Witnessed = append(out.Witnessed, p)
		}
	}
	sort.Strings(out.Witnessed)
	return out
}

func listBugs(w io.Writer) error {
	for _, b := range model.AllBugs() {
		info := model.Bugs[b]
		fmt.Fprintf(w, "%s\n  %s\n  known-bugs %s; upstream %s\n  breaks %q; preset %s\n\n", info.Name, info.Doc, info.KnownBug, info.Upstream, info.Breaks, check.BugPreset[b])
	}
	return nil
}

// listKnown prints the known-race registry (model.KnownRaces): each
// entry's ID, upstream reference, the properties it relaxes, the
// evidence that admits it (and why a window, where one), its sites and
// its fixtures.
func listKnown(w io.Writer) error {
	for _, k := range model.KnownRaces {
		fmt.Fprintf(w, "%s\n  %s\n  upstream: %s\n  relaxes: %s\n  evidence: %s\n", k.ID, k.Doc, k.Upstream, quoteAll(k.Relaxes), evidenceList(&k))
		if k.Window != "" {
			fmt.Fprintf(w, "  window, because: %s\n", k.Window)
		}
		if !k.Releases.All() {
			fmt.Fprintf(w, "  releases: %s\n", knownReleases(&k))
		}
		fmt.Fprintf(w, "  sites: %s\n  fixtures: %s\n\n", strings.Join(k.Sites, "; "), strings.Join(k.Fixtures, ", "))
	}
	return nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func evidenceList(k *model.KnownRace) string {
	e := make([]string, len(k.Evidence))
	for i, x := range k.Evidence {
		e[i] = x.String()
	}
	return strings.Join(e, ", ")
}

// knownReleases says which releases carry a known race, and of which
// component when the race is bounded to one's (model.KnownRace.Component).
func knownReleases(k *model.KnownRace) string {
	if k.Releases.All() || k.Component == model.EveryComponent {
		return k.Releases.String()
	}
	return k.Component.String() + " " + k.Releases.String()
}

// knownTable renders the registry as the README's table of known races.
func knownTable() string {
	var b strings.Builder
	b.WriteString("| ID | Upstream | Releases | Relaxes | Evidence | Fixtures |\n|---|---|---|---|---|---|\n")
	for _, k := range model.KnownRaces {
		ev := evidenceList(&k)
		if k.Window != "" {
			ev += " (window: " + k.Window + ")"
		}
		fx := make([]string, len(k.Fixtures))
		for i, f := range k.Fixtures {
			fx[i] = "`" + f + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.ID, k.Upstream, knownReleases(&k), quoteAll(k.Relaxes), ev, strings.Join(fx, ", "))
	}
	return b.String()
}

func listProperties(w io.Writer) error {
	for _, p := range model.Properties {
		fmt.Fprintf(w, "%s (%s)\n  %s\n\n", p.Name, p.Kind, p.Doc)
	}
	return nil
}

func listPresets(w io.Writer) error {
	for _, p := range check.Presets {
		fmt.Fprintf(w, "%s\n  %s\n", p.Name, p.Doc)
		for _, s := range p.Setup {
			fmt.Fprintf(w, "    setup  %s\n", s)
		}
		for _, o := range p.Ops {
			fmt.Fprintf(w, "    op     %s\n", o)
		}
		if p.Coalesce {
			fmt.Fprintf(w, "    informer relists may skip events\n")
		}
		fmt.Fprintln(w)
	}
	// the benchmark family, made for any N (check.Fanout)
	fmt.Fprintf(w, "fanout-N (N from 1 to 20)\n  One owner with N dependents deleted in the background: every interleaving of the GC's deliveries, work items and DELETEs (make bench-check's scope; about five times the states per dependent).\n")
	return nil
}
