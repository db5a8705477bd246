package target

import (
	"context"
	"slices"
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
// another step's.
func (u upstreamStepped) attemptToOrphan(ctx context.Context, o object, ownerUID string, finalizer bool) error {
	since := time.Now()
	mine := orphanPass(o, ownerUID, u.decided.held, u.otherGET)
	u.st.Open(&proxy.Window{Admits: mine})
	defer u.st.CloseWindow()
	u.st.ReleaseAll(func(r proxy.Request) bool { return proxy.GCHeld(&r) && mine(r) })
	// removeFinalizer ends the item: its write of the owner, or its GET
	// finding the owner gone, or the finalizer gone
	_, ok, err := u.st.AwaitAnswer(ctx, StepBound, since, func(r proxy.Request) bool {
		return o.is(r) && (isWrite(r) && !u.decided.held(r) && !removesOther(r, ownerUID) || r.Verb == proxy.VerbGet && u.otherGET(r) && (r.Code == 404 || !finalizer && r.Code != 0))
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

// removesOther reports whether r, a PATCH, deletes owner references and
// none to the owner of UID ownerUID: another orphan worker's PATCH of a
// dependent of its owner (or an attemptToDelete worker's removing
// dangling references).
func removesOther(r proxy.Request, ownerUID string) bool {
	return len(r.RemovedOwners) > 0 && !slices.Contains(r.RemovedOwners, ownerUID)
}

// orphanPass reports whether a GC request is one of a pass of o's orphan
// worker (attemptToOrphanWorker), whose owner has the real UID ownerUID:
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
// It is stateful: a dependent's GET and merge PATCH are its after its
// strategic merge PATCH was accepted.
func orphanPass(o object, ownerUID string, decided, other func(proxy.Request) bool) func(proxy.Request) bool {
	var patched []object
	return func(r proxy.Request) bool {
		if decided(r) || r.Verb == proxy.VerbGet && !other(r) {
			return false
		}
		target := object{group: r.Group, resource: r.Resource, ns: r.Namespace, name: r.Name}
		switch {
		case r.Verb == proxy.VerbPatch && slices.Contains(r.RemovedOwners, ownerUID):
			patched = append(patched, target)
			return true
		case r.Verb == proxy.VerbPatch && len(r.RemovedOwners) > 0:
			return false
		case r.Verb != proxy.VerbGet && r.Verb != proxy.VerbPatch:
			return false
		case o.names(r):
			return true
		}
		return slices.Contains(patched, target)
	}
}
