package fuzz_test

import (
	"context"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/target"
)

// A concurrent run on upstream survives kube-controller-manager being
// killed and started again while its clients send (--restart-kcm): the
// writes the kill cut off are in the history as maybe applied (the
// proxy's tap records them), the new process lists everything again and
// finishes the work, and neither the history nor the quiet state shows
// a divergence.
func TestConcurrentSurvivesKCMRestart(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	tg, err := target.Start(ctx, target.Spec{Name: target.Upstream, BinDir: *binDir, Audit: true,
		RestartKCM: 2 * time.Second, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tg.Close() }()
	if tg.Proxy == nil || tg.GCTap == nil {
		t.Fatal("upstream with a kube-controller-manager restart runs without the proxy or its tap")
	}
	rep, err := fuzz.OnTarget(ctx, tg, fuzz.Config{Checks: 3, Steps: 30, Clients: 3, Seed: 6,
		Universe: fuzz.DefaultUniverse, ShrinkTime: 10 * time.Second, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s: %s", rep.Failure.Kind, rep.Failure.Summary)
	}
	if rep.Checks < 2 || rep.Restarts != rep.Checks {
		t.Fatalf("expected at least 2 passing runs with one restart each, got %d runs and %d restarts", rep.Checks, rep.Restarts)
	}
	t.Logf("%d runs, %d ops, %d maybe applied, %d restarts in %s", rep.Checks, rep.Ops, rep.MaybeApplied, rep.Restarts, rep.RestartTime)
}
