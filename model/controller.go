package model

// Adoption is one adoption the controller could attempt: Owner adopts Dep.
type Adoption struct{ Owner, Dep UID }

// adoptions lists what the controller would adopt from its cache, the way
// ClaimObjects does: an owner not being deleted whose selector matches an
// object in its namespace that has no controller reference and is not
// being deleted.
func adoptions(s *State) []Adoption {
	c := s.Controller.Watch.Cache
	var out []Adoption
	for i := range c {
		o := &c[i]
		adopts := o.Kind.Info().Adopts
		if adopts == "" || o.Deleting || o.Selector.Key == "" {
			continue
		}
		for j := range c {
			d := &c[j]
			if d.Kind.Info().Short != adopts || d.Namespace != o.Namespace || d.Deleting || hasControllerRef(d) {
				continue
			}
			if v, set := d.Label(o.Selector.Key); set && v == o.Selector.Value {
				out = append(out, Adoption{Owner: o.UID, Dep: d.UID})
			}
		}
	}
	return out
}

func hasControllerRef(o *Object) bool {
	for _, r := range o.Owners {
		if r.Controller {
			return true
		}
	}
	return false
}

// adopt runs one adoption. Upstream's ControllerRefManager first re-reads
// the owner live (RecheckDeletionTimestamp, kubernetes#42938) and refuses
// when it is gone or being deleted; BugAdoptWithoutRecheck trusts the
// cache. The adoption itself is a patch carrying the dependent's UID.
func (m *Model) adopt(s *State, a Adoption) Result {
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
		if _, has := o.OwnerRefTo(ref.UID); has {
			return ok(200)
		}
		o.Owners = append(append([]OwnerRef(nil), o.Owners...), ref)
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
