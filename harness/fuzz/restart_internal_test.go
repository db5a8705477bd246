package fuzz

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
)

// failing is a restart whose first fails attempts fail with err and
// whose later ones succeed; it counts its attempts.
func failing(name string, fails int32, err error, attempts *atomic.Int32) Restart {
	return Restart{Name: name, Do: func(context.Context) (string, error) {
		if attempts.Add(1) <= fails {
			return "", err
		}
		return "", nil
	}}
}

// A restart that fails is tried once more at once; one whose second
// attempt fails too stops the run's clients (startRestarts calls failed):
// a kube-apiserver that did not start again would otherwise have every
// client resend each of its steps for retryWait before the run could
// report why. A restart that succeeds, at once or on its second attempt,
// stops nothing, and the summary names a second attempt's cause and what
// the restart said of how it went (a kube-apiserver killed).
func TestFailedRestartStopsClients(t *testing.T) {
	ctx := context.Background()
	broke := errors.New("stop: timeout waiting for process kube-apiserver to stop")
	var stops, okTries, badTries, flakyTries atomic.Int32
	stop := func() { stops.Add(1) }
	ok := failing("impl's GC", 0, nil, &okTries)
	bad := failing(apiServerRestartName, 2, broke, &badTries)
	done := startRestarts(ctx, []Restart{ok, bad}, []time.Duration{0, time.Millisecond}, stop)()
	if n := stops.Load(); n != 1 {
		t.Errorf("failed called %d times, want once, for the one restart that failed twice", n)
	}
	if okTries.Load() != 1 || badTries.Load() != 2 {
		t.Errorf("attempts: %d and %d, want 1 for the restart that succeeded and 2 for the one that failed", okTries.Load(), badTries.Load())
	}
	if done[0].err != nil || !errors.Is(done[1].err, broke) || !strings.Contains(done[1].err.Error(), "tried again") {
		t.Errorf("restarts reported %v and %v, want nil and both attempts' %v", done[0].err, done[1].err, broke)
	}

	stops.Store(0)
	flaky := failing(apiServerRestartName, 1, broke, &flakyTries)
	done = startRestarts(ctx, []Restart{flaky}, []time.Duration{0}, stop)()
	if n := stops.Load(); n != 0 || done[0].err != nil || !errors.Is(done[0].retried, broke) {
		t.Errorf("a restart that succeeded on its second attempt: failed called %d times, err %v, retried %v", n, done[0].err, done[0].retried)
	}
	if s := restartSummary(done); !strings.Contains(s, "on a second attempt; the first: "+broke.Error()) {
		t.Errorf("summary %q does not name the first attempt's failure", s)
	}

	killed := Restart{Name: apiServerRestartName, Do: func(context.Context) (string, error) { return "killed when its graceful stop timed out", nil }}
	done = startRestarts(ctx, []Restart{killed}, []time.Duration{0}, stop)()
	if s := restartSummary(done); s != "kube-apiserver restarted in "+done[0].took.Round(time.Millisecond).String()+" (killed when its graceful stop timed out)" {
		t.Errorf("summary %q does not say how the restart went", s)
	}
}

// TestUpstreamSteppedJudgesItsRelease: stepped runs on upstream-stepped
// follow the model of the binaries' release, as concurrent runs do; on
// v1.33 the GC's DELETE carries no resourceVersion precondition
// (kubernetes#114603), and judging it on the default release would call
// that a divergence.
func TestUpstreamSteppedJudgesItsRelease(t *testing.T) {
	v133, err := model.ParseRelease("v1.33.13")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target.Target{Spec: target.Spec{Name: target.UpstreamStepped, Release: v133}}
	env := upstreamSteppedEnv(tg)
	if got := env.model(0).Release; got != v133 {
		t.Fatalf("upstream-stepped runs on v1.33.13 binaries follow the model of %v", got)
	}
	r := &steppedRun{env: env}
	if text := r.trace("error", "x failed"); !strings.Contains(text, "# releases: v1.33..v1.33\n") {
		t.Fatalf("a failing run's trace on v1.33.13 lacks its releases header:\n%s", text)
	}
}
