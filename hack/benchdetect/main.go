// Command benchdetect is `make bench-detect`: for every bug of the
// catalogue that impl can inject, it runs stepped random runs (`cascade
// fuzz --target impl-stepped --inject BUG`) with several seeds and prints
// whether fuzzing found the bug, the median time to find it, and the
// shrunk run's length against the model checker's BFS-minimal
// counterexample (traces/counterexamples/BUG.trace).
//
// A failure counts as the bug's when the model with the same switch
// reproduces it and the model alone does not (the surrogate shrinker's
// test, after which impl confirms the shrunk run), and its trace replays
// clean on impl without the bug. One control plane serves every run;
// each seed gets a time budget, and a seed that finds nothing within it
// counts as not found. Informer relists
// that skip events (coalesce steps) are offered only for the bug whose
// trigger is one (forget-unobserved-virtual): with them on everywhere the
// bug-free model itself reaches stuck foreground finalizers (noted in the
// README), which would be reported for every bug alike.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/traces"
)

func main() {
	seeds := flag.Int("seeds", 5, "seeds per bug")
	budget := flag.Duration("budget", 90*time.Second, "time budget per seed")
	only := flag.String("bugs", "", "comma-separated bugs (default: every injectable one)")
	binDir := flag.String("kube-bin-dir", "", "control-plane binaries")
	verbose := flag.Bool("v", false, "print every run's progress and the shrinker's on stderr")
	flag.Parse()
	// controller-runtime's webhook logs otherwise complain, with a stack,
	// that no logger was set
	ctrllog.SetLogger(logr.Discard())
	if *verbose {
		progressOut = os.Stderr
	}
	if err := run(*seeds, *budget, *only, *binDir); err != nil {
		fmt.Fprintln(os.Stderr, "bench-detect:", err)
		os.Exit(1)
	}
}

// progressOut receives the runs' progress lines (-v).
var progressOut io.Writer

func run(seeds int, budget time.Duration, only, binDir string) error {
	ctx := context.Background()
	t, err := target.Start(ctx, target.Spec{Name: target.ImplStepped, BinDir: binDir, Log: os.Stderr})
	if err != nil {
		return err
	}
	defer func() { _ = t.Close() }()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "bug\tfound\tmedian time to find (all seeds)\tshrunk steps (median of found)\tBFS-minimal steps\tratio\tfailure")
	for _, b := range bugs.All {
		if !b.Injectable() {
			fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\tnot injectable: a real kube-apiserver's validation cannot be switched off\n", b)
			continue
		}
		if only != "" && !slices.Contains(strings.Split(only, ","), string(b)) {
			continue
		}
		var times []time.Duration
		var lengths []int
		kind := ""
		for s := 1; s <= seeds; s++ {
			set := bugs.Of(b)
			surrogate, err := fuzz.ModelBugs(set)
			if err != nil {
				return err
			}
			env := fuzz.SteppedEnv{Surrogate: surrogate, Target: target.ImplStepped, Admin: t.Admin, Limited: t.Limited, Inject: set.Names(), Coalesce: b == bugs.ForgetUnobservedVirtual,
				Bugs:         fuzz.ModelFaults(set),
				AdopterKinds: fuzz.SteppedAdopterKinds,
				Start: func(ctx context.Context) (*impl.Target, error) {
					return t.StartSteppedKinds(ctx, set, target.SteppedAdopterKinds, true)
				}}
			out := filepath.Join("out", "bench-detect", string(b), strconv.Itoa(s))
			rep, err := fuzz.RunStepped(ctx, env, fuzz.Config{Checks: 100000, Steps: 30, Seed: uint64(s), ShrinkTime: 3 * time.Second,
				Universe: fuzz.DefaultUniverse, Out: out, Deadline: time.Now().Add(budget), Progress: progressOut})
			if err != nil {
				return err
			}
			if f := rep.Failure; f != nil && f.Kind != "error" {
				why, err := attributable(ctx, t, f.Trace)
				if err != nil {
					return err
				}
				if why == "" && !f.Attributed {
					why = "the model with the bug does not reproduce it, or the model fails it alone"
				}
				if why != "" {
					kind = "not the bug's: " + why
					fmt.Fprintf(os.Stderr, "%s seed %d: %v; %s\n", b, s, summary(rep), kind)
					continue
				}
				times = append(times, f.FoundAfter)
				lengths = append(lengths, f.Steps)
				kind = f.Kind + ": " + firstLine(f.Summary)
			} else if f != nil {
				kind = "error: " + firstLine(f.Summary)
			}
			fmt.Fprintf(os.Stderr, "%s seed %d: %v\n", b, s, summary(rep))
		}
		bfs := bfsLength(string(b))
		found := fmt.Sprintf("%d/%d", len(times), seeds)
		if len(times) == 0 {
			fmt.Fprintf(w, "%s\t%s\t-\t-\t%d\t-\t%s\n", b, found, bfs, kind)
			continue
		}
		slices.Sort(times)
		slices.Sort(lengths)
		// the median over every seed: a seed that found nothing took
		// longer than the budget
		median := "> budget"
		if 2*len(times) > seeds {
			median = times[seeds/2].Round(100 * time.Millisecond).String()
		}
		ml := lengths[len(lengths)/2]
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%.2f\t%s\n", b, found, median, ml, bfs, float64(ml)/float64(bfs), trim(kind, 70))
	}
	return w.Flush()
}

// attributable replays a failure's trace on impl without the injected
// bug: the failure counts as the bug's only when the trace then passes.
// Otherwise it is a divergence of impl (or the model) of its own, which
// the fuzzer found while looking for the bug; it returns what differs.
func attributable(ctx context.Context, t *target.Target, path string) (string, error) {
	tr, err := traces.ParseFile(path)
	if err != nil {
		return "", err
	}
	outs, skip, err := t.ReplayTrace(ctx, tr)
	if err != nil {
		// a step impl cannot take without the bug either
		return "fails the same way without the bug: " + firstLine(err.Error()), nil
	}
	if skip != "" {
		// a shrunk run without GC steps (protection-disabled's create
		// and delete) is not a stepped trace; the surrogate's attribution
		// (Failure.Attributed) stands for it
		fmt.Fprintf(os.Stderr, "%s: not replayed on impl-stepped: %s\n", path, skip)
		return "", nil
	}
	if err := replay.Diff(tr, "impl", outs); err != nil {
		return "replays the same without the bug: " + firstLine(err.Error()), nil
	}
	return "", nil
}

func summary(rep *fuzz.Report) string {
	if rep.Failure == nil {
		return fmt.Sprintf("not found in %d runs (%s)", rep.Checks, rep.Elapsed.Round(time.Second))
	}
	return fmt.Sprintf("%s after %s, shrunk to %d steps", rep.Failure.Kind, rep.Failure.FoundAfter.Round(100*time.Millisecond), rep.Failure.Steps)
}

var afterSetup = regexp.MustCompile(`\((\d+) steps after the setup\)`)

// bfsLength is the model checker's counterexample length: the steps it
// explored after the preset's setup plus the setup's client steps (its
// settles, which stand for internal steps, count as none).
func bfsLength(bug string) int {
	f, err := os.Open(filepath.Join("traces", "counterexamples", bug+".trace"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, setup, inSetup, stanza := 0, 0, true, 0
	for sc.Scan() {
		l := sc.Text()
		if m := afterSetup.FindStringSubmatch(l); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		switch {
		case l == "----":
			stanza++
		case l == "":
		case strings.HasPrefix(l, "#"):
		case stanza == 0 && inSetup && l != "settle":
			setup++
		}
		if stanza > 0 {
			inSetup = false
		}
	}
	return n + setup
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
