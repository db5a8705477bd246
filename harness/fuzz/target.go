package fuzz

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// OnTarget runs cfg's random runs on a started target: stepped on
// impl-stepped and upstream-stepped, concurrent on upstream, impl and kubeconfig. The model
// target has nothing to fuzz against (it is the oracle).
func OnTarget(ctx context.Context, t *target.Target, cfg Config) (*Report, error) {
	inject := t.Spec.Inject.Names()
	switch t.Spec.Name {
	case target.ImplStepped:
		surrogate, err := ModelBugs(t.Spec.Inject)
		if err != nil {
			return nil, err
		}
		env := SteppedEnv{
			Target: t.Spec.Name, Admin: t.Admin, Limited: t.Limited, Inject: inject,
			Bugs: ModelFaults(t.Spec.Inject), Surrogate: surrogate,
			AdopterKinds: SteppedAdopterKinds,
			Start: func(ctx context.Context) (*impl.Target, error) {
				return t.StartSteppedKinds(ctx, t.Spec.Inject, target.SteppedAdopterKinds, true)
			},
		}
		return RunStepped(ctx, env, cfg)
	case target.UpstreamStepped:
		cfg.Universe.Kinds = UpstreamSteppedKinds(cfg.Universe.Kinds)
		return RunStepped(ctx, upstreamSteppedEnv(t), cfg)
	case target.Upstream, target.Impl, target.Kubeconfig:
		env := ConcurrentEnv{Target: t.Spec.Name, Release: t.Spec.Release, Admin: t.Admin, Limited: t.Limited, Settler: t.Settler(), Inject: inject, LinTimeout: time.Minute,
			Protection: t.HasWebhook(), Restarts: Restarts(t), GCTap: t.GCTap}
		if t.Proxy != nil {
			env.Evidence = func() proxy.Evidence {
				ev := t.Proxy.Take()
				ev.GraphBuilder = t.TakeGraphLog()
				return ev
			}
		}
		if t.Impl != nil {
			surrogate, err := ModelBugs(t.Spec.Inject)
			if err != nil {
				return nil, err
			}
			env.Relist, env.Lag = t.Spec.InformerRelist > 0, t.Spec.InformerLag > 0
			env.GraphChanges = t.TakeGraphChanges
			env.Surrogate, env.Confirm = surrogate, func(ctx context.Context, text string) (string, error) {
				return confirmOn(ctx, t, text)
			}
			// race reproducers are stepped traces: they replay on a
			// control plane of their own, started at the first
			var stepped *target.Target
			defer func() {
				if stepped != nil {
					_ = stepped.Close()
				}
			}()
			env.ConfirmStepped = func(ctx context.Context, text string) (string, error) {
				if stepped == nil {
					progress(cfg, "reproduce: starting an impl-stepped control plane for race reproducers")
					st, err := target.Start(ctx, target.Spec{Name: target.ImplStepped, BinDir: t.Spec.BinDir})
					if err != nil {
						return "", err
					}
					stepped = st
				}
				return confirmOn(ctx, stepped, text)
			}
			// reproducers are confirmed as `cascade replay --history`
			// checks them: their state dumps and their history
			t.Spec.History = t.CP != nil && t.CP.AuditLog() != ""
		}
		if t.CP != nil && t.CP.AuditLog() != "" {
			audit, closeAudit, err := AuditFollower(t.CP, 300*time.Millisecond)
			if err != nil {
				return nil, err
			}
			defer func() { _ = closeAudit() }()
			env.Audit = audit
		}
		return RunConcurrent(ctx, env, cfg)
	}
	return nil, errors.New("fuzz: the model is the oracle of fuzzing, not a target (use upstream, impl, impl-stepped or kubeconfig)")
}

// upstreamSteppedEnv is the stepped environment of upstream-stepped t:
// the GC stepped through the proxy, and the workload controllers of its
// second kube-controller-manager run by the model too, their traffic
// held until the final settle.
func upstreamSteppedEnv(t *target.Target) SteppedEnv {
	env := SteppedEnv{Target: t.Spec.Name, Admin: t.Admin, Limited: t.Limited, Hold: t.Hold, Steppable: steppable, Release: t.Spec.Release}
	if !t.Spec.GCOnly {
		// the real workload controllers run (conform's fuzz phase shares
		// the trace replays' target): the model's settle runs its own
		env.SettleControllers = SteppedAdopterKinds
	}
	return env
}

// SteppedAdopterKinds are target.SteppedAdopterKinds as the model names
// them: stepped runs adopt and release with the built-in workload
// controllers, as kube-controller-manager's would.
var SteppedAdopterKinds = []string{"deploy", "rs", "rc"}

// ModelFaults are the injected bugs the model of a stepped run must share:
// those that are informer faults rather than GC logic, whose steps only
// exist when the switch is on.
func ModelFaults(set bugs.Set) model.BugSet {
	var out model.BugSet
	if set.Has(bugs.LostFirstUpdate) {
		b, err := model.BugByName(string(bugs.LostFirstUpdate))
		if err != nil {
			panic(fmt.Sprintf("fuzz: impl and model bug names drifted: %v", err))
		}
		out = out.With(b)
	}
	return out
}

// confirmOn replays a trace's text on the target, as `cascade replay`
// does, and returns the divergence ("" if the target agrees).
func confirmOn(ctx context.Context, t *target.Target, text string) (string, error) {
	tr, err := traces.Parse("reproducer.trace", strings.NewReader(text))
	if err != nil {
		return "", err
	}
	v := t.Check(ctx, tr)
	switch {
	case v.Skip != "":
		return "", errors.New(v.Skip)
	case v.Err != nil:
		return "", v.Err
	case v.Divergence != nil:
		return v.Divergence.Error(), nil
	}
	return "", nil
}
