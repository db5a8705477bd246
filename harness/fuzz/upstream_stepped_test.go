package fuzz_test

import (
	"context"
	"slices"
	"testing"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
)

// A short lockstep run on upstream-stepped passes: the real
// kube-controller-manager's garbage collector, stepped through the API
// proxy, takes the GC steps of a background cascade (deliveries, the
// dependent's pass, its DELETE) in lockstep with the model, and agrees
// with it after each; the count of internal steps it took is above zero.
func TestUpstreamSteppedLockstepAgrees(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	tg, err := target.Start(ctx, target.Spec{Name: target.UpstreamStepped, BinDir: *binDir, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tg.Close() }()
	env := fuzz.SteppedEnv{Target: target.UpstreamStepped, Admin: tg.Admin, Limited: tg.Limited, Hold: tg.Hold}
	kind, summary, internals := env.ScriptSteps(ctx, []string{
		"create cm/a",
		"create pod/b owner=cm/a",
		"gc deliver cm/a",
		"gc deliver pod/b",
		"delete cm/a",
		"gc deliver cm/a",
		"gc attemptToDelete pod/b",
		"gc delete pod/b",
		"gc deliver pod/b",
	})
	if kind != "" {
		t.Fatalf("%s: %s", kind, summary)
	}
	if internals == 0 {
		t.Fatal("the run took no GC step on kube-controller-manager")
	}
	t.Logf("%d internal steps on kube-controller-manager", internals)
}

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
