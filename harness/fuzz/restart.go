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

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/model"
)

// Restart is a component a concurrent run restarts once, at a random
// time up to Within after its clients start (drawn by rapid, so a seed
// fixes it): kube-apiserver (`--restart-apiserver`), impl's GC
// (`--restart-gc`) or kube-controller-manager (`--restart-kcm`). The run waits for its restarts before it settles,
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
	// Do restarts it and returns once it serves again, with what the
	// run's summary should say of how ("" for nothing: a restart as
	// asked).
	Do func(ctx context.Context) (string, error)
	// Rewatch bounds how long its clients may take, once Do returns, to
	// list and watch again and finish the work they missed: after a run
	// with this restart has settled, its state is checked for liveness
	// again and again, each time after another settle, until it is live
	// or Rewatch has passed since Do returned (awaitLive). 0: once.
	Rewatch time.Duration
}

// APIServerRewatch bounds how long kube-controller-manager's GC (or
// impl's) takes, once kube-apiserver serves again after a restart, to
// finish the work the restart held up. It is derived from client-go's
// back-offs (k8s.io/client-go v0.36 and apimachinery wait), each bounding
// a wait that may begin while the server is down or not yet whole:
//
//   - 60 s: an informer whose watch broke lists and watches again after
//     its reflector's back-off (tools/cache/reflector.go: 0.8 s doubling,
//     capped at 30 s, each delay jittered up to twice its base). The
//     back-off resets only 2 min after its last reset, not when a list
//     succeeds, so in a fuzz session that restarts kube-apiserver every
//     run its delays reach the cap: measured, kube-controller-manager's
//     informers were populated again up to 30 s after a restart, and
//     garbage was collected up to 88 s after it (a fixed 10 s wait, which
//     this bound replaces, failed 3 runs of 4 on upstream).
//   - 30 s: the GC takes in a resource its discovery lost only at its next
//     discovery sync (GarbageCollector.Sync, every 30 s): a kube-apiserver
//     that has just started serves the custom resources late, so the first
//     sync after a restart drops their monitors and the next restores them.
//   - 60 s: a work item that failed all that time waits out its workqueue
//     back-off (workqueue.DefaultTypedControllerRateLimiter: 5 ms doubling
//     up to 1000 s per item), whose last wait is at most the sum of the
//     earlier ones, the time it kept failing.
//
// It is a bound, not a wait: the run goes on as soon as its state is
// live, and a run whose GC never finishes fails once it has passed.
const APIServerRewatch = 150 * time.Second

// aimWait bounds how long a restart waits for its Ready.
const aimWait = 5 * time.Second

// Restarts are the restart faults target t's Spec asks for.
func Restarts(t *target.Target) []Restart {
	var out []Restart
	if d := t.Spec.RestartAPIServer; d > 0 && t.CP != nil {
		out = append(out, APIServerRestart(t.CP, d))
	}
	if d := t.Spec.RestartGC; d > 0 && t.Impl != nil {
		out = append(out, GCRestart(t.Impl, t.GCTap, d))
	}
	if d := t.Spec.RestartKCM; d > 0 && t.CP != nil {
		out = append(out, KCMRestart(t.CP, t.GCTap, d))
	}
	return out
}

// apiServerRestartName names kube-apiserver's restarts.
const apiServerRestartName = "kube-apiserver"

// APIServerRestart restarts cp's kube-apiserver (RestartAPIServer) at a
// time up to within, and lets the clients' informers list and watch
// again before the run settles.
func APIServerRestart(cp *controlplane.ControlPlane, within time.Duration) Restart {
	return Restart{Name: apiServerRestartName, Within: within, Rewatch: APIServerRewatch, Do: func(ctx context.Context) (string, error) {
		r, err := cp.RestartAPIServer(ctx)
		if r.Killed {
			return "killed when its graceful stop timed out", err
		}
		return "", err
	}}
}

// GCRestart restarts impl's GC (impl.Target.RestartGC) at a time up to
// within, aimed, when tap records the GC's writes, at a moment one of
// them is in flight: the case a restart can get wrong.
func GCRestart(it *impl.Target, tap *history.Tap, within time.Duration) Restart {
	r := Restart{Name: "impl's GC", Within: within, Do: func(ctx context.Context) (string, error) { return "", it.RestartGC(ctx) }}
	if tap != nil {
		r.Ready = func() bool { return tap.InFlight() > 0 }
	}
	return r
}

// KCMRewatch bounds how long a restarted kube-controller-manager takes,
// once its garbage collector collects again (RestartControllerManager
// returns then), to finish the work its predecessor left: its informers
// have listed and its graph is built, and every object with owners goes
// through attemptToDelete once from a fresh work queue, without
// back-offs. A restart during a CRD's discovery sync adds the GC's 30 s
// sync period.
const KCMRewatch = 45 * time.Second

// kcmStartTimeout bounds a restarted kube-controller-manager's start, as
// controlplane.Start's default bounds the first.
const kcmStartTimeout = time.Minute

// KCMRestart kills kube-controller-manager and starts it again
// (RestartControllerManager) at a time up to within, aimed, when tap
// records its writes (the proxy's, target.Target.GCTap), at a moment one
// of them is in flight: the write a crash cuts off is then in the
// history as maybe applied.
func KCMRestart(cp *controlplane.ControlPlane, tap *history.Tap, within time.Duration) Restart {
	r := Restart{Name: "kube-controller-manager", Within: within, Rewatch: KCMRewatch, Do: func(ctx context.Context) (string, error) {
		return "", cp.RestartControllerManager(ctx, kcmStartTimeout)
	}}
	if tap != nil {
		r.Ready = func() bool { return tap.InFlight() > 0 }
	}
	return r
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
	// began is when the restart began (zero if it never did)
	began time.Time
	took  time.Duration
	err   error
	// retried is the error of a first attempt that failed when a second
	// one brought the component back (nil when the first did)
	retried error
	// how is what Do said of how it restarted ("" for nothing)
	how string
	// until is when the run stops waiting for the restart's clients to
	// rewatch (Restart.Rewatch after it ended); zero when it has no
	// Rewatch
	until time.Time
}

// startRestarts runs each restart at its time, from now; wait returns
// what they did once all are done. A restart that fails is tried once
// more at once: the component may be down (a kube-apiserver whose
// graceful stop timed out and was killed, or that did not start again in
// time), and the run can go on only once it serves. failed is called when
// the second attempt fails too: the run's clients, which resend each
// unanswered step for up to retryWait, would otherwise go on for that
// long per step before the run could report why.
func startRestarts(ctx context.Context, rs []Restart, at []time.Duration, failed func()) (wait func() []restartDone) {
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
			how, err := r.Do(ctx)
			var retried error
			if err != nil && ctx.Err() == nil {
				var again error
				if how, again = r.Do(ctx); again != nil {
					err = fmt.Errorf("%w; tried again: %w", err, again)
				} else {
					err, retried = nil, err
				}
			}
			done[i] = restartDone{name: r.Name, began: begin, took: time.Since(begin), err: err, retried: retried, how: how}
			if err != nil {
				failed()
			}
			if err == nil && r.Rewatch > 0 {
				done[i].until = time.Now().Add(r.Rewatch)
			}
		})
	}
	return func() []restartDone {
		wg.Wait()
		return done
	}
}

// rewatchUntil is when the last of a run's restarts stops bounding its
// wait for liveness (zero when none does).
func rewatchUntil(done []restartDone) time.Time {
	var until time.Time
	for _, r := range done {
		if r.until.After(until) {
			until = r.until
		}
	}
	return until
}

// CRDRewatch bounds how long, after a run creates a CRD, the GC may take
// to collect garbage among the custom resources made under it. The GC
// monitors a new resource from its next discovery sync (every 30 s), and
// the run's settle waits for that (replay.Quiet's GCSync). But every run
// that creates a CRD deletes it in its cleanup, and a later run creates it
// again: kube-controller-manager's syncMonitors then stops only the
// resource's monitor, not its shared informer, so the next sync finds the
// informer kept and synced, and the informer lists the resource again only
// after its reflector's back-off, which the CRD's absence has grown to its
// cap (0.8 s doubling, capped at 30 s, jittered up to twice: 60 s).
// Measured on a kubeconfig cluster: Herds of a run reached the GC's graph
// 18 s after the sync that took their CRD back in, after the run had been
// judged. The bound is the settle's wait for the sync (32 s) and such a
// back-off (60 s), rounded up to two minutes for the GC's work once the
// informer delivers. Like APIServerRewatch it is a bound, not a wait.
const CRDRewatch = 2 * time.Minute

// liveUntil is when a run stops checking its state for liveness again
// (zero: it settles once): the restarts' bounds, and CRDRewatch after the
// run's last CRD create (crd, zero when it created none).
func liveUntil(done []restartDone, crd time.Time) time.Time {
	until := rewatchUntil(done)
	if !crd.IsZero() && crd.Add(CRDRewatch).After(until) {
		until = crd.Add(CRDRewatch)
	}
	return until
}

// retryWait bounds how long a client goes on resending a step that got
// no answer: longer than any restart.
const retryWait = 90 * time.Second

// doRetrying performs a client step as a real client does when the API
// server is unreachable: it sends the step again, after a growing pause,
// until it gets an answer (or retryWait passes). An attempt whose
// connection was refused never reached the server and is in no history
// (history.Recorder.Refused); one cut off after it was sent is in the
// run's history as a write maybe applied, and if it was applied after
// all, a create is answered AlreadyExists on its retry, a delete
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
		p := fmt.Sprintf("%s restarted in %s", r.name, r.took.Round(time.Millisecond))
		if r.how != "" {
			p += " (" + r.how + ")"
		}
		if r.retried != nil {
			p += fmt.Sprintf(" (on a second attempt; the first: %s)", firstLine(r.retried.Error()))
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
