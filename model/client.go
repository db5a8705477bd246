package model

import (
	"fmt"
	"slices"
)

// resolveOwner turns an OwnerSpec into an OwnerRef: the UID of the live
// owner, or of the most recent incarnation of that key, or a symbolic UID
// (allocated on first use).
func (s *State) resolveOwner(o OwnerSpec) (OwnerRef, error) {
	ref := OwnerRef{Kind: o.Kind, Name: o.Name, Controller: o.Controller, Block: o.Block,
		ControllerUnset: o.ControllerUnset, BlockUnset: o.BlockUnset}
	switch {
	case o.UIDSym == "-":
		// uid= left empty on purpose: validation rejects it
	case o.UIDSym != "":
		u, found := s.UIDBySymbol(o.UIDSym)
		if !found {
			if _, taken := s.UIDByLabel(o.UIDSym); taken {
				u, _ = s.UIDByLabel(o.UIDSym)
			} else {
				u = s.newUID(UIDInfo{Kind: NoKind, Symbol: o.UIDSym})
			}
		}
		ref.UID = u
	default:
		k, known := KindByName(o.Kind)
		if !known {
			return ref, fmt.Errorf("owner %s/%s: kind %s is not served, so it needs uid=SYMBOL", o.Kind, o.Name, o.Kind)
		}
		ns := o.Namespace
		if !k.Info().Namespaced {
			ns = ""
		}
		if live := s.Lookup(k, ns, o.Name); live != nil {
			ref.UID = live.UID
			break
		}
		for i := len(s.UIDs) - 1; i >= 0; i-- {
			if u := s.UIDs[i]; u.Kind == k && u.Namespace == ns && u.Name == o.Name {
				ref.UID = UID(i + 1)
				break
			}
		}
		if ref.UID == 0 {
			return ref, fmt.Errorf("owner %s was never created: give it uid=SYMBOL", ObjKey(k, ns, o.Name))
		}
	}
	return ref, nil
}

func (m *Model) applyClient(s *State, st *Step) (Result, error) {
	rq := request{by: ActorClient, principal: st.Principal, admit: true}
	t := st.Target
	if t.Kind == NoKind {
		return Result{}, fmt.Errorf("%s: clients can only name served kinds", t)
	}
	switch st.Op {
	case OpCreate:
		o := Object{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, Labels: st.Labels, Selector: st.Selector, Replicas: st.Replicas, Finalizers: st.Finalizers}
		for _, os := range st.Owners {
			ref, err := s.resolveOwner(os)
			if err != nil {
				return Result{}, err
			}
			// the API server drops a reference equal to an earlier one
			// before validating, with a warning (dedupOwnerReferences in
			// k8s.io/apiserver/pkg/endpoints/handlers/rest.go); refs to
			// one UID that differ in a field all stay
			if !slices.Contains(o.Owners, ref) {
				o.Owners = append(o.Owners, ref)
			}
		}
		return m.create(s, rq, o), nil
	case OpDelete:
		opts := st.Delete
		if st.IfUIDSym != "" {
			u, found := s.UIDByLabel(st.IfUIDSym)
			if !found {
				u = s.newUID(UIDInfo{Kind: NoKind, Symbol: st.IfUIDSym})
			}
			opts.PreconditionUID = u
		}
		before := s.Lookup(t.Kind, t.Namespace, t.Name)
		var prev Object
		if before != nil {
			prev = *before
		}
		r := m.delete(s, rq, t, opts)
		if r.OK() && before != nil {
			s.trackOrphanRequest(&prev, s.Get(prev.UID))
		}
		return r, nil
	case OpAddFinalizer, OpRemoveFinalizer:
		before := s.Lookup(t.Kind, t.Namespace, t.Name)
		var prev Object
		if before != nil {
			prev = *before
		}
		r := m.update(s, rq, t, 0, st.IfRV, func(o *Object) Result {
			if st.Op == OpAddFinalizer {
				if !o.HasFinalizer(st.Finalizer) {
					o.Finalizers = append(slices.Clip(o.Finalizers), st.Finalizer)
				}
				return ok(200)
			}
			o.Finalizers = slices.DeleteFunc(slices.Clone(o.Finalizers), func(f string) bool { return f == st.Finalizer })
			return ok(200)
		})
		if r.OK() && before != nil {
			s.trackOrphanRequest(&prev, s.Get(prev.UID))
		}
		return r, nil
	case OpAddOwner:
		ref, err := s.resolveOwner(st.Owner)
		if err != nil {
			return Result{}, err
		}
		if d := s.Lookup(t.Kind, t.Namespace, t.Name); d != nil {
			if _, had := d.OwnerRefTo(ref.UID); !had {
				defer s.dropOrphanWatch(ref.UID, d.UID)
			}
		}
		return m.update(s, rq, t, 0, st.IfRV, func(o *Object) Result {
			owners := slices.Clone(o.Owners)
			if i := slices.IndexFunc(owners, func(r OwnerRef) bool { return r.UID == ref.UID }); i >= 0 {
				owners[i] = ref
			} else {
				owners = append(owners, ref)
			}
			o.Owners = owners
			return ok(200)
		}), nil
	case OpRemoveOwner:
		return m.update(s, rq, t, 0, st.IfRV, func(o *Object) Result {
			o.Owners = slices.DeleteFunc(slices.Clone(o.Owners), func(r OwnerRef) bool {
				return r.Kind == st.Owner.Kind && r.Name == st.Owner.Name
			})
			return ok(200)
		}), nil
	case OpLabel, OpUnlabel:
		return m.update(s, rq, t, 0, st.IfRV, func(o *Object) Result {
			ls := slices.DeleteFunc(slices.Clone(o.Labels), func(l Label) bool { return l.Key == st.Label.Key })
			if st.Op == OpLabel {
				ls = append(ls, st.Label)
				slices.SortFunc(ls, func(a, b Label) int {
					if a.Key < b.Key {
						return -1
					}
					return 1
				})
			}
			o.Labels = ls
			return ok(200)
		}), nil
	case OpScale:
		if !t.Kind.Info().Workload {
			return Result{}, fmt.Errorf("scale %s: %s has no replicas", t, t.Kind.Info().Kind)
		}
		return m.update(s, rq, t, 0, st.IfRV, func(o *Object) Result {
			o.Replicas = st.Replicas
			return ok(200)
		}), nil
	}
	return Result{}, fmt.Errorf("client cannot do op %d", st.Op)
}

// dropOrphanWatch withdraws the orphan-respected promise for dep when a
// client gives it a reference to owner that it did not have (one the
// orphaning removed, say): the orphan request protects the references
// that existed when it was made, and collecting an object for a
// reference written afterwards, to an owner that is gone, is the GC's
// job (traces/scenarios/orphan-reference-added-back.trace). Deferred,
// it runs after the update; a refused update withdraws nothing.
func (s *State) dropOrphanWatch(owner, dep UID) {
	if d := s.Get(dep); d == nil {
		return
	} else if _, has := d.OwnerRefTo(owner); !has {
		return
	}
	if slices.ContainsFunc(s.Orphans, func(w OrphanWatch) bool { return w.Owner == owner && w.Dep == dep }) {
		s.Orphans = slices.DeleteFunc(slices.Clone(s.Orphans), func(w OrphanWatch) bool { return w.Owner == owner && w.Dep == dep })
	}
}

// trackOrphanRequest maintains the orphan-respected ghost: when a client
// request leaves an object with the orphan finalizer it did not have,
// every object referencing it then is a dependent that must not be
// deleted because of it. When a client request takes the orphan
// finalizer away (switching to another policy, or removing it by hand),
// the promise is withdrawn.
func (s *State) trackOrphanRequest(prev, next *Object) {
	had := prev.Deleting && prev.HasFinalizer(FinalizerOrphan)
	has := next != nil && next.Deleting && next.HasFinalizer(FinalizerOrphan)
	switch {
	case has && !had:
		for i := range s.Objects {
			d := &s.Objects[i]
			if _, refs := d.OwnerRefTo(prev.UID); refs && !slices.ContainsFunc(s.Orphans, func(w OrphanWatch) bool { return w.Owner == prev.UID && w.Dep == d.UID }) {
				s.Orphans = append(slices.Clip(s.Orphans), OrphanWatch{Owner: prev.UID, Dep: d.UID, Switched: prev.Deleting})
			}
		}
	case had && !has:
		// next == nil too: a request that took the orphan finalizer
		// away and so let the object go (a Background or Foreground
		// DELETE of an object orphan-deleting with no other finalizer)
		s.Orphans = slices.DeleteFunc(slices.Clone(s.Orphans), func(w OrphanWatch) bool { return w.Owner == prev.UID && !w.Ran })
	}
}
