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

// hotKeys are the live objects inside a decision window: the GC's
// (queued for attemptToDelete or attemptToOrphan, or with a decided write
// not yet sent) and the adopting controller's (an adoption or release
// its cache offers). A client step on one of them lands where the
// delete-after-GET and adoption-after-orphan races are.
func hotKeys(m *model.Model, s *model.State) []string {
	var out []string
	add := func(uid model.UID) {
		if o := s.Get(uid); o != nil && !slices.Contains(out, o.Key()) {
			out = append(out, o.Key())
		}
	}
	addKey := func(t model.Target) {
		if o := s.Lookup(t.Kind, t.Namespace, t.Name); o != nil {
			add(o.UID)
		}
	}
	for _, st := range m.Enabled(s, model.Options{}) {
		if st.Actor == model.ActorController && (st.Op == model.OpAdopt || st.Op == model.OpRelease) {
			addKey(st.Target)
			addKey(st.By)
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
	live := liveKeys(s)
	class := rapid.SampledFrom(ownerClasses).Draw(t, "owner-class")
	if class != "cycle" && slices.ContainsFunc(live, func(k string) bool { return owns(s, dep, k) }) && rapid.IntRange(0, 2).Draw(t, "close-cycle") == 0 {
		// closing a cycle needs the one object that the dependent owns,
		// rarer than any other class's candidates: favour it
		class = "cycle"
	}
	_, depNS, _ := split(dep)
	depCluster := !namespaced(dep)
	var pool []string
	for _, k := range live {
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
	kind, ns, name, ok := resolveKey(key)
	if !ok {
		return nil
	}
	return s.Lookup(kind, ns, name)
}

// resolveKey reads a trace key (kind/name or kind/ns/name) as the model
// names objects: its kind, and a namespaced kind's namespace, the default
// one when the key gives none; ok is false for an unknown kind.
func resolveKey(key string) (kind model.KindID, ns, name string, ok bool) {
	k, ns, name := split(key)
	kind, ok = model.KindByShort(k)
	if ok && ns == "" && kind.Info().Namespaced {
		ns = model.DefaultNamespace
	}
	return kind, ns, name, ok
}

// cycle draws two live objects of one scope (namespace, or cluster) and
// the add-owner steps that make each the other's owner; the two may be
// one object, which then owns itself. References in cycles mostly block:
// blocking is what foreground deletion has to break. Nil when nothing is
// live.
func (g *gen) cycle(t *rapid.T) []string {
	live := liveKeys(g.state())
	if len(live) == 0 {
		return nil
	}
	a := rapid.SampledFrom(live).Draw(t, "cycle-a")
	_, ans, _ := split(a)
	var peers []string
	for _, k := range live {
		if _, ns, _ := split(k); namespaced(k) == namespaced(a) && ns == ans {
			peers = append(peers, k)
		}
	}
	b := rapid.SampledFrom(peers).Draw(t, "cycle-b")
	ref := func(owner string) string {
		k, _, name := split(owner)
		r := k + "/" + name
		if rapid.IntRange(0, 3).Draw(t, "cycle-controller") == 0 {
			r += ",controller"
		}
		if rapid.IntRange(0, 3).Draw(t, "cycle-block") > 0 {
			r += ",block"
		}
		return r
	}
	if a == b {
		return []string{"add-owner " + a + " " + ref(a)}
	}
	return []string{"add-owner " + a + " " + ref(b), "add-owner " + b + " " + ref(a)}
}

// family draws a workload and an object its controller would adopt, in
// one namespace: a create of the workload (when none of that name is
// live) and a create of the adoptee with the selector label (or, when one
// of that name is live, the label step that makes it match). Adoption
// needs all of it at once, the workload kind, its adoptee kind, one
// namespace and the label, which random creates draw together in few runs
// (about one in ten for rc and pod in the default universe), so that the
// controller's races — adoption by an owner being deleted, the GC's
// orphaning of what was just adopted — were rare. Without a state (a
// concurrent run) both are creates. adopters are the
// workload kinds whose controller runs. Nil when the universe has no
// such kind together with the kind it adopts.
func (g *gen) family(t *rapid.T, adopters []string) []string {
	var pairs [][2]string
	for _, k := range g.u.Kinds {
		kind, _ := model.KindByShort(k)
		if a := kind.Info().Adopts; a != "" && slices.Contains(adopters, k) && slices.Contains(g.u.Kinds, a) {
			pairs = append(pairs, [2]string{k, a})
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	p := rapid.SampledFrom(pairs).Draw(t, "family")
	owner := g.keyOf(t, p[0], "family-owner")
	_, ns, _ := split(owner)
	dep := p[1] + "/" + rapid.SampledFrom(g.u.Names).Draw(t, "family-dep")
	if ns != "" {
		dep = p[1] + "/" + ns + "/" + rapid.SampledFrom(g.u.Names).Draw(t, "family-dep-ns")
	}
	var lines []string
	var s *model.State // a concurrent run draws without a state: both creates
	if g.state != nil {
		s = g.state()
	}
	if s == nil || lookupKey(s, owner) == nil {
		lines = append(lines, "create "+owner+" selector="+selectorLabel+"=web")
		g.remember(owner)
	}
	if s == nil || lookupKey(s, dep) == nil {
		lines = append(lines, "create "+dep+" labels="+selectorLabel+"=web")
		g.remember(dep)
	} else {
		lines = append(lines, "label "+dep+" "+selectorLabel+"=web")
	}
	return lines
}

// remember records a key the run has created.
func (g *gen) remember(key string) {
	if !slices.Contains(g.created, key) {
		g.created = append(g.created, key)
	}
}
