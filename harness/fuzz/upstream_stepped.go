package fuzz

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
)

// Lockstep runs on upstream-stepped: the real kube-controller-manager's
// garbage collector, behind the API proxy's Stepper, takes each internal
// step rapid draws, mapped onto held watch events and held requests as
// replay maps a trace's (target.UpstreamHold). What it cannot take:
//
//   - the steps target.Unsteppable refuses taken alone: the generator
//     draws none (SteppedEnv.Steppable); controller, coalesce and lose are not
//     offered at all (no controller step, no coalescing, no bug): the
//     workload controllers run unstepped, their traffic held until the
//     final settle, and the model runs them at its settle
//     (SteppedEnv.SettleControllers)
//   - a step after which the model would settle with a ReplicaSet or
//     ReplicationController misscaled (upstreamSystem.misscalesAfter,
//     refuses), which the real controller scales at the settle
//   - gc deliver-virtual: the real GC hands a virtual delete event to its
//     graph builder inside attemptToDelete, with no IO between; the model
//     takes it right after the step that queued it (upstreamSystem.eager),
//     and the real GC must show it taken in its graph builder's log line
//     (the target's deliverVirtual), where it used to be taken on the
//     model alone, as apiextensions' cleanup still is
//   - custom resources: a CRD's create or delete needs `gc sync`, the
//     discovery sync on the real GC's own 30 s timer, so the universe
//     leaves custom kinds out (UpstreamSteppedKinds)
//
// A settle is the real GC's own: everything released until the cluster
// and the proxy are quiet, as replay's settle, while the model takes its
// settle path; the states are compared after.

// UpstreamSteppedKinds drops the custom kinds from kinds: upstream-stepped
// cannot step the discovery sync (`gc sync`) that a CRD's create or
// delete needs.
func UpstreamSteppedKinds(kinds []string) []string {
	return slices.DeleteFunc(slices.Clone(kinds), func(k string) bool {
		kind, _ := model.KindByShort(k)
		return kind.Info().Custom
	})
}

// steppable reports whether upstream-stepped can take st.
func steppable(st model.Step) bool { return target.Unsteppable(st) == "" }

// upstreamSystem is kube-controller-manager stepped through the proxy.
type upstreamSystem struct {
	r *steppedRun
	h *target.UpstreamHold
	// failures counts, per work item step ("gc attemptToDelete KEY"),
	// the passes in a row that ended in a requeue: the real GC's work
	// queues retry an item after 5 ms doubling with each failure
	// (workqueue.DefaultTypedControllerRateLimiter), where the model's
	// retry is enabled at once.
	failures map[string]int
	// misscaled holds settlesMisscaled's answers, by encoded state.
	misscaled map[string]string
}

// MaxRetries bounds the passes in a row of one work item that end in a
// requeue: the real GC sends the next pass's GET only after its back-off,
// 5 ms·2^(n-1) after the n-th failure, and beyond 10 that is more than
// 2.5 s, on the way to target.StepBound's 10 s. The generator takes no
// further pass of such an item; the final settle lets the real GC retry
// it on its own timer.
const MaxRetries = 10

// retryable reports whether the generator may take st on the real GC:
// not a pass of an item whose back-off has grown past MaxRetries.
func (us upstreamSystem) retryable(st model.Step) bool {
	return us.failures[st.String()] < MaxRetries && !silentPass(us.r.s, st) && !pastOrphanSnapshot(us.r.m, us.r.s, st) && !pastDeletionCheck(us.r.m, us.r.s, st) && !queuesAgain(us.r.m, us.r.s, st) && !us.misscalesAfter(st) && !us.h.Ambiguous(st)
}

// The real ReplicaSet and ReplicationController controllers, in the
// workload kube-controller-manager whose traffic the proxy holds until
// the final settle, scale their Pods to spec.replicas there
// (manageReplicas deletes or creates Pods), where the model's controller
// only adopts and releases: a run whose model settles with a ReplicaSet
// or ReplicationController controlling another number of active Pods
// than its replicas (target.Misscaled; replay's scalesPods skips such
// traces) would diverge at the settle, the real cluster having deleted
// Pods the model keeps (testdata/open seed3-run3: rc/b with replicas 0
// adopting two orphaned app=web Pods). The generator draws no step,
// client or internal, after which the model would settle so: each state
// of a run then settles unmisscaled, the last one before the final
// settle among them. Refusing the step is the narrowest cut: the run
// goes on and its final settle still compares everything else, where
// ending the run before its settle, or skipping the settle's compare,
// would drop every divergence of another kind the settle shows. A
// refused client step is not taken, as one the model refuses.
//
// The check settles the model from the step's state on (with the virtual
// delete events the step queues, which the model takes right after it);
// the final settle takes, on the model, the steps the proxy can produce
// first, in the model's order (settleFirst), which this check sees as
// the steps it draws, each checked in turn.

// refuses reports whether the client step that leaves the model in next
// is not to be taken: the model would settle misscaled after it.
func (us upstreamSystem) refuses(next *model.State) bool {
	return us.settlesMisscaled(next) != ""
}

// misscalesAfter reports whether the model would settle misscaled after
// the internal step st.
func (us upstreamSystem) misscalesAfter(st model.Step) bool {
	if !workloadsIn(us.r.s) {
		return false // a step creates no ReplicaSet or ReplicationController
	}
	next, _, err := us.r.m.Apply(us.r.s, st)
	if err != nil {
		return false
	}
	return us.settlesMisscaled(withVirtualEvents(us.r.m, next)) != ""
}

// settlesMisscaled names the ReplicaSet or ReplicationController the
// model's settle from s leaves misscaled ("" when none; target.Misscaled).
// The answers are kept per state: the generator asks about each enabled
// step of every draw.
func (us upstreamSystem) settlesMisscaled(s *model.State) string {
	if !workloadsIn(s) {
		return ""
	}
	key := string(s.Encode(nil))
	if why, ok := us.misscaled[key]; ok {
		return why
	}
	why := ""
	if end, _, err := us.r.m.Settle(s); err == nil {
		why = target.Misscaled(end)
	}
	if us.misscaled != nil {
		us.misscaled[key] = why
	}
	return why
}

// workloadsIn reports whether s holds a ReplicaSet or
// ReplicationController not being deleted, the only objects
// target.Misscaled names.
func workloadsIn(s *model.State) bool {
	return slices.ContainsFunc(s.Objects, func(o model.Object) bool {
		short := o.Kind.Info().Short
		return (short == "rs" || short == "rc") && !o.Deleting
	})
}

// withVirtualEvents takes on the model the virtual delete events enabled
// in s (at most 10), as upstreamSystem.eager takes them right after the
// step that queued them.
func withVirtualEvents(m *model.Model, s *model.State) *model.State {
	for range 10 {
		en := m.Enabled(s, model.Options{})
		i := slices.IndexFunc(en, func(e model.Step) bool { return e.Op == model.OpDeliverVirtual })
		if i < 0 {
			break
		}
		next, _, err := m.Apply(s, en[i])
		if err != nil {
			break
		}
		s = next
	}
	return s
}

// queuesAgain reports whether st is a delivery that queues for
// attemptToDelete an item queued there already (whose pass the proxy
// can step). The real GC's idle worker took that item from the queue
// when it was queued and waits on its first GET at the proxy: the
// workqueue marks it dirty and hands it out again after the pass, one
// pass more than the model's queue, a set, which absorbs the add. The
// model has the real outcome with the delivery after the pass. The
// model's states do not show an absorbed add, so each queued item is
// taken out of a copy of s and the delivery applied to that.
//
// A pass of a virtual owner counts as the virtual delete event it queues
// with it, which the model takes right after it (upstreamSystem.eager)
// and which queues the owner's dependents: one of them queued already
// makes the same extra pass.
func queuesAgain(m *model.Model, s *model.State, st model.Step) bool {
	if st.Op != model.OpDeliver && st.Op != model.OpAttemptToDelete {
		return false
	}
	for _, id := range s.GC.AttemptToDelete {
		pass := model.Step{Actor: model.ActorGC, Op: model.OpAttemptToDelete, Target: model.Target{Kind: kindOf(id), Namespace: id.Namespace, Name: id.Name}}
		if pass.Target.Kind != model.NoKind && silentPass(s, pass) {
			continue // the real worker returned at once: a new add is a new pass
		}
		if st.Op == model.OpAttemptToDelete && pass.String() == st.String() {
			continue // the pass's own item, requeued or not
		}
		c := s.Clone()
		c.GC.AttemptToDelete = slices.DeleteFunc(slices.Clone(c.GC.AttemptToDelete), func(q model.Identity) bool { return q.UID == id.UID })
		next, _, err := m.Apply(c, st)
		if err != nil {
			continue
		}
		next = withVirtualEvents(m, next) // the virtual delete events the pass queued
		if slices.ContainsFunc(next.GC.AttemptToDelete, func(q model.Identity) bool { return q.UID == id.UID }) {
			return true
		}
	}
	return false
}

// kindOf is the kind an identity names (model.NoKind: none served).
func kindOf(id model.Identity) model.KindID {
	k, ok := model.KindByName(id.Kind)
	if !ok {
		return model.NoKind
	}
	return k
}

// pastOrphanSnapshot reports whether st is a delivery that changes the
// dependents of an owner queued for attemptToOrphan. The real GC's
// attemptToOrphanWorker copies the owner's dependents from its graph
// when it takes the owner from the queue, which with idle workers is the
// moment the graph builder queues it; the proxy holds only the requests
// it sends after that. The model's attemptToOrphan step reads the
// dependents when it is taken, so a delivery between that adds a
// dependent (or removes one) has the model orphan a different set than
// the real GC, which the proxy cannot produce. The model has the real
// outcome all the same: its orphan step before the delivery.
func pastOrphanSnapshot(m *model.Model, s *model.State, st model.Step) bool {
	if st.Op != model.OpDeliver || len(s.GC.AttemptToOrphan) == 0 {
		return false
	}
	next, _, err := m.Apply(s, st)
	if err != nil {
		return false
	}
	for _, id := range s.GC.AttemptToOrphan {
		if !slices.Equal(orphanDependents(s, id.UID), orphanDependents(next, id.UID)) {
			return true
		}
	}
	return false
}

// pastDeletionCheck reports whether st is a delivery that marks being
// deleted, without foreground, the node of an item queued for
// attemptToDelete. attemptToDeleteItem checks "being deleted is an
// one-way trip" (isBeingDeleted && !isDeletingDependents) on its node
// when the worker takes the item, which with idle workers is the moment
// it is queued, and only then sends its GET, which the proxy holds; the
// model's attemptToDelete step checks when it is taken. So after such a
// delivery the model's pass returns at once while the real one, begun
// before, goes on to classify the owners and may patch away a dangling
// reference (`--checks 200 --seed 11`, run 184: cm/a, queued as a
// virtual owner, observed, then its deletion delivered; at the settle the
// real GC removed cm/a's dangling reference, the model's pass did
// nothing). The model has the real outcome all the same: its pass before
// the delivery.
func pastDeletionCheck(m *model.Model, s *model.State, st model.Step) bool {
	if st.Op != model.OpDeliver || st.Actor != model.ActorGC || len(s.GC.AttemptToDelete) == 0 {
		return false
	}
	next, _, err := m.Apply(s, st)
	if err != nil {
		return false
	}
	oneWay := func(s *model.State, uid model.UID) bool {
		i := slices.IndexFunc(s.GC.Nodes, func(n model.Node) bool { return n.UID == uid })
		return i >= 0 && s.GC.Nodes[i].BeingDeleted && !s.GC.Nodes[i].DeletingDependents
	}
	for _, id := range s.GC.AttemptToDelete {
		pass := model.Step{Actor: model.ActorGC, Op: model.OpAttemptToDelete, Target: model.Target{Kind: kindOf(id), Namespace: id.Namespace, Name: id.Name}}
		if pass.Target.Kind == model.NoKind || silentPass(s, pass) {
			// the real worker's pass makes no request, or is of a stale
			// virtual identity whose GET the settle releases: it reads
			// no node the delivery marks (seed 12, run 16: the item of a
			// namespace named from default, ns/default/a, held ns/a's
			// deletion back to the real GC's own order)
			continue
		}
		if slices.ContainsFunc(s.GC.Nodes, func(n model.Node) bool { return n.Identity == id }) && !oneWay(s, id.UID) && oneWay(next, id.UID) {
			return true
		}
	}
	return false
}

// orphanDependents are the dependents attemptToOrphanWorker would orphan
// for the owner uid: its node's, or those removeNode left it when it was
// removed from the graph while queued (model.GC.Detached).
func orphanDependents(s *model.State, uid model.UID) []model.UID {
	for _, n := range s.GC.Nodes {
		if n.UID == uid {
			return n.Dependents
		}
	}
	for _, d := range s.GC.Detached {
		if d.UID == uid {
			return d.Dependents
		}
	}
	return nil
}

// silentPass reports whether st is a pass the proxy cannot step: one of
// an object queued in both work queues (bothQueued), or one of a work
// item that sends no request the proxy could hold, so that the real GC
// takes it by itself: a namespaced kind without a namespace (a
// namespaced owner of a cluster-scoped object, where getObject answers
// namespacedOwnerOfClusterScopedObjectErr without a GET), a node being
// deleted without foreground (attemptToDeleteItem returns at once:
// "being deleted is an one-way trip"), or an item whose node has left
// the graph. Nor is a pass of a stale virtual node, one the graph
// replaced with the observed object of other coordinates: the model's
// pass does nothing (attemptToDeleteWorker finds it "no longer virtual
// in the graph"), but the real worker took it when it was queued, before
// the replacement, and its GET of the virtual coordinates waits at the
// proxy; answered, it ends in a virtual delete event that queues again
// the dependents naming those coordinates, one pass more than the
// model's (as queuesAgain). The final settle releases it.
func silentPass(s *model.State, st model.Step) bool {
	if bothQueued(s, st) {
		return true
	}
	if st.Op != model.OpAttemptToDelete || st.Target.Kind == model.NoKind {
		return false
	}
	if st.Target.Kind.Info().Namespaced && st.Target.Namespace == "" {
		return true
	}
	for _, id := range s.GC.AttemptToDelete {
		if id.Kind == st.Target.Kind.Info().Kind && id.Namespace == st.Target.Namespace && id.Name == st.Target.Name {
			i := slices.IndexFunc(s.GC.Nodes, func(n model.Node) bool { return n.UID == id.UID })
			if i < 0 {
				// the node has left the graph: the real worker took the
				// item when it was queued and returned at once if the
				// node was being deleted then, or sent a GET the final
				// settle releases; the model's pass does nothing
				return true
			}
			n := s.GC.Nodes[i]
			if n.Identity != id && !n.Virtual {
				return true // a stale virtual node
			}
			return n.BeingDeleted && !n.DeletingDependents
		}
	}
	return false
}

// bothQueued reports whether st is a pass of an object queued in both
// work queues: the attemptToDelete worker's first GET of it and the
// attemptToOrphan worker's GET (removeFinalizer) are the same request at
// the proxy, so neither pass can be told from the other and neither is
// drawn; the final settle takes them.
func bothQueued(s *model.State, st model.Step) bool {
	if (st.Op != model.OpAttemptToDelete && st.Op != model.OpAttemptToOrphan) || st.Target.Kind == model.NoKind {
		return false
	}
	// one key at the proxy: a cluster-scoped kind's items are GETs of
	// the name whatever namespace their identity carries (a virtual
	// owner's is its dependent's)
	info := st.Target.Kind.Info()
	is := func(id model.Identity) bool {
		return id.Kind == info.Kind && id.Name == st.Target.Name && (id.Namespace == st.Target.Namespace || !info.Namespaced)
	}
	if slices.ContainsFunc(s.GC.AttemptToDelete, is) && slices.ContainsFunc(s.GC.AttemptToOrphan, is) {
		return true
	}
	// two items of one key (a virtual owner named by a UID from another
	// namespace, and the object of that name; a virtual owner of a
	// cluster-scoped kind, named from a namespace, and the object):
	// their workers' first GETs are one request at the proxy too
	n := 0
	for _, id := range s.GC.AttemptToDelete {
		if is(id) {
			n++
		}
	}
	return n > 1
}

// count records how a pass of a work item ended: a requeue (the item is
// queued again in next) or not. An attemptToDelete pass that decided a
// write ends with its last write's send (a DELETE the webhook denies is
// a requeue); until then it has not ended.
func (us upstreamSystem) count(st model.Step, next *model.State) {
	pass := st
	switch st.Op {
	case model.OpAttemptToDelete, model.OpAttemptToOrphan:
	case model.OpSend:
		pass = model.Step{Actor: model.ActorGC, Op: model.OpAttemptToDelete, Target: st.Target}
	default:
		return
	}
	if pass.Op == model.OpAttemptToDelete && inFlight(next, st.Target) {
		return
	}
	line := pass.String()
	requeued := slices.ContainsFunc(us.r.m.Enabled(next, us.r.opts), func(e model.Step) bool { return e.String() == line })
	if requeued {
		us.failures[line]++
	} else {
		delete(us.failures, line)
	}
}

// inFlight reports whether s has a write of the item t names in flight.
func inFlight(s *model.State, t model.Target) bool {
	return slices.ContainsFunc(s.GC.InFlight, func(f model.InFlight) bool {
		w := f.Writes[0]
		return w.Item.Kind == t.Kind.Info().Kind && w.Item.Namespace == t.Namespace && w.Item.Name == t.Name
	})
}

func (us upstreamSystem) name() string { return target.UpstreamStepped }

func (us upstreamSystem) client(st model.Step, line string) (model.Result, error) {
	return us.r.d.Do(us.r.ctx, st, us.r.rvMapper())
}

func (us upstreamSystem) internal(model.Step, string) (model.Result, error, error) {
	return model.Result{}, nil, errors.New("upstream-stepped takes internal steps with the model's states only")
}

// internalWith takes st on the real GC; a divergence at the proxy (an IO
// the model expects that did not come, or one it does not expect) is the
// step's notEnabled.
func (us upstreamSystem) internalWith(st model.Step, prev, next *model.State, want model.Result) (model.Result, error, error) {
	res, err := us.h.StepWith(us.r.ctx, st, prev, next, want)
	us.count(st, next)
	var div *proxy.Divergence
	if errors.As(err, &div) {
		return model.Result{}, div, nil
	}
	return res, nil, err
}

// takes: kube-controller-manager runs no workload controller here, and
// apiextensions is not behind the proxy. A virtual delete event is not
// either, but the real graph builder's log line shows it taken: the step
// waits for that line (target's deliverVirtual), so the model's eager
// delivery is checked, not assumed.
func (us upstreamSystem) takes(st model.Step) bool {
	return st.Actor != model.ActorController && st.Actor != model.ActorAPIExtensions
}

// eager: the model takes a virtual delete event as soon as it is queued,
// as the real GC's graph builder gets it from the worker at once.
func (us upstreamSystem) eager(st model.Step) bool { return st.Op == model.OpDeliverVirtual }

func (us upstreamSystem) settlesAlone() bool { return true }

// settleFirst: at a settle, the model takes every internal step the
// proxy can produce, on both, before the real GC settles by itself: a
// queued orphan pass, whose dependents the real worker read when the
// owner was queued (pastOrphanSnapshot), before the model's settle path
// could deliver a new dependent, and every other step in the model's
// order, not the real GC's own.
func (us upstreamSystem) settleFirst(st model.Step) bool {
	return st.Internal() && us.takes(st) && us.r.steppable(st)
}

// settleBegun: an orphan pass the proxy cannot step (its owner queued in
// both work queues, bothQueued) is the real worker's already, with the
// dependents it read when it took the owner; the real GC finishes it in
// its settle, and the model takes it before its settle path, which
// might deliver a new dependent first.
func (us upstreamSystem) settleBegun(st model.Step) bool {
	return st.Op == model.OpAttemptToOrphan && bothQueued(us.r.s, st)
}

func (us upstreamSystem) dump() ([]string, error) { return us.r.d.Dump(us.r.ctx) }

// redump waits for the GC's Warning events, recorded asynchronously.
func (us upstreamSystem) redump(want []string) ([]string, error) {
	return redumpUntil(us.dump, want)
}

func (us upstreamSystem) settle() error { return us.h.Settle(us.r.ctx) }

// beginUpstream makes the run's driver and namespaces and holds the
// proxy for them.
func (r *steppedRun) beginUpstream() error {
	var err error
	if r.d, err = driver.New(r.env.Admin, r.env.Limited, "cascade-"+driver.NewRunID()); err != nil {
		return err
	}
	if err := r.d.EnsureNamespaces(r.ctx, r.cfg.Universe.Namespaces); err != nil {
		return err
	}
	h, err := r.env.Hold(r.ctx, r.d)
	if err != nil {
		return fmt.Errorf("hold kube-controller-manager's traffic: %w", err)
	}
	r.hold = h
	r.sys = upstreamSystem{r: r, h: h, failures: map[string]int{}, misscaled: map[string]string{}}
	return nil
}
