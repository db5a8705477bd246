package fuzz_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/impl/step"
)

// restartEnv starts impl's GC in Auto mode, its writes tapped and its
// graph changes recorded (the evidence lin judges its graph by), and
// returns a concurrent environment on it with the given restarts.
func restartEnv(t *testing.T, restarts func(*impl.Target, *history.Tap) []fuzz.Restart) fuzz.ConcurrentEnv {
	t.Helper()
	ctx := context.Background()
	tap, graph := &history.Tap{}, &target.GraphRecorder{}
	it, err := impl.Start(ctx, cp.Config, impl.Options{Mode: step.Auto, Webhook: true,
		GC:       gc.Options{OnGraphChange: graph.Add},
		GCConfig: func(c *rest.Config) *rest.Config { return tap.Wrap(c, history.ActorGC) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = it.Stop() })
	audit, closeAudit, err := fuzz.AuditFollower(cp, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeAudit() })
	return fuzz.ConcurrentEnv{Target: "impl", Admin: cp.Config, Settler: target.ImplSettler(it, replay.DefaultQuiet), Audit: audit, LinTimeout: time.Minute,
		Protection: true, GCTap: tap, GraphChanges: graph.Take, Restarts: restarts(it, tap)}
}

// expectSurvived runs five concurrent runs (three left a restart that
// caught no write in flight too likely: it failed that way in CI) and
// checks that at least two were drawn with steps (a run drawn empty is
// not counted), that each of those restarted once and passed the
// linearizability and liveness checks, and that the restarts hit the
// run's writes (hit, on the report).
//
// A failing run's trace and history (history.html) are kept in a
// directory the failure names, for triage: the runs' timing is not
// reproducible.
func expectSurvived(t *testing.T, env fuzz.ConcurrentEnv, hit func(*fuzz.Report) string) {
	t.Helper()
	out, err := os.MkdirTemp("", "cascade-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(out)
		}
	})
	rep, err := fuzz.RunConcurrent(context.Background(), env, fuzz.Config{
		Checks: 5, Steps: 30, Clients: 3, Seed: 6, Universe: fuzz.DefaultUniverse, ShrinkTime: 10 * time.Second, Progress: testWriter{t}, Out: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("%s: %s (the failing run's trace and history are in %s)", rep.Failure.Kind, rep.Failure.Summary, out)
	}
	if rep.Checks < 2 || rep.Restarts != rep.Checks {
		t.Fatalf("expected at least 2 passing runs with one restart each, got %d runs and %d restarts", rep.Checks, rep.Restarts)
	}
	if missed := hit(rep); missed != "" {
		t.Fatalf("%s (%d ops)", missed, rep.Ops)
	}
	t.Logf("%d runs, %d ops, %d maybe applied, %d writes refused, %d restarts in %s", rep.Checks, rep.Ops, rep.MaybeApplied, rep.Refused, rep.Restarts, rep.RestartTime)
}

// A concurrent run survives a restart of kube-apiserver on the same etcd
// while its clients send: the writes sent while it was down are refused
// (never received, so in no history), those cut off in flight are in the
// history as maybe applied, the clients send them again once it serves,
// the GC relists, and the history and the quiet state pass.
func TestConcurrentSurvivesAPIServerRestart(t *testing.T) {
	needControlPlane(t)
	env := restartEnv(t, func(*impl.Target, *history.Tap) []fuzz.Restart {
		return []fuzz.Restart{fuzz.APIServerRestart(cp, 200*time.Millisecond)}
	})
	expectSurvived(t, env, func(rep *fuzz.Report) string {
		if rep.Refused+rep.MaybeApplied == 0 {
			return "no write met a restart: none was refused while kube-apiserver was down, and none is maybe applied"
		}
		return ""
	})
}

// A concurrent run survives a restart of impl's GC while a write of the
// GC is in flight: the cancelled write is in the history as maybe
// applied, and the new GC, starting from an empty graph, finishes the
// work so that the quiet state is live.
func TestConcurrentSurvivesGCRestart(t *testing.T) {
	needControlPlane(t)
	env := restartEnv(t, func(it *impl.Target, tap *history.Tap) []fuzz.Restart {
		return []fuzz.Restart{fuzz.GCRestart(it, tap, 300*time.Millisecond)}
	})
	expectSurvived(t, env, func(rep *fuzz.Report) string {
		if rep.MaybeApplied == 0 {
			return "no GC write was in flight at a restart: the history holds no op maybe applied"
		}
		return ""
	})
}

// TestRestartFailingTwiceEndsTheCampaign: a restart whose second attempt
// fails too leaves a control plane that may be down, so the run fails on
// it and the campaign ends there, unshrunk: no later run and no shrink
// candidate starts (each would restart again), and the failure is the
// restart's.
func TestRestartFailingTwiceEndsTheCampaign(t *testing.T) {
	var attempts atomic.Int32
	env := restartEnv(t, func(*impl.Target, *history.Tap) []fuzz.Restart {
		return []fuzz.Restart{{Name: "kube-apiserver", Do: func(context.Context) (string, error) {
			attempts.Add(1)
			return "", errors.New("start: kube-apiserver did not serve in time")
		}}}
	})
	out := t.TempDir()
	rep, err := fuzz.RunConcurrent(context.Background(), env, fuzz.Config{Checks: 5, Steps: 20, Clients: 3, Seed: 1, ShrinkTime: time.Minute, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failure == nil || rep.Failure.Kind != "error" || !strings.Contains(rep.Failure.Summary, "restart kube-apiserver: start: kube-apiserver did not serve in time") {
		t.Fatalf("want the restart's failure, got %+v", rep.Failure)
	}
	if n := attempts.Load(); n != 2 {
		t.Errorf("%d restart attempts, want 2: one run's restart and its retry, then no run or shrink candidate", n)
	}
	if _, err := os.Stat(filepath.Join(out, fuzz.TraceFile)); err != nil {
		t.Errorf("the failure's trace was not written: %v", err)
	}
}
