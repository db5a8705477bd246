package model

import (
	"cmp"
	"slices"
)

// Claim is one ClaimObject outcome the controller could act on: Owner
// adopts Dep, or (Release) drops its controller reference from Dep.
type Claim struct {
	Owner, Dep UID
	Release    bool
}

// selector is an adopting workload's effective selector: the trace's, or
// the default that names the object (the driver builds the same).
func selector(o *Object) Label {
	if o.Selector.Key != "" {
		return o.Selector
	}
	return Label{DefaultSelectorLabel, o.Name}
}

func matches(sel Label, d *Object) bool {
	v, set := d.Label(sel.Key)
	return set && v == sel.Value
}

// claims lists what the controller would do from its cache, the way
// ControllerRefManager.ClaimObject decides (controller_ref_manager.go):
//   - an object whose controller reference names this owner and no longer
//     matches its selector is released, unless the owner is being deleted;
//   - an object without a controller reference that matches, in the
//     owner's namespace, not being deleted, is adopted, unless the owner is
//     being deleted;
//   - a Pod being deleted is neither: the ReplicaSet and
//     ReplicationController controllers claim only active Pods
//     (FilterActivePods runs before ClaimPods), while a Deployment's
//     ClaimReplicaSets filters nothing.
func claims(s *State) []Claim {
	c := s.Controller.Watch.Cache
	var out []Claim
	for i := range c {
		o := &c[i]
		adopts := o.Kind.Info().Adopts
		if adopts == "" || o.Deleting {
			continue
		}
		sel := selector(o)
		for j := range c {
			d := &c[j]
			if d.Kind.Info().Short != adopts || d.Namespace != o.Namespace || (adopts == "pod" && d.Deleting) {
				continue
			}
			ctrl, owned := controllerRef(d)
			switch {
			case owned && ctrl.UID == o.UID && !matches(sel, d):
				out = append(out, Claim{Owner: o.UID, Dep: d.UID, Release: true})
			case !owned && !d.Deleting && matches(sel, d):
				out = append(out, Claim{Owner: o.UID, Dep: d.UID})
			}
		}
	}
	return out
}

func controllerRef(o *Object) (OwnerRef, bool) {
	for _, r := range o.Owners {
		if r.Controller {
			return r, true
		}
	}
	return OwnerRef{}, false
}

// adopt runs one adoption. Upstream's ControllerRefManager first re-reads
// the owner live (RecheckDeletionTimestamp, kubernetes#42938) and refuses
// when it is gone or being deleted; BugAdoptWithoutRecheck trusts the
// cache. The adoption itself is a patch carrying the dependent's UID.
func (m *Model) adopt(s *State, a Claim) Result {
	owner := s.Controller.Watch.cached(a.Owner)
	dep := s.Controller.Watch.cached(a.Dep)
	if !m.Bugs.Has(BugAdoptWithoutRecheck) {
		live := s.Lookup(owner.Kind, owner.Namespace, owner.Name)
		if live == nil || live.UID != owner.UID {
			return fail(404, "NotFound", "original %s %s is gone: got uid %s, wanted %s", owner.Kind.Info().Kind, owner.Name, "none", s.UIDLabel(owner.UID))
		}
		if live.Deleting {
			return fail(409, "Conflict", "%s %s has just been deleted", owner.Kind.Info().Kind, owner.Name)
		}
	}
	ref := OwnerRef{Kind: owner.Kind.Info().Kind, Name: owner.Name, UID: owner.UID, Controller: true, Block: true}
	rq := request{by: ActorController, admit: true}
	return m.update(s, rq, TargetOf(dep), dep.UID, 0, func(o *Object) Result {
		// The list merges by UID (patchMergeKey "uid"): a reference the
		// object already has to this owner keeps its place and takes the
		// patch's fields, becoming the blocking controller reference.
		// Owners slices are copy-on-write (State.Clone): build a new one.
		for i := range o.Owners {
			if o.Owners[i].UID == ref.UID {
				o.Owners = append([]OwnerRef(nil), o.Owners...)
				o.Owners[i] = ref
				return ok(200)
			}
		}
		// The adoption is a strategic merge patch whose ownerReferences
		// list holds only the new reference; the API server's merge
		// (strategicpatch mergeSlice, normalizeElementOrder) puts a patch
		// element the object did not have before the ones it had.
		o.Owners = append([]OwnerRef{ref}, o.Owners...)
		return ok(200)
	})
}

// release drops the owner's reference from a dependent that no longer
// matches (ReleasePod and friends: a strategic merge patch deleting the
// reference by UID, carrying the dependent's UID).
func (m *Model) release(s *State, c Claim) Result {
	dep := s.Controller.Watch.cached(c.Dep)
	rq := request{by: ActorController, admit: true}
	return m.update(s, rq, TargetOf(dep), dep.UID, 0, func(o *Object) Result {
		var owners []OwnerRef
		for _, r := range o.Owners {
			if r.UID != c.Owner {
				owners = append(owners, r)
			}
		}
		o.Owners = owners
		return ok(200)
	})
}

// crdCleanups lists CRDs whose cleanup the apiextensions finalizer
// controller can advance.
func crdCleanups(s *State) []UID {
	var out []UID
	for i := range s.Objects {
		o := &s.Objects[i]
		if o.Kind == crdKind() && o.Deleting && o.HasFinalizer(FinalizerCRDCleanup) {
			out = append(out, o.UID)
		}
	}
	return out
}

// crdCleanup is apiextensions-apiserver's finalizer controller: delete
// every custom resource of the CRD (through storage, without admission),
// and once none is left remove the cleanup finalizer.
func (m *Model) crdCleanup(s *State, crd UID) Result {
	c := s.Get(crd)
	k, _ := kindForCRD(c.Name)
	rq := request{by: ActorAPIExtensions}
	var targets []Target
	for i := range s.Objects {
		if o := &s.Objects[i]; o.Kind == k && !o.Deleting {
			targets = append(targets, TargetOf(o))
		}
	}
	// the finalizer controller lists the resources (in storage key order:
	// namespace, then name) and deletes each namespace's with
	// DeleteCollection, which deletes in list order (one worker, the
	// kube-apiserver default): their events come in that order
	slices.SortFunc(targets, func(a, b Target) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, t := range targets {
		m.delete(s, rq, t, DeleteOptions{})
	}
	for i := range s.Objects {
		if s.Objects[i].Kind == k {
			return ok(200) // still waiting for custom resources with finalizers
		}
	}
	c = s.Get(crd)
	return m.update(s, rq, TargetOf(c), c.UID, 0, func(o *Object) Result {
		var fs []string
		for _, f := range o.Finalizers {
			if f != FinalizerCRDCleanup {
				fs = append(fs, f)
			}
		}
		o.Finalizers = fs
		return ok(200)
	})
}
