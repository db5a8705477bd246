package fuzz

import (
	"slices"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/model"
)

// What a stepped run's generator reads of the model state. A stepped run
// knows the state after every step, so it can aim: the GC's races live in
// the windows between a work item's decision and its write, and its
// hangs and wrong collections in particular shapes of the ownership
// graph. Random steps drawn blind reach those shapes rarely; these draws
// make them common, without naming any bug.

// liveKeys are the keys of the objects that exist in s, live or
// deleting, in creation order.
func liveKeys(s *model.State) []string {
	var out []string
	for _, u := range s.UIDs {
		if u.Kind == model.NoKind {
			continue
		}
		if o := s.Lookup(u.Kind, u.Namespace, u.Name); o != nil && !slices.Contains(out, o.Key()) {
			out = append(out, o.Key())
		}
	}
	return out
}

// hotKeys are the live objects the GC is working on: queued for
// attemptToDelete or attemptToOrphan, or with a decided write not yet
// sent. A client step on one of them lands inside a GC decision window,
// where the delete-after-GET and adoption-after-orphan races are.
func hotKeys(s *model.State) []string {
	var out []string
	add := func(uid model.UID) {
		if o := s.Get(uid); o != nil && !slices.Contains(out, o.Key()) {
			out = append(out, o.Key())
		}
	}
	g := &s.GC
	for _, id := range g.AttemptToDelete {
		add(id.UID)
	}
	for _, id := range g.AttemptToOrphan {
		add(id.UID)
	}
	for _, f := range g.InFlight {
		for _, w := range f.Writes {
			add(w.Item.UID)
		}
	}
	return out
}

// ownerClasses are the relationships an owner reference is drawn by. Each
// is a class of ownership graph the GC treats differently: a valid owner
// in the dependent's namespace, a cluster-scoped owner (its virtual node
// inherits the dependent's namespace), an owner in another namespace or a
// namespaced owner of a cluster-scoped dependent (invalid, reported and
// treated as absent), an owner that is already the dependent's dependent
// (a cycle, which foreground deletion must break), and the object itself.
var ownerClasses = []string{"any", "same-namespace", "cluster-scoped", "other-scope", "cycle", "self"}

// related draws an owner for dep by relationship class, or "" when the
// class drawn has no candidate (the caller then draws any object).
func (g *gen) related(t *rapid.T, dep string) string {
	s := g.state()
	class := rapid.SampledFrom(ownerClasses).Draw(t, "owner-class")
	_, depNS, _ := split(dep)
	depCluster := !namespaced(dep)
	var pool []string
	for _, k := range liveKeys(s) {
		_, ns, _ := split(k)
		ok := false
		switch class {
		case "any":
			ok = true
		case "same-namespace":
			ok = !depCluster && namespaced(k) && ns == depNS
		case "cluster-scoped":
			ok = !namespaced(k)
		case "other-scope":
			ok = namespaced(k) && (depCluster || ns != depNS)
		case "cycle":
			ok = owns(s, dep, k)
		case "self":
			ok = k == dep
		}
		if ok {
			pool = append(pool, k)
		}
	}
	if len(pool) == 0 {
		return ""
	}
	return rapid.SampledFrom(pool).Draw(t, "owner-"+class)
}

// namespaced reports whether a trace key names a namespaced kind.
func namespaced(key string) bool {
	k, _, _ := split(key)
	kind, _ := model.KindByShort(k)
	return kind.Info().Namespaced
}

// owns reports whether the object at key o has an ownerReference to the
// object at key owner, in s.
func owns(s *model.State, owner, o string) bool {
	ow, oo := lookupKey(s, owner), lookupKey(s, o)
	if ow == nil || oo == nil {
		return false
	}
	_, refs := oo.OwnerRefTo(ow.UID)
	return refs
}

// lookupKey finds the live object of a trace key.
func lookupKey(s *model.State, key string) *model.Object {
	k, ns, name := split(key)
	kind, ok := model.KindByShort(k)
	if !ok {
		return nil
	}
	if ns == "" && kind.Info().Namespaced {
		ns = model.DefaultNamespace
	}
	return s.Lookup(kind, ns, name)
}
