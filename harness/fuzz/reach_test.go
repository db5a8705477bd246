package fuzz

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/model"
)

// TestGeneratorReach measures, for every injectable bug, how many stepped
// runs against the surrogate model the generator needs to find it, over
// ten seeds: the median is what impl-stepped pays at about a second per
// run. A diagnostic for tuning the generator, not a gate: it runs only
// with CASCADE_REACH=1 (CASCADE_REACH_STEPS sets the average run length,
// default 30).
func TestGeneratorReach(t *testing.T) {
	if os.Getenv("CASCADE_REACH") == "" {
		t.Skip("set CASCADE_REACH=1 to measure the generator's reach")
	}
	steps := 30
	if n, err := strconv.Atoi(os.Getenv("CASCADE_REACH_STEPS")); err == nil {
		steps = n
	}
	for _, bug := range model.AllBugs() {
		name := bug.String()
		if name == "finalizer-after-deletion" {
			continue
		}
		var runs []int
		for seed := uint64(1); seed <= 10; seed++ {
			env := SteppedEnv{Target: "model", Surrogate: model.BugSet(0).With(bug), Coalesce: name == "forget-unobserved-virtual",
				AdopterKinds: SteppedAdopterKinds}
			if name == "lost-first-update" {
				env.Bugs = env.Surrogate
			}
			rep, err := RunStepped(context.Background(), env, Config{Checks: 1000, Steps: steps, Seed: seed, ShrinkTime: time.Millisecond, Universe: DefaultUniverse})
			if err != nil {
				t.Fatal(err)
			}
			n := 1000
			if rep.Failure != nil && rep.Failure.Attributed {
				n = rep.Failure.Run
			}
			runs = append(runs, n)
		}
		slices.Sort(runs)
		t.Logf("%-34s median %4d runs  %v", name, (runs[4]+runs[5])/2, runs)
	}
}
