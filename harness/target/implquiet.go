package target

import (
	"context"
	"time"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/model"
)

// implQuiet settles the impl target the way the design asks of it: until
// impl's queues are empty and every item of this run that was waiting
// out a back-off has been tried once more — an item waiting is work not
// yet done — and then until the cluster has been quiet for a window, as
// any target.
//
// One more try, not success: an item that fails for good (a delete the
// protection webhook denies, an owner of a kind nobody serves) is retried
// forever, with back-offs growing to the rate limiter's 1000 s, and one
// retry after the run's last step shows whatever that step changed. Items
// of earlier runs on the shared impl are not this run's work: waiting for
// them cost every run up to RetryWait.
type implQuiet struct {
	it   *impl.Target
	then replay.Target
}

// ImplSettler settles a concurrent run on impl in Auto mode: until impl's
// queues are empty and each of the run's back-offs has been retried once
// (RetryWait at most), then as then settles.
func ImplSettler(it *impl.Target, then replay.Target) replay.Target {
	return implQuiet{it: it, then: then}
}

// RetryWait bounds how long settling waits for the run's back-offs.
const RetryWait = 30 * time.Second

func (q implQuiet) Settle(ctx context.Context, d *driver.Driver) error {
	deadline := time.Now().Add(RetryWait)
	seen := map[gc.Backoff]uint64{} // the wait each item was first seen in
	for {
		if q.it.Idle() {
			waiting := false
			for b, n := range q.it.GC.BackingOff() {
				if !d.Owns(b.UID) {
					continue
				}
				first, ok := seen[b]
				if !ok {
					seen[b], first = n, n
				}
				// still in the wait it was first seen in: not yet retried
				waiting = waiting || n == first
			}
			if !waiting || time.Now().After(deadline) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return q.then.Settle(ctx, d)
}

func (q implQuiet) Step(ctx context.Context, st model.Step) (model.Result, error) {
	return q.then.Step(ctx, st)
}
