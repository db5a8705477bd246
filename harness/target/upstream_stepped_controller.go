package target

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// SteppedWorkloadControllers are the controllers of upstream-stepped's
// second kube-controller-manager process: the adopting controllers the
// model has (model.KindInfo.Adopts) for built-in kinds. In the process of
// the garbage collector they would read its shared informers, one watch
// stream per resource (kube-controller-manager's informer factory hands
// the GC the typed shared informer when there is one), so the proxy
// could hand an event to both or to neither, while the model's GC and
// controller take each event in a step of its own (`gc deliver`,
// `controller deliver`). In a process of their own, with a proxy
// listener of its own (proxy.WorkloadsProcess), their informers are
// watch streams of their own and their requests are told apart from the
// GC's. Jobs and CronJobs are not run: the model has no controller for
// them.
//
// The controller steps map onto that process's IO:
//
//	controller deliver KEY  hands the head event of KEY's informer in
//	                        the workload process on (it must be about
//	                        KEY), then waits DeliverPause
//	controller coalesce KEY as gc coalesce, on the workload process's
//	                        informer
//	controller adopt KEY by=OWNER
//	                        releases the owner's controller's held
//	                        recheck GET of OWNER (RecheckDeletionTimestamp
//	                        in ControllerRefManager's canAdopt); then, as
//	                        its answer says: 404 or a different UID, the
//	                        step answers 404 NotFound, a deletionTimestamp
//	                        409 Conflict (as the model has them), and no
//	                        PATCH of KEY may follow; a live owner, the
//	                        adoption PATCH of KEY, released, whose answer
//	                        is the step's
//	controller release KEY by=OWNER
//	                        releases the held PATCH of KEY (release takes
//	                        no recheck); its answer is the step's
//
// Every other GET or write of the workload controllers about the run's
// objects (status updates, a ReplicaSet's scaling) stays held until the
// next settle.
var SteppedWorkloadControllers = []string{"deployment", "replicaset", "replicationcontroller"}

// controllerStep takes a controller step of the trace on the workload
// controllers' kube-controller-manager.
func (u upstreamStepped) controllerStep(ctx context.Context, st model.Step, o object) (model.Result, error) {
	var (
		res model.Result
		err error
	)
	switch st.Op {
	case model.OpDeliver:
		err = u.st.ReleaseControllerEvent(ctx, StepBound, o.group, o.resource, o.ns, o.name)
		if err == nil {
			time.Sleep(DeliverPause)
		}
		res = model.Result{Code: 200}
	case model.OpCoalesce:
		err = u.st.Relist(ctx, RelistBound, proxy.WorkloadsProcess, o.group, o.resource, o.ns, o.name)
		res = model.Result{Code: 200}
	case model.OpAdopt, model.OpRelease:
		var owner object
		owner, err = u.owner(st)
		if err == nil && st.Op == model.OpAdopt {
			res, err = u.adopt(ctx, o, owner)
		} else if err == nil {
			res, err = u.release(ctx, o, owner)
		}
	default:
		err = fmt.Errorf("upstream-stepped cannot take %q", st.String())
	}
	if div, ok := err.(*proxy.Divergence); ok {
		div.Step = st.String()
	}
	return res, err
}

// owner is the real object of a controller step's by=OWNER.
func (u upstreamStepped) owner(st model.Step) (object, error) {
	line, err := u.d.RealLine(st.String())
	if err != nil {
		return object{}, err
	}
	for _, f := range strings.Fields(line) {
		if key, ok := strings.CutPrefix(f, "by="); ok {
			return objectOf(key, st.By.Kind)
		}
	}
	return object{}, fmt.Errorf("%q names no owner (by=)", st.String())
}

// isController reports whether r is a workload controller's request
// (proxy.ControllerHeld) about o with verb.
func (o object) isController(r proxy.Request, verb string) bool {
	return proxy.ControllerHeld(&r) && r.Verb == verb && o.names(r)
}

// answerResult is a write's answer as the model's Result.
func answerResult(a proxy.Request) model.Result {
	if a.Code/100 == 2 {
		return model.Result{Code: 200}
	}
	return model.Result{Code: a.Code, Reason: a.Reason}
}

func (u upstreamStepped) adopt(ctx context.Context, dep, owner object) (model.Result, error) {
	get, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return owner.isController(r, proxy.VerbGet) })
	if err != nil {
		return model.Result{}, err
	}
	if !ok {
		return model.Result{}, &proxy.Divergence{Expected: "the controller's recheck GET of " + owner.String() + " before adopting " + dep.String(), Observed: "none within " + StepBound.String() + held(u.st)}
	}
	a, err := u.st.Release(ctx, StepBound, get.ID)
	if err != nil {
		return model.Result{}, err
	}
	isPatch := func(r proxy.Request) bool { return dep.isController(r, proxy.VerbPatch) }
	var refused model.Result
	switch {
	case a.Code == 404:
		refused = model.Result{Code: 404, Reason: "NotFound"}
	case a.Code/100 != 2:
		return model.Result{}, fmt.Errorf("the controller's recheck GET of %s was answered %d %s", owner, a.Code, a.Reason)
	case a.Deleting:
		refused = model.Result{Code: 409, Reason: "Conflict"}
	}
	if refused.Code != 0 {
		// the sync fails and is retried with back-off: more GETs of the
		// owner, held, but no PATCH of the dependent
		if _, err := u.st.Quiet(ctx, QuietWindow, StepBound); err != nil {
			return model.Result{}, err
		}
		if r, ok, _ := u.st.WaitRequest(ctx, 0, isPatch); ok {
			return model.Result{}, &proxy.Divergence{Expected: fmt.Sprintf("no adoption of %s (the recheck GET of %s answered %d)", dep, owner, a.Code), Observed: proxy.DescribeRequest(r) + " held"}
		}
		return refused, nil
	}
	patch, ok, err := u.st.WaitRequest(ctx, StepBound, isPatch)
	if err != nil {
		return model.Result{}, err
	}
	if !ok {
		// a live owner of another UID: the Deployment controller's canAdopt
		// refuses ("original Deployment is gone: got uid"), as the model's
		// 404; any other owner adopts
		return model.Result{Code: 404, Reason: "NotFound"}, nil
	}
	pa, err := u.st.Release(ctx, StepBound, patch.ID)
	if err != nil {
		return model.Result{}, err
	}
	return answerResult(pa), nil
}

func (u upstreamStepped) release(ctx context.Context, dep, owner object) (model.Result, error) {
	patch, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return dep.isController(r, proxy.VerbPatch) })
	if err != nil {
		return model.Result{}, err
	}
	if !ok {
		return model.Result{}, &proxy.Divergence{Expected: fmt.Sprintf("the %s controller's PATCH of %s releasing it", owner.resource, dep), Observed: "none within " + StepBound.String() + held(u.st)}
	}
	a, err := u.st.Release(ctx, StepBound, patch.ID)
	if err != nil {
		return model.Result{}, err
	}
	return answerResult(a), nil
}

// scalesPods says why the real ReplicaSet or ReplicationController
// controller would change a trace's Pods where the model's controller
// does not ("" when it would not): at some settle of the trace, as the
// model runs it, a ReplicaSet or ReplicationController not being deleted
// controls a number of active Pods other than its replicas. The real
// controller scales them to spec.replicas (manageReplicas deletes or
// creates Pods, held until that settle on upstream-stepped), while the
// model's controller only adopts and releases.
func scalesPods(tr *traces.Trace) string {
	return walkModel(tr, func(c traces.Command, prev, next *model.State) string {
		if !c.Settle {
			return ""
		}
		if why := Misscaled(next); why != "" {
			return fmt.Sprintf("at its settle on line %d, %s; the real controller scales its Pods to spec.replicas (deleting or creating Pods), the model's controller only adopts and releases", c.Line, why)
		}
		return ""
	})
}

// syncAfterUnmappedItem says why the real GC would not settle a trace as
// the model does ("" when it would): at a `gc sync` that starts a
// monitor, a work item of that custom kind waits in attemptToDelete. The
// real GC's REST mapper learns the kind only at that sync, so the item
// fails its mapping without IO and is retried with exponential back-off
// (5 ms doubling, per item); by the sync, up to 30 s later, its next try
// is tens of seconds off, after the settle that follows has ended.
func syncAfterUnmappedItem(tr *traces.Trace) string {
	return walkModel(tr, func(c traces.Command, prev, next *model.State) string {
		if c.Settle || c.Step.Op != model.OpSync {
			return ""
		}
		for _, id := range prev.GC.AttemptToDelete {
			k, ok := model.KindByName(id.Kind)
			if ok && k.Info().Custom && next.GC.Monitored&(1<<k) != 0 && prev.GC.Monitored&(1<<k) == 0 {
				return fmt.Sprintf("at its %q on line %d, the GC's work item for %s/%s waits in attemptToDelete for that sync: the real GC's REST mapping of %s fails until the sync, and the item's exponential retry back-off puts its next try after the settle that follows", c.Text, c.Line, id.Kind, id.Name, id.Kind)
			}
		}
		return ""
	})
}

// causedByStepBefore says why a trace cannot run on upstream-stepped
// when, in the model, a step that unsteppable lets through only right
// after its cause does not follow that cause: a `gc deliver-virtual`
// whose event the worker step before did not queue (a `gc patch` or
// `gc unblock` queues none; an event queued earlier was the real graph
// builder's at once), or an `apiextensions cleanup` whose CRD the DELETE
// before did not begin deleting (a second DELETE: the real cleanup
// began at the first) or that leaves the CRD in place (a custom resource
// still holds a finalizer: the real cleanup waits for it by itself,
// which the step, waiting for the CRD to go, cannot tell from a hang).
func causedByStepBefore(tr *traces.Trace) string {
	var before struct{ prev, next *model.State } // around the last command that is not a client request
	deleteBegan := false                         // the command just before began a CRD's deletion
	return walkModel(tr, func(c traces.Command, prev, next *model.State) string {
		began := deleteBegan
		deleteBegan = false
		switch {
		case c.Settle:
			before.prev, before.next = nil, nil
			return ""
		case c.Step.Actor == model.ActorClient:
			if k := c.Step.Target.Kind; c.Step.Op == model.OpDelete && k.Info().Kind == "CustomResourceDefinition" {
				was, is := prev.Lookup(k, "", c.Step.Target.Name), next.Lookup(k, "", c.Step.Target.Name)
				deleteBegan = was != nil && !was.Deleting && is != nil && is.Deleting
			}
			return ""
		case c.Step.Actor == model.ActorAPIExtensions:
			if !began {
				return fmt.Sprintf("at its %q on line %d, the DELETE just before did not begin the CRD's deletion: kube-apiserver began the cleanup at the DELETE that did", c.Text, c.Line)
			}
			if next.Lookup(c.Step.Target.Kind, "", c.Step.Target.Name) != nil {
				return fmt.Sprintf("at its %q on line %d, the cleanup leaves the CRD in place (a custom resource holds a finalizer): the real cleanup waits for it by itself, and the step, waiting for the CRD to go, could not tell that from a hang", c.Text, c.Line)
			}
		case c.Step.Op == model.OpDeliverVirtual:
			if before.prev == nil || !queuedVirtual(before.prev, before.next, prev.GC.VirtualEvents) {
				return fmt.Sprintf("at its %q on line %d, the GC step just before queued no virtual delete event of it: the real graph builder took an event queued earlier at once", c.Text, c.Line)
			}
		}
		before.prev, before.next = prev, next
		return ""
	})
}

// queuedVirtual reports whether the head of events, the virtual delete
// event a deliver-virtual takes, is one the step from prev to next
// queued.
func queuedVirtual(prev, next *model.State, events []model.Identity) bool {
	if len(events) == 0 {
		return false
	}
	head := events[0]
	return slices.Contains(next.GC.VirtualEvents, head) && !slices.Contains(prev.GC.VirtualEvents, head)
}

// monitorRestarted says why a trace cannot run on upstream-stepped when,
// in the model, a discovery sync starts the GC's monitor of a custom kind
// again after an earlier sync stopped it (its CRD deleted and created
// again). The real GC's informer outlives the monitor: syncMonitors only
// closes the monitor's stop channel, the monitor's Run (a shared
// informer's dummyController) has returned long before, and the shared
// informer factory runs the informer, with the monitor's event handler
// still registered, until kube-controller-manager stops. So the
// re-created CRD's objects are listed when that informer's reflector
// next retries, on its own back-off and not at the sync (seen on v1.37.2:
// no list at the `gc sync`), and reach the graph builder through the old
// handler and the new one (kubernetes#114066; #142039, open, removes the
// handler at the monitor's stop). The model and impl start a new informer
// at the sync instead (a model gap, README "The stepped upstream target").
func monitorRestarted(tr *traces.Trace) string {
	var stopped uint32 // custom kinds whose monitor a sync stopped
	return walkModel(tr, func(c traces.Command, prev, next *model.State) string {
		stopped |= prev.GC.Monitored &^ next.GC.Monitored
		started := next.GC.Monitored &^ prev.GC.Monitored & stopped
		if started == 0 {
			return ""
		}
		k := model.KindID(bits.TrailingZeros32(started))
		return fmt.Sprintf("at its %q on line %d, the GC monitors %s again after an earlier sync stopped the monitor: the real GC's informer outlives its monitor (syncMonitors closes only the monitor's stop channel; the shared informer factory runs the informer, its handler still registered, until kube-controller-manager stops), so it lists the re-created resource on its reflector's own back-off, not at the sync, and the model starts a new informer there", c.Text, c.Line, k.Info().Resource)
	})
}

// walkModel runs tr on the model, calling f with each command and the
// states before and after it, and returns the first reason f gives.
func walkModel(tr *traces.Trace, f func(c traces.Command, prev, next *model.State) string) string {
	m, err := tr.Model()
	if err != nil {
		return ""
	}
	s := model.NewState()
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			next := s
			if c.Settle {
				if n, _, err := m.Settle(s); err == nil {
					next = n
				}
			} else if n, _, err := m.Apply(s, c.Step); err == nil {
				next = n
			}
			if why := f(c, s, next); why != "" {
				return why
			}
			s = next
		}
	}
	return ""
}

// Misscaled names a ReplicaSet or ReplicationController of s that
// controls a number of active Pods other than its replicas ("" when none
// does): the real controller would scale its Pods to spec.replicas,
// deleting or creating Pods, where the model's controller only adopts and
// releases. Replay skips a trace misscaled at a settle (scalesPods); the
// lockstep generator of upstream-stepped draws no step after which the
// model would settle misscaled.
func Misscaled(s *model.State) string {
	for i := range s.Objects {
		w := &s.Objects[i]
		if short := w.Kind.Info().Short; (short != "rs" && short != "rc") || w.Deleting {
			continue
		}
		n := 0
		for j := range s.Objects {
			p := &s.Objects[j]
			if p.Kind.Info().Short != "pod" || p.Deleting {
				continue
			}
			for _, r := range p.Owners {
				if r.Controller && r.UID == w.UID {
					n++
				}
			}
		}
		if n != w.Replicas {
			return fmt.Sprintf("%s/%s controls %d active Pods with replicas=%d", w.Kind.Info().Short, w.Name, n, w.Replicas)
		}
	}
	return ""
}
