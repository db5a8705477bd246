package fuzz

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/model"
)

// TestGeneratorReach measures, for every injectable bug, how many stepped
// runs against the surrogate model the generator needs to find it, over
// ten seeds: the median is what impl-stepped pays at about a second per
// run. A diagnostic for tuning the generator, not a gate: it runs only
// with CASCADE_REACH=1 (CASCADE_REACH_STEPS sets the average run length,
// default 30; CASCADE_REACH_BUGS, comma-separated, limits the bugs;
// CASCADE_REACH_SEEDS sets the number of seeds, default 10).
func TestGeneratorReach(t *testing.T) {
	if os.Getenv("CASCADE_REACH") == "" {
		t.Skip("set CASCADE_REACH=1 to measure the generator's reach")
	}
	steps := 30
	if n, err := strconv.Atoi(os.Getenv("CASCADE_REACH_STEPS")); err == nil {
		steps = n
	}
	seeds := 10
	if n, err := strconv.Atoi(os.Getenv("CASCADE_REACH_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	only := os.Getenv("CASCADE_REACH_BUGS")
	for _, bug := range model.AllBugs() {
		name := bug.String()
		if name == "finalizer-after-deletion" || (only != "" && !slices.Contains(strings.Split(only, ","), name)) {
			continue
		}
		var runs []int
		found, total := 0, 0
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			env := SteppedEnv{Target: "model", Surrogate: model.BugSet(0).With(bug), Coalesce: name == "forget-unobserved-virtual",
				AdopterKinds: SteppedAdopterKinds}
			if name == "lost-first-update" {
				env.Bugs = env.Surrogate
			}
			rep, err := RunStepped(context.Background(), env, Config{Checks: 1000, Steps: steps, Seed: seed, ShrinkTime: time.Millisecond, Universe: DefaultUniverse})
			if err != nil {
				t.Fatal(err)
			}
			// not found: 1000, as the median always counted it (rapid
			// runs a fifth of the checks under -short)
			n := 1000
			if rep.Failure != nil && rep.Failure.Attributed {
				n = rep.Failure.Run
				found++
				total += n
			} else if rep.Failure != nil {
				total += rep.Failure.Run
			} else {
				total += rep.Checks
			}
			runs = append(runs, n)
		}
		slices.Sort(runs)
		// runs per find: every run the seeds took over those that found
		// the bug, the estimate of 1/p for a per-run chance p, which a
		// median over few seeds hides behind the seeds that never find it
		perFind := "inf"
		if found > 0 {
			perFind = strconv.Itoa(total / found)
		}
		t.Logf("%-34s median %4d runs, %2d/%d found, %4s runs per find  %v", name, (runs[(seeds-1)/2]+runs[seeds/2])/2, found, seeds, perFind, runs)
	}
}
