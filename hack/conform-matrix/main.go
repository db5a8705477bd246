// Command conform-matrix is `make conform-matrix`: cascade's conformance
// gate (hack/conform, `make conform`) run once per cell of releases ×
// datastores, one cell after the other (each cell already runs its
// targets -jobs at a time), then one table: per cell, the traces passed,
// failed and skipped over the suite targets, the fuzz runs passed, and
// the known races of the registry (model/known.go) the fuzz runs met,
// by ID, so that a release's own known bug (kubernetes#114603 before
// v1.34) shows where it is present and nowhere else.
//
// A cell's control-plane binaries are bin/kube/RELEASE (`make kube
// KUBE_VERSION=RELEASE`); a missing release is that cell's error, not the
// matrix's, and the table says how to build it. kine cells need bin/kine
// (`make kine`). It is a documented command, not part of CI, which runs
// the default release only.
//
// Exit status: 0 when every cell passed, 1 when one failed or errored, 2
// on bad flags, 130 when interrupted (the cell under way is stopped and
// the table lists it as interrupted).
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
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

// cell is one release on one datastore and, once run, its outcome.
type cell struct {
	release, datastore string
	out                string
	result             string // pass, fail, error, interrupted, or "" (not run)
	why                string
	wall               time.Duration
	traces             [3]int // passed, failed, skipped over the suite targets
	fuzzRuns, fuzzPass int
	known              map[string]int // registry ID -> times met by the fuzz runs
}

type config struct {
	cells            []*cell
	root, conformBin string
	conformArgs      []string
}

var releaseRE = regexp.MustCompile(`^v1\.\d+\.\d+$`)

func main() {
	releases := flag.String("releases", "v1.33.13,v1.37.2", "comma-separated releases (each built into bin/kube/RELEASE by `make kube KUBE_VERSION=RELEASE`)")
	datastores := flag.String("datastores", "etcd", "comma-separated datastores: etcd, kine")
	cells := flag.String("cells", "", "explicit cells RELEASE/DATASTORE, comma-separated (instead of -releases × -datastores), e.g. v1.33.13/etcd,v1.37.2/kine")
	out := flag.String("out", "out/conform-matrix", "directory for each cell's reports (OUT/RELEASE-DATASTORE)")
	conformBin := flag.String("conform", "bin/conform", "the gate's command (go build -o bin/conform ./hack/conform)")
	checks := flag.Int("fuzz-checks", 10, "random runs per fuzz target and cell")
	seed := flag.Uint64("fuzz-seed", 1, "rapid's seed, the same in every cell")
	jobs := flag.Int("jobs", 3, "runs at a time within a cell")
	targets := flag.String("targets", "model,upstream,impl,impl-stepped,upstream-stepped", "suite targets of every cell (make conform-matrix: $(CONFORM_TARGETS), the same)")
	fuzzTargets := flag.String("fuzz-targets", "upstream,impl", "fuzz targets of every cell")
	flag.Parse()
	c := config{root: *out, conformBin: *conformBin,
		conformArgs: []string{"-targets=" + *targets, "-fuzz-targets=" + *fuzzTargets, fmt.Sprintf("-fuzz-checks=%d", *checks),
			fmt.Sprintf("-fuzz-seed=%d", *seed), fmt.Sprintf("-jobs=%d", *jobs)}}
	var err error
	switch {
	case flag.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", flag.Arg(0))
	case *checks < 1 || *jobs < 1:
		err = errors.New("-fuzz-checks and -jobs must be positive")
	default:
		c.cells, err = parseCells(*cells, *releases, *datastores, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conform-matrix:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, c, os.Stderr))
}

// parseCells reads -cells, or the product of -releases and -datastores.
func parseCells(cells, releases, datastores, out string) ([]*cell, error) {
	var pairs [][2]string
	if cells != "" {
		for _, s := range splitList(cells) {
			rel, ds, ok := strings.Cut(s, "/")
			if !ok {
				return nil, fmt.Errorf("-cells: %q is not RELEASE/DATASTORE", s)
			}
			pairs = append(pairs, [2]string{rel, ds})
		}
	} else {
		for _, rel := range splitList(releases) {
			for _, ds := range splitList(datastores) {
				pairs = append(pairs, [2]string{rel, ds})
			}
		}
	}
	if len(pairs) == 0 {
		return nil, errors.New("no cells: name at least one release and one datastore")
	}
	var cs []*cell
	for _, p := range pairs {
		if !releaseRE.MatchString(p[0]) {
			return nil, fmt.Errorf("%q is not a release of the form v1.MINOR.PATCH", p[0])
		}
		if p[1] != "etcd" && p[1] != "kine" {
			return nil, fmt.Errorf("unknown datastore %q (want etcd or kine)", p[1])
		}
		if slices.ContainsFunc(cs, func(c *cell) bool { return c.release == p[0] && c.datastore == p[1] }) {
			continue
		}
		cs = append(cs, &cell{release: p[0], datastore: p[1], out: filepath.Join(out, p[0]+"-"+p[1])})
	}
	return cs, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// run runs every cell in turn and prints the table; it returns the exit
// status.
func run(ctx context.Context, c config, w io.Writer) int {
	begin := time.Now()
	for i, cl := range c.cells {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(w, "conform-matrix: cell %d/%d: %s on %s\n", i+1, len(c.cells), cl.release, cl.datastore)
		runCell(ctx, c, cl, w)
		fmt.Fprintf(w, "conform-matrix: cell %s on %s: %s in %s\n", cl.release, cl.datastore, cl.result, cl.wall.Round(time.Second))
	}
	interrupted := ctx.Err() != nil
	failed := printTable(w, c.cells)
	fmt.Fprintf(w, "conform-matrix: %d cells in %s; reports under %s\n", len(c.cells), time.Since(begin).Round(time.Second), c.root)
	switch {
	case interrupted:
		fmt.Fprintln(w, "conform-matrix: interrupted")
		return 130
	case failed:
		return 1
	}
	return 0
}

// runCell runs the gate on one cell and reads its reports.
func runCell(ctx context.Context, c config, cl *cell, w io.Writer) {
	start := time.Now()
	defer func() { cl.wall = time.Since(start) }()
	bin, err := filepath.Abs(filepath.Join("bin", "kube", cl.release))
	if err != nil {
		cl.result, cl.why = "error", err.Error()
		return
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			cl.result, cl.why = "error", fmt.Sprintf("%s lacks %s: run make kube KUBE_VERSION=%s", bin, b, cl.release)
			return
		}
	}
	if err := os.MkdirAll(cl.out, 0o755); err != nil {
		cl.result, cl.why = "error", err.Error()
		return
	}
	args := append(slices.Clone(c.conformArgs), "-kube-bin-dir="+bin, "-datastore="+cl.datastore, "-out="+cl.out)
	cmd := exec.CommandContext(ctx, c.conformBin, args...)
	log, err := artifact.Create(filepath.Join(cl.out, "conform.log"))
	if err != nil {
		cl.result, cl.why = "error", err.Error()
		return
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+bin)
	// the gate stops its own runs on SIGINT; give it time to
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		cl.result = "interrupted"
	case err == nil:
		cl.result = "pass"
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		cl.result, cl.why = "fail", "see "+log.Name()
	default:
		cl.result, cl.why = "error", fmt.Sprintf("%v; see %s", err, log.Name())
	}
	readReports(cl, start)
}

// readReports fills the cell's counts from the gate's reports written
// since start: summary-TARGET.json of each suite target and
// fuzz-TARGET.json of each fuzz target (README "Machine-readable
// summaries").
func readReports(cl *cell, since time.Time) {
	sums, _ := filepath.Glob(filepath.Join(cl.out, "summary-*.json"))
	for _, p := range sums {
		var all map[string]struct{ Passed, Failed, Errors, Skipped int }
		if !fresh(p, since) || readJSON(p, &all) != nil {
			continue
		}
		for _, s := range all {
			cl.traces[0] += s.Passed
			cl.traces[1] += s.Failed + s.Errors
			cl.traces[2] += s.Skipped
		}
	}
	fuzz, _ := filepath.Glob(filepath.Join(cl.out, "fuzz-*.json"))
	cl.known = map[string]int{}
	for _, p := range fuzz {
		var s struct {
			Runs   int      `json:"runs"`
			Passed int      `json:"runs_passed"`
			Known  []string `json:"known_races"`
		}
		if !fresh(p, since) || readJSON(p, &s) != nil {
			continue
		}
		cl.fuzzRuns += s.Runs
		cl.fuzzPass += s.Passed
		for _, k := range s.Known {
			id, _, _ := strings.Cut(k, ":")
			cl.known[id]++
		}
	}
}

func fresh(path string, since time.Time) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.ModTime().Before(since)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// printTable prints one row per cell; it reports whether any failed.
func printTable(w io.Writer, cells []*cell) (failed bool) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\nRELEASE\tDATASTORE\tRESULT\tTRACES PASSED\tFAILED\tSKIPPED\tFUZZ RUNS\tKNOWN RACES MET\tWALL")
	for _, cl := range cells {
		res := cl.result
		if res == "" {
			res = "not run"
		}
		if res == "fail" || res == "error" {
			failed = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d/%d\t%s\t%s\n", cl.release, cl.datastore, res,
			cl.traces[0], cl.traces[1], cl.traces[2], cl.fuzzPass, cl.fuzzRuns, knownList(cl.known), cl.wall.Round(time.Second))
	}
	_ = tw.Flush()
	for _, cl := range cells {
		if cl.why != "" {
			fmt.Fprintf(w, "conform-matrix: %s on %s: %s: %s\n", cl.release, cl.datastore, cl.result, cl.why)
		}
	}
	return failed
}

// knownList is "ID×N, ..." sorted by ID, or "-".
func knownList(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var ids []string
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s×%d", id, m[id]))
	}
	return strings.Join(parts, ", ")
}
