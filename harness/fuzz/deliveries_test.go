package fuzz_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
)

// Concurrent runs on upstream behind the API proxy check each history
// with the proxy's delivery record (lin.Options.Deliveries), and an
// excuse that says the real GC had not yet seen a write rests on that
// record or on kube-controller-manager's graph builder log
// (graph-changes: the order the graph took the events in), never on the
// race window.
func TestUpstreamHistoriesCheckedWithDeliveries(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	tg, err := target.Start(ctx, target.Spec{Name: target.Upstream, BinDir: *binDir, Audit: true, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tg.Close() }()
	if tg.Proxy == nil {
		t.Fatal("upstream runs without the API proxy")
	}
	rep, err := fuzz.OnTarget(ctx, tg, fuzz.Config{Checks: 4, Steps: 40, Clients: 4, Seed: 1,
		Universe: fuzz.DefaultUniverse, ShrinkTime: 10 * time.Second, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s: %s", rep.Failure.Kind, rep.Failure.Summary)
	}
	if rep.Checks == 0 || rep.Delivered != rep.Checks {
		t.Fatalf("expected every passed run checked with the delivery record, got %d of %d", rep.Delivered, rep.Checks)
	}
	decided := []string{model.KnownUnobservedDependent, model.KnownVirtualNamespace, model.KnownStaleGraph}
	for _, k := range rep.Known {
		for _, id := range decided {
			if strings.HasPrefix(k, id+" ") && !strings.HasPrefix(k, id+" (on delivery-record)") && !strings.HasPrefix(k, id+" (on graph-changes)") {
				t.Errorf("%s rests on something other than the delivery record or the graph builder's log: %s", id, k)
			}
		}
	}
	t.Logf("%d runs, %d only through a known race, %d checked with the delivery record; known: %v", rep.Checks, rep.Excused, rep.Delivered, rep.Known)
}
