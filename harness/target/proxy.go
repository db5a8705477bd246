package target

import (
	"context"
	"net/http"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/model"
)

// faultSeed is Spec.FaultSeed, or the clock when it is 0.
func (s Spec) faultSeed() uint64 {
	if s.FaultSeed != 0 {
		return s.FaultSeed
	}
	return uint64(time.Now().UnixNano())
}

// startProxy starts the API proxy kube-controller-manager talks through
// on upstream (controlplane.Options.ControllerManagerVia), with the
// Spec's faults, and, with a kube-controller-manager restart asked for,
// a tap on its writes (GCTap) so that those a restart cuts off are in
// the history as maybe applied.
func (t *Target) startProxy(identity *rest.Config) (string, error) {
	s := t.Spec
	opts := proxy.Options{Upstream: identity}
	f := proxy.Faults{Lag: s.InformerLag, Relist: s.InformerRelist, WriteDelay: s.WriteDelay, Seed: s.faultSeed()}
	if f.Any() {
		opts.Controller = proxy.NewFaults(f)
	}
	if s.Name == UpstreamStepped {
		t.stepper = proxy.NewStepper()
		opts.Controller = t.stepper
	}
	if s.RestartKCM > 0 {
		t.GCTap = &history.Tap{}
		opts.Wrap = func(rt http.RoundTripper) http.RoundTripper {
			return t.GCTap.WrapTransport(rt, controlplane.ControllerManagerUser)
		}
	}
	p, err := proxy.New(opts)
	if err != nil {
		return "", err
	}
	t.Proxy = p
	if s.InformerLag > 0 {
		t.logf("upstream: the proxy holds each of kube-controller-manager's watch events up to %s, each stream's in order", s.InformerLag)
	}
	if s.InformerRelist > 0 {
		t.logf("upstream: the proxy ends kube-controller-manager's watches now and then (410 Expired) and holds the relist up to %s", s.InformerRelist)
	}
	if s.WriteDelay > 0 {
		t.logf("upstream: the proxy holds each write of kube-controller-manager's GC up to %s", s.WriteDelay)
	}
	return p.URL(), nil
}

// proxyIdleWait bounds how long settling waits for the proxy to release
// what it holds: longer than any fault holds an event or a write, and
// than an informer takes to list again after a relist break (its
// reflector's back-off, under 1.6 s: proxy.RelistCooldown).
const proxyIdleWait = 30 * time.Second

// proxyQuiet settles upstream behind the proxy: until the proxy holds
// nothing (no event or write waiting out a fault, no broken informer
// that has not listed again; proxyIdleWait at most), then as then
// settles: a quiet window (replay.Quiet) stretched to outlast the real
// GC's back-off of the driver's objects it failed on
// (proxy.GCFailStreak). A quiet window alone cannot see a watch event the
// proxy still holds, on which the controller manager would act.
type proxyQuiet struct {
	p    *proxy.Proxy
	then replay.Target
}

func (q proxyQuiet) Settle(ctx context.Context, d *driver.Driver) error {
	if quiet, ok := q.then.(replay.Quiet); ok && d != nil {
		q.then = stretch(quiet, workqueueBackoff(q.p.GCFailStreak(inScope(d.Prefix()))))
	}
	deadline := time.Now().Add(proxyIdleWait)
	for {
		for !q.p.Idle() && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := q.then.Settle(ctx, d); err != nil {
			return err
		}
		// quiet, but with an event or write held still: what the
		// controller manager does once it is released is not settled yet
		if q.p.Idle() || !time.Now().Before(deadline) {
			return nil
		}
	}
}

func (q proxyQuiet) Step(ctx context.Context, st model.Step) (model.Result, error) {
	return q.then.Step(ctx, st)
}
