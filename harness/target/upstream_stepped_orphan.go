package target

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/model"
)

// The attemptToOrphan step of upstream-stepped: which of the GC's held
// and new requests are the pass of one owner's orphan worker.

// orphanUID is the real UID of the owner st's orphan worker passes: its
// item's in prev's attemptToOrphan queue, else its object's.
func (u upstreamStepped) orphanUID(prev *model.State, st model.Step) string {
	for _, id := range prev.GC.AttemptToOrphan {
		if id.Kind == st.Target.Kind.Info().Kind && id.Namespace == st.Target.Namespace && id.Name == st.Target.Name {
			return u.d.RealUID(prev.UIDLabel(id.UID))
		}
	}
	ns := st.Target.Namespace
	if !st.Target.Kind.Info().Namespaced {
		ns = ""
	}
	if obj := prev.Lookup(st.Target.Kind, ns, st.Target.Name); obj != nil {
		return u.d.RealUID(prev.UIDLabel(obj.UID))
	}
	return ""
}

// orphanFinalizer reports whether the object of st's key has the orphan
// finalizer in prev: what the orphan worker's removeFinalizer GET finds.
func orphanFinalizer(prev *model.State, st model.Step) bool {
	ns := st.Target.Namespace
	if !st.Target.Kind.Info().Namespaced {
		ns = ""
	}
	obj := prev.Lookup(st.Target.Kind, ns, st.Target.Name)
	return obj != nil && slices.Contains(obj.Finalizers, model.FinalizerOrphan)
}

// orphanDependents are the real objects of the dependents st's orphan
// pass PATCHes, in prev, in the model's order (its node's dependents, or
// those a node removed from the graph kept: Detached, sorted by UID): the
// order of their watch events in the model. Dependents of custom kinds
// are left out (their PATCHes go in any order).
func (u upstreamStepped) orphanDependents(prev *model.State, st model.Step) []object {
	i := slices.IndexFunc(prev.GC.AttemptToOrphan, func(id model.Identity) bool {
		return id.Kind == st.Target.Kind.Info().Kind && id.Namespace == st.Target.Namespace && id.Name == st.Target.Name
	})
	if i < 0 {
		return nil
	}
	uid := prev.GC.AttemptToOrphan[i].UID
	var deps []model.UID
	if j := slices.IndexFunc(prev.GC.Detached, func(d model.Detached) bool { return d.UID == uid }); j >= 0 {
		deps = prev.GC.Detached[j].Dependents
	} else if j := slices.IndexFunc(prev.GC.Nodes, func(n model.Node) bool { return n.UID == uid }); j >= 0 {
		deps = prev.GC.Nodes[j].Dependents
	}
	var out []object
	for _, du := range deps {
		j := slices.IndexFunc(prev.GC.Nodes, func(n model.Node) bool { return n.UID == du })
		if j < 0 {
			continue
		}
		n := prev.GC.Nodes[j]
		kind, ok := model.KindByName(n.Kind)
		if !ok || kind.Info().Custom {
			continue
		}
		if o, err := u.object(model.Step{Actor: model.ActorGC, Op: model.OpAttemptToDelete, Target: model.Target{Kind: kind, Namespace: n.Namespace, Name: n.Name}}); err == nil {
			out = append(out, o)
		}
	}
	return out
}

// attemptToOrphan lets the requests of o's orphan worker's pass
// through (orphanPass): those it sent when the owner's deletion reached
// the graph builder and the proxy holds (its PATCHes of dependents, and
// its requests about the owner), and those it sends now, until
// removeFinalizer ends the pass: its write of the owner, the orphan
// finalizer's removal, answered, or its GET of the owner answered 404,
// or, when the owner has no orphan finalizer left (finalizer false: a
// later delete switched it to foregroundDeletion), answered at all
// ("finalizer already removed", no write). Another owner's orphan
// worker, waiting on its PATCH of a dependent, stays held: its pass is
// another step's. orphanDependents sends its PATCHes of the dependents
// at once, each from a goroutine of its own, so they land in any order;
// the step releases those of deps one at a time, in deps' order, the
// model's, whose watch events come in that order.
func (u upstreamStepped) attemptToOrphan(ctx context.Context, o object, ownerUID string, deps []object, finalizer bool) error {
	since := time.Now()
	pass := &orphanPass{o: o, ownerUID: ownerUID, ordered: deps, decided: u.decided.held, other: u.otherGET}
	u.st.Open(&proxy.Window{Admits: pass.admits})
	defer u.st.CloseWindow()
	u.st.ReleaseAll(func(r proxy.Request) bool { return proxy.GCHeld(&r) && pass.admits(r) })
	for _, d := range deps {
		r, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return pass.dependentPatch(r, d) })
		if err != nil {
			return err
		}
		if !ok {
			return &proxy.Divergence{Expected: "the orphan worker's PATCH of " + d.String() + " removing its reference to " + o.String() + ", held", Observed: "none within " + StepBound.String() + held(u.st)}
		}
		if _, err := u.st.Release(ctx, StepBound, r.ID); err != nil {
			return err
		}
	}
	// removeFinalizer ends the item: its write of the owner, or its GET
	// finding the owner gone, or the finalizer gone
	_, ok, err := u.st.AwaitAnswer(ctx, StepBound, since, func(r proxy.Request) bool {
		return o.is(r) && (isWrite(r) && !u.decided.held(r) && len(r.RemovedOwners) == 0 || r.Verb == proxy.VerbGet && u.otherGET(r) && (r.Code == 404 || !finalizer && r.Code != 0))
	})
	if err != nil {
		return err
	}
	if !ok {
		return &proxy.Divergence{Expected: "the GC's write of " + o.String() + " removing the orphan finalizer (or its GET finding it gone)", Observed: "none answered within " + StepBound.String() + held(u.st)}
	}
	_, err = u.st.Quiet(ctx, QuietWindow, StepBound)
	return err
}

// orphanPass tells which GC requests are of a pass of o's orphan worker
// (attemptToOrphanWorker), whose owner has the real UID ownerUID:
// orphanDependents' PATCH of each dependent deleting its reference to
// ownerUID (deleteOwnerRefStrategicMergePatch; the proxy reads the body,
// proxy.Request.RemovedOwners) and, for a dependent whose kind takes no
// strategic merge patch (a custom resource), the GET and JSON merge
// PATCH that follow that PATCH's 415; then removeFinalizer's GET of o and
// its PATCH of o's finalizers. Not one: the first GET of an
// attemptToDelete pass (other false), which waits for its own step; a
// write an attemptToDelete step decided (decided), held for its `gc
// delete|patch|unblock`; and another orphan worker's PATCH of a dependent
// of its own owner, o included (a reference to another owner deleted).
type orphanPass struct {
	o              object
	ownerUID       string
	decided, other func(proxy.Request) bool
	// ordered are the dependents whose PATCHes the step releases one at
	// a time (dependentPatch); admits holds them
	ordered []object
	mu      sync.Mutex
	// patched are the dependents whose PATCH came
	patched []object
}

// admits reports whether r is of the pass and passes as it comes (the
// window's and the first release's predicate): any of its requests but
// the PATCHes of the ordered dependents.
func (p *orphanPass) admits(r proxy.Request) bool {
	if p.decided(r) || r.Verb == proxy.VerbGet && !p.other(r) {
		return false
	}
	target := object{group: r.Group, resource: r.Resource, ns: r.Namespace, name: r.Name}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Verb == proxy.VerbPatch && slices.Contains(r.RemovedOwners, p.ownerUID):
		if slices.Contains(p.ordered, target) {
			return false
		}
		p.patched = append(p.patched, target)
		return true
	case r.Verb == proxy.VerbPatch && len(r.RemovedOwners) > 0:
		return false
	case r.Verb != proxy.VerbGet && r.Verb != proxy.VerbPatch:
		return false
	case p.o.names(r):
		return true
	}
	return slices.Contains(p.patched, target)
}

// dependentPatch reports whether r is the pass's PATCH of the dependent
// d, one of the ordered; once it is, d's GET and merge PATCH after a 415
// are the pass's too.
func (p *orphanPass) dependentPatch(r proxy.Request, d object) bool {
	if r.Verb != proxy.VerbPatch || !proxy.GCHeld(&r) || !d.is(r) || !slices.Contains(r.RemovedOwners, p.ownerUID) || p.decided(r) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.patched, d) {
		p.patched = append(p.patched, d)
	}
	return true
}
