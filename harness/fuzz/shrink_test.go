package fuzz

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// noise is client steps on objects of kinds no counterexample uses (so
// their events queue in informers of their own and change no delivery
// order): they make a failing run long the way a random run is, without
// changing whether the bug shows.
var noise = []string{
	"create cronjob/ns9/n1 finalizers=cascade.dev/hold",
	"create sts/ns9/n2 selector=app=web owner=cronjob/ns9/n1,block labels=app=web",
	"delete cronjob/ns9/n1 propagation=Foreground",
	"remove-finalizer cronjob/ns9/n1 cascade.dev/hold",
	"create cronjob/n3",
	"add-finalizer cronjob/n3 cascade.dev/hold",
	"delete cronjob/n3",
	"create sts/n4 selector=app=web owner=cronjob/n3",
}

// commands are a trace's commands in order, its settles included.
func commands(t *testing.T, path string) []string {
	t.Helper()
	tr, err := traces.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			out = append(out, c.Text)
		}
	}
	return out
}

// TestShrinkBySurrogate: a bug's checker counterexample, padded with
// noise between every step, still makes the reference model and the
// model with the bug disagree; ddmin and simplify bring it back to no
// more steps than the counterexample takes (its settles expanded).
func TestShrinkBySurrogate(t *testing.T) {
	for _, bug := range []string{"lookup-ignores-scope", "uid-only-identity", "delete-without-rv-precondition",
		"no-cycle-unblock", "delete-dependents-without-policy", "edge-triggered-transitions", "protection-disabled"} {
		t.Run(bug, func(t *testing.T) {
			b, err := model.BugByName(bug)
			if err != nil {
				t.Fatal(err)
			}
			env := SteppedEnv{Surrogate: model.BugSet(0).With(b)}
			cx := commands(t, filepath.Join("..", "..", "traces", "counterexamples", bug+".trace"))
			_, taken := env.surrogateCheck(cx)
			if f, _ := env.surrogateCheck(cx); f == nil {
				t.Fatalf("the counterexample does not make the models disagree: %q", cx)
			}
			var noisy []string
			for i, c := range cx {
				noisy = append(noisy, noise[i%len(noise)], c)
			}
			fails := func(s []string) bool { f, _ := env.surrogateCheck(s); return f != nil }
			if !fails(noisy) {
				t.Fatalf("noise hides the bug: %q", noisy)
			}
			shrunk := simplify(ddmin(noisy, fails), fails)
			if !fails(shrunk) {
				t.Fatalf("shrunk run passes: %q", shrunk)
			}
			_, shrunkTaken := env.surrogateCheck(shrunk)
			if len(shrunkTaken) > len(taken) {
				t.Errorf("shrunk to %d steps, the counterexample takes %d:\n%s", len(shrunkTaken), len(taken), fmt.Sprint(shrunkTaken))
			}
			for _, n := range noise {
				if slices.Contains(shrunk, n) {
					t.Errorf("noise step %q survived shrinking: %q", n, shrunk)
				}
			}
		})
	}
}

// TestGeneratorReachesBugs: stepped random runs against the model with
// a bug switched on, in impl's place, find every bug of the catalogue the
// fuzzer can reach (finalizer-after-deletion cannot be injected into a
// real API server), with the adopting controllers impl-stepped runs:
// for each, some seed of the first five finds it within its runs. How
// many runs it took is logged: impl-stepped pays about a second per run.
func TestGeneratorReachesBugs(t *testing.T) {
	for _, bug := range model.AllBugs() {
		name := bug.String()
		if name == "finalizer-after-deletion" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 5; seed++ {
				env := SteppedEnv{Target: "model", Surrogate: model.BugSet(0).With(bug), Coalesce: name == "forget-unobserved-virtual",
					AdopterKinds: SteppedAdopterKinds}
				if name == "lost-first-update" {
					env.Bugs = env.Surrogate
				}
				rep, err := RunStepped(context.Background(), env, Config{Checks: 1000, Steps: 30, Seed: seed, ShrinkTime: time.Second, Universe: DefaultUniverse})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Failure != nil && rep.Failure.Attributed {
					t.Logf("seed %d: found in run %d, %s: %s", seed, rep.Failure.Run, rep.Failure.Kind, firstLine(rep.Failure.Summary))
					return
				}
				t.Logf("seed %d: not found in %d runs", seed, rep.Checks)
			}
			t.Errorf("not found with seeds 1 to 5")
		})
	}
}
