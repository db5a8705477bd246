package replay

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/model"
)

// Quiet waits until the driver's view of the cluster has not changed for
// window, polling every interval, for at most timeout. It is how a target
// that cannot report its queues (the upstream kube-controller-manager, any
// kubeconfig cluster) settles: the GC reacts to a change within
// milliseconds, so a dump that stays the same for a window longer than its
// reaction time means nothing is left to do.
//
// GCSync covers the one thing a window cannot see: the GC only monitors a
// new CRD's resource from its next discovery sync (GarbageCollector.Sync,
// every 30s in kube-controller-manager), so after the driver creates a CRD
// Settle first waits that long (the model's `gc sync` step).
type Quiet struct {
	Window, Interval, Timeout, GCSync time.Duration
}

// DefaultQuiet is a one-second settle window.
var DefaultQuiet = Quiet{Window: time.Second, Interval: 50 * time.Millisecond, Timeout: 2 * time.Minute, GCSync: 32 * time.Second}

// Settle implements Target.
func (q Quiet) Settle(ctx context.Context, d *driver.Driver) error {
	if at := d.LastCRD(); !at.IsZero() {
		if wait := time.Until(at.Add(q.GCSync)); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	deadline := time.Now().Add(q.Timeout)
	var last []string
	since := time.Now()
	for {
		dump, err := d.Dump(ctx)
		if err != nil {
			return err
		}
		if !slices.Equal(dump, last) {
			last, since = dump, time.Now()
		} else if time.Since(since) >= q.Window {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not go quiet within %s", q.Timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(q.Interval):
		}
	}
}

// Step implements Target: a cluster settled by observation cannot be
// stepped.
func (Quiet) Step(context.Context, model.Step) (model.Result, error) {
	return model.Result{}, ErrNotSteppable
}
