package fuzz_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/step"
	"github.com/cascade-k8s/cascade/traces"
)

func steppedEnv(inject bugs.Set) fuzz.SteppedEnv {
	return fuzz.SteppedEnv{
		Target: "impl-stepped", Admin: cp.Config, Limited: limited, Inject: inject.Names(),
		Start: func(ctx context.Context) (*impl.Target, error) {
			it, err := impl.Start(ctx, cp.Config, impl.Options{Mode: step.Stepped, Bugs: inject, Webhook: true})
			if err != nil {
				return nil, err
			}
			if err := it.Settle(ctx); err != nil {
				_ = it.Stop()
				return nil, err
			}
			return it, nil
		},
	}
}

// Without injected bugs impl agrees with the model on random stepped runs.
func TestSteppedAgrees(t *testing.T) {
	needControlPlane(t)
	rep, err := fuzz.RunStepped(context.Background(), steppedEnv(nil), fuzz.Config{
		Checks: 3, Steps: 25, Seed: 1, Universe: fuzz.DefaultUniverse, ShrinkTime: 10 * time.Second, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s: %s\n%s", rep.Failure.Kind, rep.Failure.Summary, rep.Failure.Trace)
	}
	if rep.Checks != 3 || rep.Steps == 0 {
		t.Fatalf("expected 3 passing runs with steps, got %+v", rep)
	}
}

// With a bug injected into impl, a stepped run diverges from the model and
// the shrunk trace it writes replays cleanly on the model.
func TestSteppedFindsInjectedBug(t *testing.T) {
	needControlPlane(t)
	out := t.TempDir()
	rep, err := fuzz.RunStepped(context.Background(), steppedEnv(bugs.Of(bugs.ProtectionDisabled)), fuzz.Config{
		Checks: 50, Steps: 25, Seed: 7, Universe: fuzz.DefaultUniverse, ShrinkTime: 20 * time.Second, Out: out, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || rep.Failure.Kind != "divergence" || !strings.Contains(rep.Failure.Summary, "denied the request") {
		t.Fatalf("protection-disabled was not found as a divergence on a denied delete in 50 runs: %+v %+v", rep, rep.Failure)
	}
	t.Logf("%s after %s: %s", rep.Failure.Kind, rep.Failure.FoundAfter, rep.Failure.Summary)
	tr, err := traces.ParseFile(rep.Failure.Trace)
	if err != nil {
		t.Fatal(err)
	}
	results, _, err := traces.Replay(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := traces.Diff(tr, results); err != nil {
		t.Fatalf("the failure trace does not replay on the model: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.txt")); err != nil {
		t.Fatal(err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// The runs share one impl, but each starts from a fresh model, whose GC
// monitors no custom resource: a run begins with impl's GC rid of the
// monitors of CRDs an earlier run created and its cleanup deleted.
// Kept, such a monitor lists again only after its reflector's backoff
// once a later run recreates the CRD, and the events the model's `gc
// sync` queues at once arrive late or never (found by
// `cascade fuzz --target impl-stepped --seed 2`, as "no pending herds
// event").
func TestSteppedRunForgetsEarlierRunsCRDs(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	env := steppedEnv(nil)
	it, err := env.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = it.Stop() }()
	herds := func() bool {
		for _, r := range it.GC.Monitored() {
			if r.Group == "cascade.dev" && r.Resource == "herds" {
				return true
			}
		}
		return false
	}
	if kind, summary := env.ConfirmSteps(ctx, it, []string{"create crd/herds.cascade.dev", "gc sync", "create herd/h", "gc deliver herd/h"}); kind != "" {
		t.Fatalf("the run creating the Herd CRD failed: %s: %s", kind, summary)
	}
	if !herds() {
		t.Fatal("the run's gc sync did not start a monitor for herds")
	}
	end, err := env.BeginRun(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	if herds() {
		t.Fatal("the next run begins with impl's GC monitoring herds, whose CRD the earlier run's cleanup deleted")
	}
}
