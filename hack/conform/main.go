// Command conform is `make conform`, cascade's conformance gate. It builds
// the scenario suite's test binary and bin/cascade, then runs the suite
// (scenarios/) once per target and a short `cascade fuzz` on each fuzz
// target, as separate processes, at most -jobs at a time: every one starts
// its own control plane, so none shares one with another, and most of
// their time is spent waiting on the control plane rather than computing.
// While they run it relays one line per spec and per fuzz run as each
// ends; at the end it prints one table (per phase: its counts, its wall
// time and where its report is) and exits 1 if anything failed, 2 on bad
// flags, 130 when interrupted.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cascade-k8s/cascade/harness/artifact"
	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/fuzz"
)

// suiteTargets are the targets of the scenario suite; fuzzTargets those
// `cascade fuzz` runs on an envtest control plane of its own.
var (
	suiteTargets = []string{"model", "upstream", "impl", "impl-stepped", "upstream-stepped"}
	fuzzTargets  = []string{"upstream", "impl", "impl-stepped"}
)

// weight orders the runs longest first, so that the longest do not start
// last: the CRD traces hold upstream and impl longest.
var weight = map[string]int{"suite upstream": 6, "suite impl": 5, "fuzz upstream": 4, "fuzz impl": 3, "fuzz impl-stepped": 2, "suite impl-stepped": 1, "suite upstream-stepped": 1}

type config struct {
	targets, fuzz []string
	checks        int
	seed          uint64
	out, binDir   string
	datastore     string // "" or "etcd": etcd
	jobs          int
	timeout       time.Duration
}

func main() {
	var c config
	targets := flag.String("targets", strings.Join(suiteTargets, ","), "comma-separated suite targets: "+strings.Join(suiteTargets, ", "))
	fuzz := flag.String("fuzz-targets", "upstream,impl", "comma-separated targets for `cascade fuzz` (empty: no fuzzing): "+strings.Join(fuzzTargets, ", "))
	flag.IntVar(&c.checks, "fuzz-checks", 10, "random runs per fuzz target")
	flag.Uint64Var(&c.seed, "fuzz-seed", 1, "rapid's seed for every fuzz target")
	flag.StringVar(&c.out, "out", "out/conform", "directory for the reports and logs")
	flag.StringVar(&c.binDir, "kube-bin-dir", "", "etcd, kube-apiserver and kube-controller-manager (default: KUBEBUILDER_ASSETS, then bin/kube/"+controlplane.KubeVersion+"); the runs judge the release of its kube-apiserver, and upstream and upstream-stepped that of its kube-controller-manager too (which may be another: version skew)")
	flag.StringVar(&c.datastore, "datastore", "etcd", "what the envtest targets' kube-apiserver stores objects in: etcd, or kine (bin/kine, 'make kine')")
	flag.IntVar(&c.jobs, "jobs", 3, "runs (suite targets and fuzz targets) at a time")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "give up on one run after this long")
	flag.Parse()
	var err error
	if c.targets, err = list("-targets", *targets, suiteTargets); err == nil {
		c.fuzz, err = list("-fuzz-targets", *fuzz, fuzzTargets)
	}
	switch {
	case err != nil:
	case flag.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", flag.Arg(0))
	case len(c.targets) == 0 && len(c.fuzz) == 0:
		err = errors.New("-targets and -fuzz-targets are both empty: nothing to run")
	case c.datastore != "etcd" && c.datastore != "kine":
		err = fmt.Errorf("-datastore: unknown datastore %q (want etcd or kine)", c.datastore)
	case c.jobs < 1 || c.checks < 1 || c.timeout <= 0:
		err = errors.New("-jobs, -fuzz-checks and -timeout must be positive")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conform:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, c, os.Stderr))
}

// list parses a comma-separated list of names from valid.
func list(flagName, s string, valid []string) ([]string, error) {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x == "" {
			continue
		}
		if !slices.Contains(valid, x) {
			return nil, fmt.Errorf("%s: unknown target %q (valid: %s)", flagName, x, strings.Join(valid, ", "))
		}
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out, nil
}

// phase is one process of the gate and, once it has ended, its outcome.
type phase struct {
	name   string // "suite upstream", "fuzz impl"
	args   []string
	stdout string // file for the process's stdout
	report string // where its reports are, for the table
	prefix string // put before each relayed stderr line
	log    bool   // stdout is a log: stderr goes there too
	// writes are the files the process writes itself, without
	// harness/artifact (Ginkgo's report, the suite's summary, a test
	// binary): checked before anything runs, recorded as cascade's after;
	// checks are files it writes through harness/artifact (cascade
	// fuzz's), only checked
	writes, checks []string

	summary string         // suite: the -summary file
	counts  map[string]int // suite: passed, failed, errors, skipped
	start   time.Time
	wall    time.Duration
	err     error
	ran     bool
}

// result is pass, fail (exit 1: a divergence or a failed spec), error (any
// other failure) or interrupted.
func (p *phase) result(interrupted bool) string {
	var exit *exec.ExitError
	switch {
	case !p.ran || (interrupted && p.err != nil):
		return "interrupted"
	case p.err == nil:
		return "pass"
	case errors.As(p.err, &exit) && exit.ExitCode() == 1:
		return "fail"
	}
	return "error"
}

// phases lists the runs of c, longest first.
func phases(c config) []*phase {
	var ps []*phase
	for _, t := range c.targets {
		p := &phase{name: "suite " + t, stdout: filepath.Join(c.out, "suite-"+t+".log"), log: true,
			summary: filepath.Join(c.out, "summary-"+t+".json"), report: filepath.Join(c.out, "junit-"+t+".xml")}
		p.writes = []string{p.summary, p.report}
		p.args = []string{filepath.Join(c.out, "scenarios.test"), "-test.run=^TestScenarios$", "-test.timeout=" + c.timeout.String(),
			"-targets=" + t, "-ginkgo.no-color", "-ginkgo.junit-report=" + p.report, "-summary=" + p.summary}
		if c.binDir != "" {
			p.args = append(p.args, "-kube-bin-dir="+c.binDir)
		}
		if c.datastore != "" && c.datastore != "etcd" {
			p.args = append(p.args, "-datastore="+c.datastore)
		}
		ps = append(ps, p)
	}
	for _, t := range c.fuzz {
		dir := filepath.Join(c.out, "fuzz-"+t)
		p := &phase{name: "fuzz " + t, stdout: dir + ".json", report: dir + ".json, " + dir + "/", prefix: "fuzz " + t + ": ",
			checks: fuzz.OutputFiles(dir)}
		p.args = []string{filepath.Join("bin", "cascade"), "fuzz", "--target", t, "--checks", fmt.Sprint(c.checks),
			"--seed", fmt.Sprint(c.seed), "--out", dir, "--json"}
		if c.binDir != "" {
			p.args = append(p.args, "--kube-bin-dir", c.binDir)
		}
		if c.datastore != "" && c.datastore != "etcd" {
			p.args = append(p.args, "--datastore", c.datastore)
		}
		ps = append(ps, p)
	}
	slices.SortStableFunc(ps, func(a, b *phase) int { return weight[b.name] - weight[a.name] })
	return ps
}

// run builds, runs the phases and prints the table; it returns the exit
// code.
func run(ctx context.Context, c config, w io.Writer) int {
	begin := time.Now()
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintln(w, "conform:", err)
		return 2
	}
	var builds []*phase
	if len(c.targets) > 0 {
		bin := filepath.Join(c.out, "scenarios.test")
		builds = append(builds, &phase{name: "build suite", prefix: "build suite: ",
			args: []string{"go", "test", "-c", "-o", bin, "./scenarios/"}, writes: []string{bin}})
	}
	if len(c.fuzz) > 0 {
		builds = append(builds, &phase{name: "build cascade", prefix: "build cascade: ",
			args: []string{"go", "build", "-o", filepath.Join("bin", "cascade"), "./cmd/cascade"}})
	}
	ps := phases(c)
	// refused now, before the builds: an output path holding a file
	// cascade did not write (harness/artifact)
	var paths []string
	for _, p := range append(slices.Clone(builds), ps...) {
		if p.stdout != "" {
			paths = append(paths, p.stdout)
		}
		paths = append(paths, p.writes...)
		paths = append(paths, p.checks...)
	}
	if err := artifact.Check(paths...); err != nil {
		fmt.Fprintln(w, "conform:", err)
		return 2
	}
	defer func() {
		for _, p := range append(builds, ps...) {
			for _, path := range p.writes {
				if err := artifact.Record(path); err != nil {
					fmt.Fprintln(w, "conform:", err)
				}
			}
		}
	}()
	fmt.Fprintf(w, "conform: %s\n", names(builds))
	// one after the other: each go command uses every core, and the second
	// finds most packages in the build cache
	runAll(ctx, builds, 1, c.timeout, w)
	for _, b := range builds {
		if b.err != nil {
			fmt.Fprintf(w, "conform: %s: %v\n", b.name, b.err)
			if ctx.Err() != nil {
				return 130
			}
			return 1
		}
	}
	built := time.Since(begin)
	fmt.Fprintf(w, "conform: built in %s; running %s, %d at a time; logs and reports in %s/\n", built.Round(100*time.Millisecond), names(ps), c.jobs, c.out)
	runAll(ctx, ps, c.jobs, c.timeout, w)
	for _, p := range ps {
		switch {
		case p.summary != "":
			p.counts = readCounts(p.summary, strings.TrimPrefix(p.name, "suite "), p.start)
		case strings.HasPrefix(p.name, "fuzz "):
			p.counts = readFuzzCounts(p.stdout, p.start)
		}
	}
	interrupted := ctx.Err() != nil
	failed := printTable(w, append(builds, ps...), interrupted)
	fmt.Fprintf(w, "conform: %s in %s (build %s, runs %s)\n", verdict(failed, interrupted), time.Since(begin).Round(100*time.Millisecond),
		built.Round(100*time.Millisecond), (time.Since(begin) - built).Round(100*time.Millisecond))
	switch {
	case interrupted:
		return 130
	case failed:
		return 1
	}
	return 0
}

func verdict(failed, interrupted bool) string {
	switch {
	case interrupted:
		return "interrupted"
	case failed:
		return "FAILED"
	}
	return "passed"
}

func names(ps []*phase) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.name)
	}
	return strings.Join(out, ", ")
}

// runAll runs the phases, at most jobs at a time, in order.
func runAll(ctx context.Context, ps []*phase, jobs int, timeout time.Duration, w io.Writer) {
	var out sync.Mutex // one relayed line at a time
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for _, p := range ps {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			p.ran, p.start = true, time.Now()
			p.err = p.exec(ctx, timeout, w, &out)
			p.wall = time.Since(p.start)
			out.Lock()
			fmt.Fprintf(w, "conform: %s ended: %s in %s\n", p.name, p.result(ctx.Err() != nil), p.wall.Round(100*time.Millisecond))
			out.Unlock()
		})
	}
	wg.Wait()
}

// exec runs the phase's process: stdout to p.stdout (or relayed, without
// one), stderr relayed line by line with p.prefix (and with p.log copied
// to p.stdout too). An interrupt reaches the process as one SIGINT, so
// that it cleans up; it is killed 30 s later.
func (p *phase) exec(ctx context.Context, timeout time.Duration, w io.Writer, mu *sync.Mutex) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.args[0], p.args[1:]...)
	// Its own process group, so that a terminal's ^C reaches it once,
	// through Cancel, and not a second time (cascade and Ginkgo both stop
	// at once, without cleaning up, on a second); SIGTERM if this process
	// dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	relay := &lineWriter{w: w, mu: mu, prefix: p.prefix}
	cmd.Stdout, cmd.Stderr = relay, relay
	if p.stdout != "" {
		f, err := artifact.Create(p.stdout)
		if err != nil {
			return err
		}
		defer f.Close()
		cmd.Stdout = f
		if p.log {
			cmd.Stderr = io.MultiWriter(relay, f)
		}
	}
	err := cmd.Run()
	relay.flush()
	return err
}

// lineWriter relays whole lines to w, each with a prefix, holding mu so
// that lines of concurrent processes do not mix.
type lineWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := slices.Index(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		l.emit(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.emit(string(l.buf))
		l.buf = nil
	}
}

func (l *lineWriter) emit(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, l.prefix+line)
}

// readCounts reads one target's counts from a suite's -summary file (nil
// when the suite did not get to write it: the file is missing or older
// than the run).
func readCounts(path, target string, since time.Time) map[string]int {
	if fi, err := os.Stat(path); err != nil || fi.ModTime().Before(since) {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var all map[string]map[string]float64
	if json.Unmarshal(data, &all) != nil || all[target] == nil {
		return nil
	}
	out := map[string]int{}
	for _, k := range []string{"passed", "failed", "errors", "skipped"} {
		out[k] = int(all[target][k])
	}
	return out
}

// readFuzzCounts reads a fuzz run's counts from its --json summary (nil
// when it did not get to write one in this run): passed are the runs that
// passed, failed the failing run, errors the runs the checker could not
// decide (inconclusive_runs); the schema is README's "Machine-readable
// summaries".
func readFuzzCounts(path string, since time.Time) map[string]int {
	if fi, err := os.Stat(path); err != nil || fi.ModTime().Before(since) {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var s struct {
		Runs         *int     `json:"runs"`
		Passed       int      `json:"runs_passed"`
		Inconclusive []string `json:"inconclusive_runs"`
	}
	if json.Unmarshal(data, &s) != nil || s.Runs == nil {
		return nil
	}
	return map[string]int{"passed": s.Passed, "failed": *s.Runs - s.Passed - len(s.Inconclusive), "errors": len(s.Inconclusive)}
}

// printTable prints one row per phase and, for each that did not pass,
// where to look; it reports whether any failed.
func printTable(w io.Writer, ps []*phase, interrupted bool) (failed bool) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPHASE\tRESULT\tPASSED\tFAILED\tERRORS\tSKIPPED\tWALL\tREPORT")
	for _, p := range ps {
		res := p.result(interrupted)
		if res != "pass" && res != "interrupted" {
			failed = true
		}
		counts := "\t\t\t"
		if p.counts != nil {
			counts = fmt.Sprintf("%d\t%d\t%d\t%d", p.counts["passed"], p.counts["failed"], p.counts["errors"], p.counts["skipped"])
		}
		wall := "-"
		if p.ran {
			wall = p.wall.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.name, res, counts, wall, p.report)
	}
	_ = tw.Flush()
	for _, p := range ps {
		if r := p.result(interrupted); r == "fail" || r == "error" {
			fmt.Fprintf(w, "conform: %s: %s (%v)", p.name, r, p.err)
			if p.stdout != "" {
				fmt.Fprintf(w, "; its whole output is in %s", p.stdout)
			}
			fmt.Fprintln(w)
		}
	}
	return failed
}
