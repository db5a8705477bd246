package fuzz_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
)

// A short lockstep run on upstream-stepped passes: the real
// kube-controller-manager's garbage collector, stepped through the API
// proxy, takes the GC steps rapid draws (a count of internal steps
// above zero) and agrees with the model after each.
func TestUpstreamSteppedLockstepAgrees(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	tg, err := target.Start(ctx, target.Spec{Name: target.UpstreamStepped, BinDir: *binDir, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tg.Close() }()
	rep, err := fuzz.OnTarget(ctx, tg, fuzz.Config{Checks: upstreamSteppedChecks, Steps: 15, Seed: upstreamSteppedSeed,
		Universe: fuzz.DefaultUniverse, ShrinkTime: 10 * time.Second, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s: %s\n%s", rep.Failure.Kind, rep.Failure.Summary, rep.Failure.Trace)
	}
	if rep.Mode != "stepped" || rep.Checks != upstreamSteppedChecks {
		t.Fatalf("expected %d passing stepped runs, got %+v", upstreamSteppedChecks, rep)
	}
	if rep.InternalSteps == 0 {
		t.Fatalf("the runs took no GC step on kube-controller-manager: %+v", rep)
	}
	t.Logf("%d runs, %d steps, %d internal steps on kube-controller-manager in %s", rep.Checks, rep.Steps, rep.InternalSteps, rep.Elapsed)
}

// upstreamSteppedSeed and upstreamSteppedChecks are a short run that
// reaches the GC steps.
const (
	upstreamSteppedSeed   = 3
	upstreamSteppedChecks = 2
)

// The universe of upstream-stepped leaves out the custom kinds (their
// CRDs need the GC's discovery sync, which the proxy cannot step) and
// keeps every other.
func TestUpstreamSteppedKinds(t *testing.T) {
	got := fuzz.UpstreamSteppedKinds(fuzz.DefaultUniverse.Kinds)
	for _, k := range fuzz.DefaultUniverse.Kinds {
		kind, _ := model.KindByShort(k)
		if kind.Info().Custom == slices.Contains(got, k) {
			t.Errorf("kind %s (custom: %v) kept: %v", k, kind.Info().Custom, slices.Contains(got, k))
		}
	}
}
