package target

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/model"
)

// The attemptToDelete step of upstream-stepped: which held GET begins
// the pass of the model's work item, and which of the worker's further
// requests the step lets through.

// owners are the real objects the owner references of st's work item
// name in prev, in their order, one per reference: the GETs
// attemptToDeleteItem's isDangling sends. A reference the absent owner
// cache answers sends none; one of a kind without a REST mapping (nobody
// serves it) or of a namespaced owner of a cluster-scoped object ends
// the pass without a request, and the references after it are not
// looked at. A node deleting its dependents sends none
// (processDeletingDependentsItem). When the worker's GET of the item's
// key finds no object with the item's UID (a virtual owner, or an object
// deleted and made again), the worker queues a virtual delete event and
// GETs nothing more: no owners, although the key may name a live object
// with references (a virtual owner named by its own dependent's key).
func (u upstreamStepped) owners(st model.Step, prev *model.State) []object {
	ns := st.Target.Namespace
	if !st.Target.Kind.Info().Namespaced {
		ns = "" // getObject drops a virtual node's borrowed namespace
	}
	obj := prev.Lookup(st.Target.Kind, ns, st.Target.Name)
	if obj == nil {
		return nil // a virtual node: no object, no references
	}
	item, ok := queuedItem(prev, st)
	if ok && item.UID != obj.UID {
		return nil
	}
	// a node deleting its dependents (foreground) is passed by
	// processDeletingDependentsItem, which looks no owner up: it queues
	// the blocking dependents, whose workers' first GETs may be of the
	// item's owners' keys, or removes the finalizer
	if ok && slices.ContainsFunc(prev.GC.Nodes, func(n model.Node) bool { return n.UID == item.UID && n.DeletingDependents }) {
		return nil
	}
	// isDangling looks owners up in the item's namespace, which a
	// virtual node of a cluster-scoped object borrows from the dependent
	// it was made from (kubernetes#124378)
	itemNS := st.Target.Namespace
	var out []object
	for _, ref := range obj.Owners {
		if absent(prev, ref, itemNS) {
			continue
		}
		kind, ok := model.KindByName(ref.Kind)
		if !ok || kind.Info().Custom {
			return out // restMappingError (no custom kind's CRD on upstream-stepped)
		}
		ns, ok := model.OwnerScope(kind, itemNS)
		if !ok {
			return out // namespacedOwnerOfClusterScopedObjectErr
		}
		if o, err := u.object(model.Step{Actor: model.ActorGC, Op: model.OpAttemptToDelete, Target: model.Target{Kind: kind, Namespace: ns, Name: ref.Name}}); err == nil {
			out = append(out, o)
		}
	}
	return out
}

// removesForegroundFinalizer reports whether st's pass, in prev, is
// processDeletingDependentsItem of a node no dependent in the graph
// blocks: it calls removeFinalizer, whose GET of the item follows the
// pass's first GET whether or not the object still has the
// foregroundDeletion finalizer (already removed, it writes nothing and
// the model's state does not change: the node stays deleting its
// dependents, and a dependent's deletion queues it again).
func removesForegroundFinalizer(prev *model.State, st model.Step) bool {
	item, ok := queuedItem(prev, st)
	if !ok {
		return false
	}
	node := func(uid model.UID) *model.Node {
		if i := slices.IndexFunc(prev.GC.Nodes, func(n model.Node) bool { return n.UID == uid }); i >= 0 {
			return &prev.GC.Nodes[i]
		}
		return nil
	}
	n := node(item.UID)
	if n == nil || !n.DeletingDependents {
		return false
	}
	// blockingDependents: a dependent whose reference to n blocks
	for _, du := range n.Dependents {
		if d := node(du); d != nil && slices.ContainsFunc(d.Owners, func(r model.OwnerRef) bool { return r.UID == n.UID && r.Block }) {
			return false
		}
	}
	return true
}

// absent reports whether the GC's absentOwnerCache in s holds the owner
// ref names, as isDangling looks it up: without a namespace, then in
// the dependent's.
func absent(s *model.State, ref model.OwnerRef, ns string) bool {
	return slices.ContainsFunc(s.GC.Absent, func(a model.Identity) bool {
		return a.UID == ref.UID && a.Kind == ref.Kind && a.Name == ref.Name && (a.Namespace == "" || a.Namespace == ns)
	})
}

// queuedItem is the work item st passes in prev's attemptToDelete queue:
// the one of its key, or of its key and uid= when it names one (ok
// false: none is queued).
func queuedItem(prev *model.State, st model.Step) (model.Identity, bool) {
	for _, id := range prev.GC.AttemptToDelete {
		if st.UIDLabel != "" && prev.UIDLabel(id.UID) != st.UIDLabel {
			continue
		}
		// a virtual owner of a cluster-scoped kind carries its
		// dependent's namespace, as the step does
		if id.Kind == st.Target.Kind.Info().Kind && id.Namespace == st.Target.Namespace && id.Name == st.Target.Name {
			return id, true
		}
	}
	return model.Identity{}, false
}

// itemUID is the real UID of the work item st passes, as prev's
// attemptToDelete queue holds it ("": none queued).
func (u upstreamStepped) itemUID(prev *model.State, st model.Step) string {
	item, ok := queuedItem(prev, st)
	if !ok {
		return ""
	}
	return u.d.RealUID(prev.UIDLabel(item.UID))
}

// attemptToDelete releases the held first GET of the pass of o's work
// item of real UID uid ("": any item of o's key) and lets through, while
// the step lasts, the GETs of o's owners (isDangling) and no other:
// another item's worker retrying on its back-off timer sends its first
// GET whenever the timer fires, and that GET waits for the item's own
// step. Another item of o's key may hold its first GET too: a virtual
// node of o's coordinates with another UID, which an idle worker took
// before the graph replaced it with the observed object elsewhere (the
// model's queue then holds no such item: its pass would do nothing), and
// whose pass the final settle releases.
func (u upstreamStepped) attemptToDelete(ctx context.Context, o object, uid, ns string, owners []object, prev, next *model.State) error {
	get, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return r.Verb == proxy.VerbGet && o.is(r) && u.passGET(r, uid, ns) })
	if err != nil {
		return err
	}
	if !ok {
		why := ""
		if u.ambiguous(o) {
			why = "; the first GETs of passes of two items of its key, held, cannot be told apart"
		}
		return &proxy.Divergence{Expected: "a GC worker's GET of " + o.String(), Observed: "none within " + StepBound.String() + held(u.st) + why}
	}
	before := u.st.HeldIDs()
	immediate := !slices.Equal(prev.Dump(), next.Dump())
	w := &proxy.Window{Admits: attemptWindow(o, owners, immediate, u.otherGET)}
	u.st.Open(w)
	defer u.st.CloseWindow()
	if _, err := u.st.Release(ctx, StepBound, get.ID); err != nil {
		return err
	}
	want, writes := inFlightFor(prev, next)
	switch {
	case writes:
		// held writes of o from before the step are another worker's
		// (attemptToOrphan's PATCH of a dependent)
		w, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool {
			return r.Verb == writeVerb(want.Op) && o.is(r) && !slices.Contains(before, r.ID)
		})
		if err != nil {
			return err
		}
		if !ok {
			return &proxy.Divergence{Expected: fmt.Sprintf("the GC's %s of %s, held", strings.ToUpper(writeVerb(want.Op)), o), Observed: "none within " + StepBound.String() + held(u.st)}
		}
		u.decided[o.String()] = w.ID
		return nil
	case immediate:
		// the foregroundDeletion finalizer's removal
		ok, err := u.st.AwaitAdmitted(ctx, StepBound, func(admitted []proxy.Request) bool {
			return slices.ContainsFunc(admitted, func(r proxy.Request) bool { return isWrite(r) && o.is(r) && r.Code != 0 })
		})
		if err != nil {
			return err
		}
		if !ok {
			return &proxy.Divergence{Expected: "the GC's write of " + o.String() + " (the state the model reaches: " + strings.Join(next.Dump(), "; ") + ")", Observed: "none answered within " + StepBound.String() + held(u.st)}
		}
	}
	if _, err := u.st.Quiet(ctx, QuietWindow, StepBound); err != nil {
		return err
	}
	if r, ok, _ := u.st.WaitRequest(ctx, 0, func(r proxy.Request) bool { return isWrite(r) && o.is(r) && !slices.Contains(before, r.ID) }); ok {
		return &proxy.Divergence{Expected: "no write of " + o.String(), Observed: proxy.DescribeRequest(r) + " held"}
	}
	return nil
}

// attemptWindow admits, while o's attemptToDelete step lasts, each GET
// of an owner of o's once (owners has one entry per GET the pass sends),
// and o's requests when the step changes o at once (the
// foregroundDeletion finalizer's removal), but no GET other does not
// accept: the first GET of another item's pass (kcmPasses), which may
// be of an owner's key (its own pass, begun when the owner was queued,
// while o's worker looks it up) or of o's (its next pass, queued again).
// Admitting a GET of an owner's key more often would let through the
// first GET of the item's next pass when o names itself as owner: the
// real GC retries a requeued item after 5 ms, doubling.
func attemptWindow(o object, owners []object, immediate bool, other func(proxy.Request) bool) func(proxy.Request) bool {
	left := slices.Clone(owners)
	return func(r proxy.Request) bool {
		if r.Verb == proxy.VerbGet && other != nil && !other(r) {
			return false
		}
		if immediate && o.is(r) {
			return true
		}
		if r.Verb != proxy.VerbGet {
			return false
		}
		i := slices.IndexFunc(left, func(ow object) bool { return ow.is(r) })
		if i < 0 {
			return false
		}
		left = slices.Delete(left, i, i+1)
		return true
	}
}

// inFlightFor is the write the step put in flight: the first write of an
// item in flight in next and not in prev.
func inFlightFor(prev, next *model.State) (model.Write, bool) {
	for _, f := range next.GC.InFlight {
		if !slices.ContainsFunc(prev.GC.InFlight, func(p model.InFlight) bool { return p.UID == f.UID }) {
			return f.Writes[0], true
		}
	}
	return model.Write{}, false
}
