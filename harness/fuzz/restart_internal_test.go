package fuzz

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A restart that fails stops the run's clients at once (startRestarts
// calls failed): a kube-apiserver that did not start again would
// otherwise have every client resend each of its steps for retryWait
// before the run could report why. A restart that succeeds stops
// nothing.
func TestFailedRestartStopsClients(t *testing.T) {
	ctx := context.Background()
	broke := errors.New("start: timeout waiting for kube-apiserver to be healthy")
	var stops atomic.Int32
	ok := Restart{Name: "impl's GC", Do: func(context.Context) error { return nil }}
	bad := Restart{Name: apiServerRestartName, Do: func(context.Context) error { return broke }}
	done := startRestarts(ctx, []Restart{ok, bad}, []time.Duration{0, time.Millisecond}, func() { stops.Add(1) })()
	if n := stops.Load(); n != 1 {
		t.Errorf("failed called %d times, want once, for the one restart that failed", n)
	}
	if done[0].err != nil || !errors.Is(done[1].err, broke) {
		t.Errorf("restarts reported %v and %v, want nil and %v", done[0].err, done[1].err, broke)
	}
	stops.Store(0)
	startRestarts(ctx, []Restart{ok}, []time.Duration{0}, func() { stops.Add(1) })()
	if n := stops.Load(); n != 0 {
		t.Errorf("a restart that succeeded called failed %d times", n)
	}
}
