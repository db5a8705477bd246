package model

import (
	"fmt"
	"slices"
)

// graphEvent is one item of the graph builder's graphChanges queue.
type graphEvent struct {
	typ     EventType
	obj     *Object // nil for virtual events
	old     *Object // the informer's previous version, nil if none
	ident   Identity
	virtual bool
}

// processGraphChanges mirrors graph_builder.go processGraphChanges for
// one event. It is the only writer of the graph.
func (m *Model) processGraphChanges(s *State, ev graphEvent) {
	g := &s.GC
	existing := g.node(ev.ident.UID)
	if existing != nil && !ev.virtual && existing.Virtual {
		if ev.ident != existing.Identity {
			_, invalid := partitionDependents(g, existing.Dependents, ev.ident)
			for _, dep := range invalid {
				d := g.node(dep)
				if ev.ident.Namespace != "" && d.Namespace != ev.ident.Namespace {
					s.reportInvalidNamespaceOwnerRef(d, ev.ident.UID)
				}
				g.AttemptToDelete = s.enqueue(g.AttemptToDelete, dep)
			}
			existing.Identity = ev.ident
		}
		existing.Virtual = false // markObserved
	}
	switch {
	case ev.typ != Deleted && existing == nil:
		n := Node{
			Identity:           ev.ident,
			Owners:             ev.obj.Owners,
			BeingDeleted:       ev.obj.Deleting,
			DeletingDependents: ev.obj.Deleting && ev.obj.HasFinalizer(FinalizerForeground),
		}
		s.putNode(n)
		m.addDependentToOwners(s, ev.ident.UID, n.Owners)
		m.processTransitions(s, ev.old, ev.obj, ev.ident.UID)
	case ev.typ != Deleted:
		added, removed, changed := referencesDiffs(existing.Owners, ev.obj.Owners)
		if len(added)+len(removed)+len(changed) != 0 {
			addUnblockedOwnersToDeleteQueue(s, removed, changed)
			existing.Owners = ev.obj.Owners
			uid := existing.UID
			m.addDependentToOwners(s, uid, added)
			removeDependentFromOwners(s, uid, removed)
			existing = g.node(uid)
		}
		if ev.obj.Deleting {
			existing.BeingDeleted = true // markBeingDeleted: one-way
		}
		m.processTransitions(s, ev.old, ev.obj, ev.ident.UID)
	default: // Deleted
		if existing == nil {
			return // "this shouldn't happen"
		}
		remove := true
		if ev.virtual && !m.Bugs.Has(BugUIDOnlyIdentity) {
			deleted := ev.ident
			if existing.Virtual {
				matching, nonmatching := partitionDependents(g, existing.Dependents, deleted)
				if len(nonmatching) > 0 {
					remove = false
					if len(matching) > 0 {
						m.addAbsent(s, deleted)
						for _, d := range matching {
							g.AttemptToDelete = s.enqueue(g.AttemptToDelete, d)
						}
					}
					if existing.Identity == deleted {
						if alt, found := getAlternateOwnerIdentity(g, nonmatching, deleted); found {
							existing.Identity = alt
							g.AttemptToDelete = s.enqueue(g.AttemptToDelete, existing.UID)
						}
					}
				}
			} else if existing.Identity != deleted {
				remove = false
				matching, _ := partitionDependents(g, existing.Dependents, deleted)
				if len(matching) > 0 {
					m.addAbsent(s, deleted)
					for _, d := range matching {
						g.AttemptToDelete = s.enqueue(g.AttemptToDelete, d)
					}
				}
			}
		}
		if !remove {
			return
		}
		n := *existing
		g.removeNode(n.UID)
		if _, queued := identIndex(g.AttemptToOrphan, n.UID); queued {
			s.detach(n.UID, n.Dependents)
		}
		removeDependentFromOwners(s, n.UID, n.Owners)
		if len(n.Dependents) > 0 {
			m.addAbsent(s, ev.ident)
		}
		for _, d := range n.Dependents {
			g.AttemptToDelete = s.enqueue(g.AttemptToDelete, d)
		}
		for _, o := range n.Owners {
			if on := g.node(o.UID); on != nil && on.DeletingDependents {
				g.AttemptToDelete = s.enqueue(g.AttemptToDelete, o.UID)
			}
		}
	}
}

// addDependentToOwners mirrors graph_builder.go: unknown owners become
// virtual nodes in the dependent's namespace and are verified through
// attemptToDelete; a reference whose coordinates or namespace disagree
// with an existing owner node sends the dependent to attemptToDelete.
func (m *Model) addDependentToOwners(s *State, dep UID, owners []OwnerRef) {
	g := &s.GC
	d := *g.node(dep)
	invalid := false
	for _, ref := range owners {
		on := g.node(ref.UID)
		if on == nil {
			s.putNode(Node{
				Identity:   Identity{Kind: ref.Kind, Namespace: d.Namespace, Name: ref.Name, UID: ref.UID},
				Dependents: []UID{dep},
				Virtual:    true,
			})
			g.AttemptToDelete = s.enqueue(g.AttemptToDelete, ref.UID)
			continue
		}
		on.Dependents = s.addUID(on.Dependents, dep)
		if invalid {
			continue
		}
		ownerNamespaced := on.Namespace != ""
		switch {
		case ownerNamespaced && on.Namespace != d.Namespace:
			if !on.Virtual {
				s.reportInvalidNamespaceOwnerRef(&d, ref.UID)
			}
			invalid = true
		case !refMatches(ref, on.Identity):
			invalid = true
		case !ownerNamespaced && on.Namespace != d.Namespace && on.Virtual:
			invalid = true
		}
	}
	if invalid {
		g.AttemptToDelete = s.enqueue(g.AttemptToDelete, dep)
	}
}

func removeDependentFromOwners(s *State, dep UID, owners []OwnerRef) {
	g := &s.GC
	for _, ref := range owners {
		if on := g.node(ref.UID); on != nil {
			on.Dependents = s.removeUID(on.Dependents, dep)
		}
	}
}

// refMatches is ownerReferenceMatchesCoordinates (the model derives
// apiVersion from kind, so kind, name and UID are the coordinates).
func refMatches(ref OwnerRef, id Identity) bool {
	return ref.UID == id.UID && ref.Name == id.Name && ref.Kind == id.Kind
}

// referencesDiffs mirrors graph_builder.go referencesDiffs, duplicate UIDs
// included: the old references are keyed by UID in a map, so the LAST old
// reference to a UID stands for all of them, and a UID leaves the set of
// old UIDs at its first match, so a second new reference to it is
// "added". Upstream lists removed references in map order; the model
// keeps the old list's order of first appearance.
func referencesDiffs(old, new []OwnerRef) (added, removed []OwnerRef, changed [][2]OwnerRef) {
	var matched []UID
	for _, n := range new {
		o, found := lastRef(old, n.UID)
		switch {
		case !found || slices.Contains(matched, n.UID):
			added = append(added, n)
		default:
			if o != n {
				changed = append(changed, [2]OwnerRef{o, n})
			}
			matched = append(matched, n.UID)
		}
	}
	for i, o := range old {
		if !slices.Contains(matched, o.UID) && !slices.ContainsFunc(old[:i], func(p OwnerRef) bool { return p.UID == o.UID }) {
			r, _ := lastRef(old, o.UID)
			removed = append(removed, r)
		}
	}
	return added, removed, changed
}

func lastRef(refs []OwnerRef, uid UID) (OwnerRef, bool) {
	for i := len(refs) - 1; i >= 0; i-- {
		if refs[i].UID == uid {
			return refs[i], true
		}
	}
	return OwnerRef{}, false
}

// addUnblockedOwnersToDeleteQueue: an owner waiting in foreground must be
// re-examined when a blocking reference to it disappears.
func addUnblockedOwnersToDeleteQueue(s *State, removed []OwnerRef, changed [][2]OwnerRef) {
	g := &s.GC
	for _, r := range removed {
		if r.Block && g.node(r.UID) != nil {
			g.AttemptToDelete = s.enqueue(g.AttemptToDelete, r.UID)
		}
	}
	for _, c := range changed {
		if c[0].Block && !c[1].Block && g.node(c[1].UID) != nil {
			g.AttemptToDelete = s.enqueue(g.AttemptToDelete, c[1].UID)
		}
	}
}

// deletionStartsWithFinalizer is level-triggered upstream since #81081:
// the transition fires when new is being deleted with the finalizer and
// old was not both. BugEdgeTriggeredTransitions restores the older
// nil→set deletionTimestamp edge.
func (m *Model) deletionStartsWithFinalizer(old, new *Object, f string) bool {
	if !new.Deleting || !new.HasFinalizer(f) {
		return false
	}
	if old == nil {
		return true
	}
	if m.Bugs.Has(BugEdgeTriggeredTransitions) {
		return !old.Deleting
	}
	return !old.Deleting || !old.HasFinalizer(f)
}

// processTransitions starts orphaning or foreground processing.
func (m *Model) processTransitions(s *State, old, new *Object, uid UID) {
	g := &s.GC
	if m.deletionStartsWithFinalizer(old, new, FinalizerOrphan) {
		g.AttemptToOrphan = s.enqueue(g.AttemptToOrphan, uid)
		return
	}
	if m.deletionStartsWithFinalizer(old, new, FinalizerForeground) {
		n := g.node(uid)
		n.DeletingDependents = true
		for _, d := range n.Dependents {
			g.AttemptToDelete = s.enqueue(g.AttemptToDelete, d)
		}
		g.AttemptToDelete = s.enqueue(g.AttemptToDelete, uid)
	}
}

// partitionDependents splits dependents into those whose reference to the
// owner UID matches the owner identity and those that do not.
func partitionDependents(g *GC, deps []UID, owner Identity) (matching, nonmatching []UID) {
	namespaced := owner.Namespace != ""
	for _, du := range deps {
		d := g.node(du)
		match, mismatch := false, false
		if namespaced && owner.Namespace != d.Namespace {
			mismatch = true
		} else {
			for _, r := range d.Owners {
				if r.UID == owner.UID {
					if refMatches(r, owner) {
						match = true
					} else {
						mismatch = true
					}
				}
			}
		}
		if match {
			matching = append(matching, du)
		}
		if mismatch {
			nonmatching = append(nonmatching, du)
		}
	}
	return matching, nonmatching
}

func identityLess(a, b Identity) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

// getAlternateOwnerIdentity picks the identity a virtual node takes after
// its current identity was verified absent: the first alternate after the
// absent one in referenceLessThan order, else the first.
func getAlternateOwnerIdentity(g *GC, deps []UID, absent Identity) (Identity, bool) {
	clusterScoped := absent.Namespace == ""
	seen := map[Identity]bool{absent: true}
	var first, following *Identity
	for _, du := range deps {
		d := g.node(du)
		for _, r := range d.Owners {
			if r.UID != absent.UID {
				continue
			}
			if refMatches(r, absent) && (clusterScoped || absent.Namespace == d.Namespace) {
				continue
			}
			id := Identity{Kind: r.Kind, Namespace: d.Namespace, Name: r.Name, UID: r.UID}
			if clusterScoped && id.Kind == absent.Kind {
				id.Namespace = ""
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			c := id
			if first == nil || identityLess(c, *first) {
				first = &c
			}
			if identityLess(absent, c) && (following == nil || identityLess(c, *following)) {
				following = &c
			}
		}
	}
	if following != nil {
		return *following, true
	}
	if first != nil {
		return *first, true
	}
	return Identity{}, false
}

// reportInvalidNamespaceOwnerRef records the Warning event the graph
// builder emits for a dependent whose namespaced owner lives elsewhere.
func (s *State) reportInvalidNamespaceOwnerRef(d *Node, owner UID) {
	ref, found := findRef(d.Owners, owner)
	if !found {
		return
	}
	k := d.Kind
	if id, ok := KindByName(d.Kind); ok {
		k = id.Info().Short
	}
	ownerK := ref.Kind
	if id, ok := KindByName(ref.Kind); ok {
		ownerK = id.Info().Short
	}
	key := k + "/" + d.Name
	if d.Namespace != "" && d.Namespace != DefaultNamespace {
		key = k + "/" + d.Namespace + "/" + d.Name
	}
	msg := fmt.Sprintf("event OwnerRefInvalidNamespace %s: ownerRef %s/%s does not exist in namespace %q", key, ownerK, ref.Name, d.Namespace)
	if i, found := slices.BinarySearch(s.Events, msg); !found {
		s.Events = slices.Insert(slices.Clip(s.Events), i, msg)
	}
}

// addAbsent adds to absentOwnerCache. BugUIDOnlyIdentity keys the cache
// by UID alone, as before kubernetes#92743.
func (m *Model) addAbsent(s *State, id Identity) {
	if m.Bugs.Has(BugUIDOnlyIdentity) {
		id = Identity{UID: id.UID}
	}
	s.absentOwnerCacheAdd(id)
}

func (m *Model) hasAbsent(g *GC, id Identity) bool {
	if m.Bugs.Has(BugUIDOnlyIdentity) {
		id = Identity{UID: id.UID}
	}
	return g.absentOwnerCacheHas(id)
}

func cmpIdentity(a, b Identity) int {
	switch {
	case identityLess(a, b):
		return -1
	case identityLess(b, a):
		return 1
	}
	return 0
}

func findRef(refs []OwnerRef, uid UID) (OwnerRef, bool) {
	for _, r := range refs {
		if r.UID == uid {
			return r, true
		}
	}
	return OwnerRef{}, false
}
