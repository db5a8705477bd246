package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/replay"
)

// cancelOnSettle interrupts fuzzing in the middle of a concurrent run: it
// cancels the context as the run's clients are done and it begins to wait
// for quiet, and counts the settles begun.
type cancelOnSettle struct {
	replay.Target
	cancel  context.CancelFunc
	settles int
}

func (c *cancelOnSettle) Settle(ctx context.Context, d *driver.Driver) error {
	c.settles++
	c.cancel()
	return c.Target.Settle(ctx, d)
}

// noArtifacts fails if fuzzing wrote anything into out.
func noArtifacts(t *testing.T, out string) {
	t.Helper()
	entries, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("interrupted fuzzing wrote %s", filepath.Join(out, e.Name()))
	}
}

// An interrupt in the middle of a concurrent run ends fuzzing: the run it
// cut short has no verdict, so it is neither passed nor failed, nothing is
// shrunk (no run is started again) and nothing is written that looks like
// a finding.
func TestInterruptedConcurrentRun(t *testing.T) {
	needControlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	audit, closeAudit, err := fuzz.AuditFollower(cp, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeAudit() }()
	settler := &cancelOnSettle{Target: replay.DefaultQuiet, cancel: cancel}
	env := fuzz.ConcurrentEnv{Target: "upstream", Admin: cp.Config, Settler: settler, Audit: audit, LinTimeout: time.Minute}
	out := filepath.Join(t.TempDir(), "out")
	rep, err := fuzz.RunConcurrent(ctx, env, fuzz.Config{
		Checks: 5, Steps: 10, Clients: 2, Universe: fuzz.DefaultUniverse, ShrinkTime: time.Minute, Out: out, Progress: testWriter{t},
	})
	expectInterrupted(t, rep, err)
	if !rep.Interrupted || rep.Checks != 0 || rep.Seed == 0 {
		t.Errorf("report %+v, want interrupted, no passed run, and the seed", rep)
	}
	if settler.settles != 1 {
		t.Errorf("%d runs began to settle, want 1: fuzzing went on after the interrupt", settler.settles)
	}
	noArtifacts(t, out)
}

// expectInterrupted: fuzzing that was interrupted returns the context's
// error and a report without a failure.
func expectInterrupted(t *testing.T, rep *fuzz.Report, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if rep == nil {
		t.Fatal("no report")
	}
	if rep.Failure != nil {
		t.Errorf("an interrupt reported as a failure: %s: %s", rep.Failure.Kind, rep.Failure.Summary)
	}
}

// progressCancel cancels fuzzing's context when a line starting with
// prefix is written to it.
type progressCancel struct {
	t      *testing.T
	prefix string
	cancel context.CancelFunc
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (p *progressCancel) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Log(strings.TrimSpace(string(b)))
	p.buf.Write(b)
	if strings.HasPrefix(string(b), p.prefix) {
		p.cancel()
	}
	return len(b), nil
}

// An interrupt after a stepped run ends fuzzing there: the next run is not
// begun (its settle of impl would fail on the cancelled context), the run
// that passed is counted and nothing is written.
func TestInterruptedSteppedRun(t *testing.T) {
	needControlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	prog := &progressCancel{t: t, prefix: "run ", cancel: cancel}
	rep, err := fuzz.RunStepped(ctx, steppedEnv(nil), fuzz.Config{
		Checks: 5, Steps: 10, Universe: fuzz.DefaultUniverse, ShrinkTime: time.Minute, Out: out, Progress: prog,
	})
	expectInterrupted(t, rep, err)
	if !rep.Interrupted || rep.Checks != 1 || rep.Runs != 1 {
		t.Errorf("report %+v, want interrupted after 1 passed run", rep)
	}
	if n := strings.Count(prog.buf.String(), "run "); n != 1 {
		t.Errorf("%d runs reported, want the one before the interrupt:\n%s", n, prog.buf.String())
	}
	noArtifacts(t, out)
}
