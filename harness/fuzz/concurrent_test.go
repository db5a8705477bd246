package fuzz_test

import (
	"context"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/step"
)

// Concurrent runs against impl's GC and adopter in Auto mode, as
// `cascade fuzz --target impl` runs them (target.Spec.Adopter): every
// history is linearizable with every GC and adopter write permitted, and
// every quiet state live.
func TestConcurrentImpl(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	it, err := impl.Start(ctx, cp.Config, impl.Options{Mode: step.Auto, Webhook: true,
		Adopter: true, AdopterKinds: target.SteppedAdopterKinds})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = it.Stop() }()
	audit, closeAudit, err := fuzz.AuditFollower(cp, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeAudit() }()
	env := fuzz.ConcurrentEnv{Target: "impl", Admin: cp.Config, Settler: replay.DefaultQuiet, Audit: audit, LinTimeout: time.Minute}
	rep, err := fuzz.RunConcurrent(ctx, env, fuzz.Config{
		Checks: 3, Steps: 20, Clients: 3, Seed: 3, Universe: fuzz.DefaultUniverse, ShrinkTime: 10 * time.Second, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s: %s", rep.Failure.Kind, rep.Failure.Summary)
	}
	// a run drawn empty is not a passed run: every run that took a step
	// passed
	if rep.Checks == 0 || rep.Checks != rep.Runs || rep.Ops == 0 {
		t.Fatalf("expected every run that took a step to pass, with recorded ops, got %+v", rep)
	}
	t.Logf("%d runs, %d steps, %d ops, known: %v", rep.Checks, rep.Steps, rep.Ops, rep.Known)
}
