package fuzz

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
)

// Restart is a component a concurrent run restarts once, at a random
// time up to Within after its clients start (drawn by rapid, so a seed
// fixes it): kube-apiserver (`--restart-apiserver`) or impl's GC
// (`--restart-gc`). The run waits for its restarts before it settles,
// and is judged as any other: its history must be linearizable, with the
// writes whose answer was lost taken as maybe applied, and once quiet its
// state must be live, so the restarted GC must finish the work the old
// one left.
type Restart struct {
	// Name names the component in reports.
	Name string
	// Within bounds the time from the run's start to the restart.
	Within time.Duration
	// Ready, when set, aims the restart: from its drawn time it waits
	// (up to aimWait) for Ready to hold, such as the GC having a write
	// in flight.
	Ready func() bool
	// Do restarts it and returns once it serves again.
	Do func(ctx context.Context) error
}

// aimWait bounds how long a restart waits for its Ready.
const aimWait = 5 * time.Second

// Restarts are the restart faults target t's Spec asks for.
func Restarts(t *target.Target) []Restart {
	var out []Restart
	if d := t.Spec.RestartAPIServer; d > 0 && t.CP != nil {
		out = append(out, Restart{Name: "kube-apiserver", Within: d, Do: func(ctx context.Context) error {
			_, err := t.CP.RestartAPIServer(ctx)
			return err
		}})
	}
	if d := t.Spec.RestartGC; d > 0 && t.Impl != nil {
		r := Restart{Name: "impl's GC", Within: d, Do: t.Impl.RestartGC}
		if tap := t.GCTap; tap != nil {
			// restart it while a write of it is in flight, when it sends
			// one soon: the case a restart can get wrong
			r.Ready = func() bool { return tap.InFlight() > 0 }
		}
		out = append(out, r)
	}
	return out
}

// drawRestarts draws when in the run each restart happens.
func drawRestarts(t *rapid.T, rs []Restart) []time.Duration {
	var at []time.Duration
	for _, r := range rs {
		ms := rapid.Int64Range(0, r.Within.Milliseconds()).Draw(t, "restart "+r.Name+" after ms")
		at = append(at, time.Duration(ms)*time.Millisecond)
	}
	return at
}

// restartDone is one restart a run did.
type restartDone struct {
	name string
	took time.Duration
	err  error
}

// startRestarts runs each restart at its time, from now; wait returns
// what they did once all are done.
func startRestarts(ctx context.Context, rs []Restart, at []time.Duration) (wait func() []restartDone) {
	var wg sync.WaitGroup
	done := make([]restartDone, len(rs))
	for i, r := range rs {
		wg.Go(func() {
			select {
			case <-ctx.Done():
				done[i] = restartDone{name: r.Name, err: ctx.Err()}
				return
			case <-time.After(at[i]):
			}
			for aim := time.Now().Add(aimWait); r.Ready != nil && !r.Ready() && time.Now().Before(aim) && ctx.Err() == nil; {
				time.Sleep(time.Millisecond)
			}
			begin := time.Now()
			err := r.Do(ctx)
			done[i] = restartDone{name: r.Name, took: time.Since(begin), err: err}
		})
	}
	return func() []restartDone {
		wg.Wait()
		return done
	}
}

// retryWait bounds how long a client goes on resending a step that got
// no answer: longer than any restart.
const retryWait = 90 * time.Second

// doRetrying performs a client step as a real client does when the API
// server is unreachable: it sends the step again, after a growing pause,
// until it gets an answer (or retryWait passes). Each attempt that got
// none is in the run's history as a write maybe applied; a create that
// was applied after all is answered AlreadyExists on its retry, a delete
// NotFound.
func doRetrying(ctx context.Context, d *driver.Driver, st model.Step) (model.Result, error) {
	deadline := time.Now().Add(retryWait)
	pause := 50 * time.Millisecond
	for {
		res, err := d.Do(ctx, st, nil)
		if !unanswered(res, err) || time.Now().After(deadline) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// unanswered reports whether a step's request got no answer from the API
// server: a connection refused, reset or cut short (driver.Do reports
// such a write as a Result with Code 0 and reason ClientError, and a
// failed preparatory request as an error).
func unanswered(res model.Result, err error) bool {
	if err == nil {
		return res.Code == 0 && res.Reason == "ClientError" && networkMessage(res.Message)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return false
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || networkMessage(err.Error())
}

// networkMessage reports whether a client error's message is one of a
// connection that failed or broke (the driver's Result keeps only the
// message).
func networkMessage(msg string) bool {
	for _, m := range []string{"connection refused", "connection reset", "broken pipe", "EOF", "http2: client connection lost", "server closed"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// restartSummary is a run's restarts on one line, "" when none.
func restartSummary(done []restartDone) string {
	var parts []string
	for _, r := range done {
		parts = append(parts, fmt.Sprintf("%s restarted in %s", r.name, r.took.Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}
