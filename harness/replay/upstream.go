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
// every 30s in kube-controller-manager, a constant without a flag), so
// after the driver creates a CRD Settle first waits that long (the model's
// `gc sync` step), or until Synced reports that sync, whichever is first.
type Quiet struct {
	Window, Interval, Timeout, GCSync time.Duration
	// Synced, when set, reports whether the GC has taken in the CRD named
	// (plural.group) that was created at since: a discovery sync that
	// began after since has started the resource's monitor and the
	// monitor has synced. Settle polls it every Interval during the GCSync
	// wait and goes on to the quiet window as soon as it holds.
	Synced func(crd string, since time.Time) bool
}

// DefaultQuiet is a one-second settle window.
var DefaultQuiet = Quiet{Window: time.Second, Interval: 50 * time.Millisecond, Timeout: 2 * time.Minute, GCSync: 32 * time.Second}

// Settle implements Target.
func (q Quiet) Settle(ctx context.Context, d *driver.Driver) error {
	if at := d.LastCRD(); !at.IsZero() {
		for end := at.Add(q.GCSync); time.Now().Before(end); {
			if q.Synced != nil && q.Synced(d.LastCRDName(), at) {
				break
			}
			wait := min(q.Interval, time.Until(end))
			if q.Synced == nil {
				wait = time.Until(end)
			}
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
