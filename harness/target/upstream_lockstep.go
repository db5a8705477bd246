package target

import (
	"context"
	"fmt"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// What lockstep fuzzing (`cascade fuzz --target upstream-stepped`) needs
// of the stepped upstream target: which steps it can take, and a hold on
// the proxy for one run's objects.

// Unsteppable says why upstream-stepped cannot produce the step st
// through the API proxy, taken alone ("" when it can): its op is one of
// UnsteppableOps, it names an object of a kind nobody serves, or it is a
// `gc deliver-virtual` or an `apiextensions cleanup`, which a trace may
// take only right after its cause (unsteppable) and lockstep takes right
// after it by itself (upstreamSystem.eager, lockstep.takeEager).
func Unsteppable(st model.Step) string {
	if st.Actor == model.ActorClient {
		return ""
	}
	return unsteppable(&traces.Trace{Stanzas: []traces.Stanza{{Commands: []traces.Command{{Text: st.String(), Step: st}}}}})
}

// UpstreamHold is one lockstep run's hold on upstream-stepped: from Hold
// to Release, no watch event about the run's objects reaches
// kube-controller-manager and no GET or write of its GC about them
// reaches kube-apiserver until a step releases it.
type UpstreamHold struct {
	u upstreamStepped
	t *Target
}

// Hold settles the proxy (the run's namespaces, made before, are behind
// the GC) and holds the traffic about d's objects.
func (t *Target) Hold(ctx context.Context, d *driver.Driver) (*UpstreamHold, error) {
	if t.stepper == nil {
		return nil, fmt.Errorf("target %s has no stepped proxy", t.Spec.Name)
	}
	u, err := t.holdFor(ctx, d)
	if err != nil {
		return nil, err
	}
	return &UpstreamHold{u: u, t: t}, nil
}

// StepWith takes the internal step st on kube-controller-manager, as
// replay does (replay.StateStepper): prev and next are the model's states
// around it, want its result. A *proxy.Divergence says the real GC did
// not do what the model expects.
func (h *UpstreamHold) StepWith(ctx context.Context, st model.Step, prev, next *model.State, want model.Result) (model.Result, error) {
	return h.u.StepWith(ctx, st, prev, next, want)
}

// Ambiguous reports whether st, a GC step of the model, is a pass of a
// work item whose first GET the proxy holds beside another item's of the
// same key, taken by their workers at once, so that kube-controller-
// manager's log cannot say which GET is whose (kcmPasses.Ambiguous): the
// step cannot be taken, and the final settle takes both passes.
func (h *UpstreamHold) Ambiguous(st model.Step) bool {
	if h == nil || st.Op != model.OpAttemptToDelete || st.Target.Kind == model.NoKind {
		return false
	}
	o, err := h.u.object(st)
	return err == nil && h.u.ambiguous(o)
}

// Settle lets everything through until the cluster and the proxy are
// quiet, then holds again.
func (h *UpstreamHold) Settle(ctx context.Context) error { return h.u.Settle(ctx, h.u.d) }

// Release stops holding: the run's cleanup needs the GC.
func (h *UpstreamHold) Release() { h.t.stepper.Hold(false) }
