// Package impl runs cascade's implementation of Kubernetes deletion
// semantics against a real API server: the reference garbage collector
// (impl/gc), the adopting controller (impl/adopter: Herds, and as asked
// the built-in workloads) and the deletion-protection webhook
// (impl/webhook), with the bug catalogue (impl/bugs) switchable. It never
// imports the model: conformance means nothing if the implementation
// reuses the model's decisions.
//
// Start wires the three together for a harness target or `cascade gc`;
// in Stepped mode Step takes one model trace line (gc and controller
// actors) and Settle plays a trace's `settle`. The CRDs of the custom
// kinds the adopter manages are the caller's to install (crds.Install).
//
// Trace step to call (model/step.go, model/text.go):
//
//	gc deliver KEY                 GC.Stepper().Deliver
//	gc deliver-virtual KEY         GC.Stepper().DeliverVirtual
//	gc coalesce KEY                GC.Stepper().Coalesce
//	gc lose KEY                    GC.Stepper().Lose
//	gc attemptToDelete KEY         GC.Stepper().AttemptToDelete
//	gc attemptToOrphan KEY         GC.Stepper().AttemptToOrphan
//	gc delete|patch|unblock KEY    GC.Stepper().Send(KEY, gc.VerbDelete|VerbPatch|VerbUnblock)
//	controller deliver KEY         Adopter.Stepper().Deliver
//	controller coalesce KEY        Adopter.Stepper().Coalesce
//	controller adopt KEY by=OWN    Adopter.Stepper().Adopt(KEY, OWN)
//	controller release KEY by=OWN  Adopter.Stepper().Release(KEY, OWN)
//	settle                         Settle
package impl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/impl/adopter"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/impl/step"
	"github.com/cascade-k8s/cascade/impl/webhook"
)

// Options configures Start.
type Options struct {
	// Mode is step.Auto or step.Stepped, for the GC and the adopter alike.
	Mode step.Mode
	// Bugs is the bug catalogue; each component reads its own entries.
	Bugs bugs.Set
	// GC tunes the garbage collector; its Mode and Bugs are overridden.
	GC gc.Options
	// Adopter runs the adopting controller. The CRD of every custom kind
	// it manages (the Herd CRD, crds.Herd) must be installed first: the
	// harness installs it (crds.Install); Start fails with a one-line
	// error naming the CRD when it is missing.
	Adopter bool
	// AdopterKinds names the owner kinds the adopter manages
	// (adopter.Kinds); nil means Herd only.
	AdopterKinds []string
	// AdopterLag, in Auto mode, lags every watch stream of the adopter's
	// informers by a random time up to it per event, in order
	// (adopter.Options.InformerLag; the GC's own is GC.InformerLag);
	// AdopterLagSeed seeds it.
	AdopterLag     time.Duration
	AdopterLagSeed uint64
	// Webhook installs the deletion-protection webhook.
	Webhook bool
	// WebhookOptions tunes the webhook; its Bugs are overridden.
	WebhookOptions webhook.Options
	// GCConfig, when set, turns the configuration the GC is built from
	// into the one it uses (a harness wraps its transport to record the
	// GC's writes, as history.Tap does).
	GCConfig func(*rest.Config) *rest.Config
}

// Target is a running impl: the GC, and as asked the adopter and webhook.
type Target struct {
	GC      *gc.GarbageCollector
	Adopter *adopter.Controller
	Webhook *webhook.Webhook

	cancel context.CancelFunc
	done   []chan error

	// the GC runs under a context of its own, so that RestartGC can stop
	// it alone
	cfg      *rest.Config
	gcOpts   gc.Options
	gcConfig func(*rest.Config) *rest.Config
	runCtx   context.Context
	gcMu     sync.Mutex
	gcCancel context.CancelFunc
	gcDone   chan error
}

// Start starts the components on the cluster cfg points at and returns
// once their informers have synced and the webhook is called. On error
// nothing it started keeps running.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (_ *Target, retErr error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &Target{cancel: cancel, cfg: cfg, runCtx: rctx}
	defer func() {
		if retErr != nil {
			_ = t.Stop()
		}
	}()
	run := func(f func(context.Context) error) {
		ch := make(chan error, 1)
		t.done = append(t.done, ch)
		go func() { ch <- f(rctx) }()
	}
	if opts.Webhook {
		wo := opts.WebhookOptions
		wo.Bugs = opts.Bugs
		w, err := webhook.Install(ctx, cfg, wo)
		if err != nil {
			return nil, err
		}
		t.Webhook = w
	}
	if opts.Adopter {
		a, err := adopter.New(cfg, adopter.Options{Mode: opts.Mode, Bugs: opts.Bugs, Kinds: opts.AdopterKinds,
			InformerLag: opts.AdopterLag, LagSeed: opts.AdopterLagSeed})
		if err != nil {
			return nil, err
		}
		if err := a.Preflight(ctx); err != nil {
			return nil, err
		}
		t.Adopter = a
		run(a.Run)
		if err := a.WaitForSync(ctx); err != nil {
			return nil, err
		}
	}
	t.gcOpts, t.gcConfig = opts.GC, opts.GCConfig
	t.gcOpts.Mode, t.gcOpts.Bugs = opts.Mode, opts.Bugs
	if err := t.startGC(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// startGC builds a GC from the target's options, runs it under a context
// of its own and waits until its informers have synced.
func (t *Target) startGC(ctx context.Context) error {
	cfg := t.cfg
	if t.gcConfig != nil {
		cfg = t.gcConfig(cfg)
	}
	collector, err := gc.New(cfg, t.gcOpts)
	if err != nil {
		return err
	}
	gctx, cancel := context.WithCancel(t.runCtx)
	done := make(chan error, 1)
	go func() { done <- collector.Run(gctx) }()
	t.gcMu.Lock()
	t.GC, t.gcCancel, t.gcDone = collector, cancel, done
	t.gcMu.Unlock()
	return collector.WaitForSync(ctx)
}

// stopGC stops the running GC and waits for its goroutines.
func (t *Target) stopGC() error {
	t.gcMu.Lock()
	cancel, done := t.gcCancel, t.gcDone
	t.gcCancel, t.gcDone = nil, nil
	t.gcMu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		return errors.New("impl: the GC did not stop within 60s")
	}
}

// RestartGC restarts the garbage collector in Auto mode as a process
// restart would: the running GC stops (its informers and workers end, and
// a request it has in flight is cancelled: the client gives up on it,
// whether or not the API server applied it), and a new one starts with
// the same options and an empty graph, lists every resource again and
// rebuilds the graph from what the API server holds, before its workers
// start. Work the old GC had queued is found again from the lists: an
// object being deleted with foregroundDeletion or orphan, or one whose
// owners are gone. It returns once the new GC's informers have synced.
// The adopter and the webhook run on. It must not run concurrently with
// itself, Stop or Idle.
func (t *Target) RestartGC(ctx context.Context) error {
	if t.gcOpts.Mode != step.Auto {
		return errors.New("impl: only an Auto-mode GC restarts (a stepped GC is restarted by starting another target)")
	}
	if err := t.stopGC(); err != nil {
		return err
	}
	return t.startGC(ctx)
}

// Stop stops every component, waits for their goroutines and removes the
// webhook's configuration.
func (t *Target) Stop() error {
	t.cancel()
	var errs []error
	if err := t.stopGC(); err != nil {
		errs = append(errs, err)
	}
	for _, ch := range t.done {
		select {
		case err := <-ch:
			if err != nil {
				errs = append(errs, err)
			}
		case <-time.After(60 * time.Second):
			errs = append(errs, errors.New("impl: a component did not stop within 60s"))
		}
	}
	t.done = nil
	if t.Webhook != nil {
		errs = append(errs, t.Webhook.Stop(context.Background()))
		t.Webhook = nil
	}
	return errors.Join(errs...)
}

// Step takes one gc or controller trace line in Stepped mode (see the
// package comment). Keys are trace keys (step.ParseKey); uid=VALUE names
// the incarnation by its real UID. err wraps step.ErrNotEnabled when the
// step cannot be taken; writeErr is the API server's answer to a write or
// adoption the step made.
func (t *Target) Step(ctx context.Context, line string) (writeErr, err error) {
	f := strings.Fields(line)
	if len(f) == 2 && f[0] == "gc" && f[1] == "sync" {
		// the GC's discovery sync: start monitors for new resources and
		// stop those of resources gone, then wait for the new monitors'
		// initial lists (GarbageCollector.Sync's WaitForNamedCacheSync),
		// so that an object created after the step comes as its own event
		// after the list, not inside it
		if err := t.GC.Resync(ctx); err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return nil, t.GC.WaitForSync(wctx)
	}
	if len(f) < 3 {
		return nil, fmt.Errorf("impl: expected `gc|controller VERB KEY`, got %q", line)
	}
	k, err := step.ParseKey(f[2])
	if err != nil {
		return nil, fmt.Errorf("impl: %q: %w", line, err)
	}
	var by step.Key
	for _, a := range f[3:] {
		name, v, _ := strings.Cut(a, "=")
		switch name {
		case "uid":
			k.UID = types.UID(v)
		case "by":
			if by, err = step.ParseKey(v); err != nil {
				return nil, fmt.Errorf("impl: %q: %w", line, err)
			}
		default:
			return nil, fmt.Errorf("impl: %q: unexpected %q", line, a)
		}
	}
	switch f[0] {
	case "gc":
		s := t.GC.Stepper()
		if s == nil {
			return nil, errors.New("impl: the gc is not in stepped mode")
		}
		switch f[1] {
		case "deliver":
			return nil, s.Deliver(ctx, k)
		case "deliver-virtual":
			return nil, s.DeliverVirtual(ctx, k)
		case "coalesce":
			return nil, s.Coalesce(ctx, k)
		case "lose":
			return nil, s.Lose(ctx, k)
		case "attemptToDelete":
			return nil, s.AttemptToDelete(ctx, k)
		case "attemptToOrphan":
			return nil, s.AttemptToOrphan(ctx, k)
		case "delete", "patch", "unblock":
			return s.Send(ctx, k, gc.Verb(f[1]))
		}
	case "controller":
		if t.Adopter == nil || t.Adopter.Stepper() == nil {
			return nil, errors.New("impl: no adopting controller in stepped mode")
		}
		s := t.Adopter.Stepper()
		switch f[1] {
		case "deliver":
			return nil, s.Deliver(ctx, k)
		case "coalesce":
			return nil, s.Coalesce(ctx, k)
		case "adopt":
			if by.Kind == "" {
				return nil, fmt.Errorf("impl: %q: adopt needs by=OWNER", line)
			}
			return s.Adopt(ctx, k, by)
		case "release":
			if by.Kind == "" {
				return nil, fmt.Errorf("impl: %q: release needs by=OWNER", line)
			}
			return s.Release(ctx, k, by)
		}
	}
	return nil, fmt.Errorf("impl: unknown step %q", line)
}

// Settle is a trace's `settle`. Stepped mode runs the controller's and
// the GC's held work until neither has anything left to do and no event
// arrives for either for a quiet period; Auto mode waits until the GC and
// the adopter have been idle for a second.
func (t *Target) Settle(ctx context.Context) error {
	if t.GC.Mode() == step.Auto {
		since := time.Now()
		for time.Since(since) < time.Second {
			if !t.Idle() {
				since = time.Now()
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return nil
	}
	return t.settleStepped(ctx)
}

// Idle reports, in Auto mode, whether neither the GC (gc.Stats.Idle)
// nor the adopter (adopter.Controller.Idle) has anything to do now,
// events the informer-lag fault still delays included.
func (t *Target) Idle() bool {
	return t.GC.Stats().Idle() && (t.Adopter == nil || t.Adopter.Idle())
}

// settleQuiet is how long a stepped Settle waits for a further event,
// the components' own (gc.SettleQuiet, adopter.SettleQuiet), whichever is
// longer.
var settleQuiet = max(gc.SettleQuiet, adopter.SettleQuiet)

// settleStepped is Settle in Stepped mode. Each component's own Settle
// ends with a quiet wait: no event held for it for a while after its
// last round changed nothing, so that no event of the writes so far is
// still in flight. Called in turn they cost two waits per settle (and
// more when the second one's writes wake the first); here the two share
// one: both catch up, without waiting, until neither changes anything,
// and then one wait listens to both arrival signals at once. That is as
// sound as the two waits in turn: the wait starts after the last round
// of either component, the signals' channels are taken before those
// rounds (an event held during them ends the wait at once), and an
// event for either ends it and starts another round of both, so Settle
// returns only after a full quiet period in which neither the GC's
// informers nor the controller's held anything, with both idle.
func (t *Target) settleStepped(ctx context.Context) error {
	g := t.GC.Stepper()
	for range 200 {
		gcWait := g.Arrived()
		var adopterWait <-chan struct{} // nil, never ready, without an adopter
		if a := t.Adopter; a != nil {
			w, closed := a.Stepper().Arrived()
			if closed {
				return errors.New("impl: adopter stopped")
			}
			adopterWait = w
		}
		progressed := false
		if a := t.Adopter; a != nil {
			p, err := a.Stepper().CatchUp(ctx)
			if err != nil {
				return err
			}
			progressed = p
		}
		p, loop, err := g.CatchUp(ctx)
		if err != nil {
			return err
		}
		// after a loop of GC retries, the events it holds are its own
		// (gc.Stepper.CatchUp)
		if progressed || p || (g.Held() > 0 && loop == nil) {
			continue
		}
		if loop != nil {
			gcWait = loop
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-gcWait:
		case <-adopterWait:
		case <-time.After(settleQuiet):
			if t.quiet(loop != nil) {
				return nil
			}
		}
	}
	return errors.New("impl: did not settle")
}

// quiet: nothing held for either component and nothing to adopt or
// release. gcLoop: the GC's last rounds ended in a loop of retries
// (gc.Stepper.CatchUp), whose held events are its own.
func (t *Target) quiet(gcLoop bool) bool {
	if st := t.GC.Stats(); (st.GraphChanges > 0 && !gcLoop) || st.Busy > 0 {
		return false
	}
	if a := t.Adopter; a != nil {
		return len(a.Stepper().Pending()) == 0 && len(a.Stepper().Claims()) == 0
	}
	return true
}
