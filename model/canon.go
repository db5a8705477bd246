package model

import (
	"cmp"
	"slices"
)

// Canonical returns the state with its UIDs renumbered in a canonical
// order: by kind, namespace, name and incarnation of the object each UID
// was made for, symbolic UIDs after them by symbol.
//
// This is the checker's symmetry reduction. UIDs are opaque labels: the
// model only ever compares them for equality, never orders semantics by
// them (sorted sets are representation; the one tie-break by UID, in
// getAlternateOwnerIdentity, only ranks identities that share a UID). Two
// states that differ only in which UID each object received, because
// creations happened in a different order, are therefore equivalent for
// every transition and for every named property, safety and quiescent
// liveness alike, and may be merged. Names are not permuted: traces and
// properties speak of objects by name.
func (s *State) Canonical() *State {
	n := len(s.UIDs)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := &s.UIDs[a], &s.UIDs[b]
		if (x.Kind == NoKind) != (y.Kind == NoKind) {
			if x.Kind == NoKind {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name), cmp.Compare(x.Nth, y.Nth), cmp.Compare(x.Symbol, y.Symbol))
	})
	ren := make([]UID, n+1) // old -> new
	identity := true
	for newIdx, old := range order {
		ren[old+1] = UID(newIdx + 1)
		identity = identity && old == newIdx
	}
	if identity {
		return s
	}
	c := s.Clone()
	r := func(u UID) UID {
		if u == 0 {
			return 0
		}
		return ren[u]
	}
	uids := make([]UIDInfo, n)
	for newIdx, old := range order {
		uids[newIdx] = s.UIDs[old]
	}
	c.UIDs = uids
	// Clone shares copy-on-write slices; renaming writes in place, so take
	// private copies first.
	c.Objects = slices.Clone(c.Objects)
	c.ownNodes()
	c.GC.VirtualEvents = slices.Clone(c.GC.VirtualEvents)
	c.GC.AttemptToDelete = slices.Clone(c.GC.AttemptToDelete)
	c.GC.AttemptToOrphan = slices.Clone(c.GC.AttemptToOrphan)
	c.GC.Detached = slices.Clone(c.GC.Detached)
	c.GC.InFlight = slices.Clone(c.GC.InFlight)
	c.GC.Absent = slices.Clone(c.GC.Absent)
	c.Orphans = slices.Clone(c.Orphans)
	for i := range c.Objects {
		renameObject(&c.Objects[i], r)
	}
	sortObjects(c.Objects)
	renameWatcher(&c.GC.Watch, r)
	renameWatcher(&c.Controller.Watch, r)
	for i := range c.GC.Nodes {
		nd := &c.GC.Nodes[i]
		nd.UID = r(nd.UID)
		nd.Owners = renameRefs(nd.Owners, r)
		nd.Dependents = renameUIDs(nd.Dependents, r)
	}
	slices.SortFunc(c.GC.Nodes, func(a, b Node) int { return cmp.Compare(a.UID, b.UID) })
	for i := range c.GC.VirtualEvents {
		c.GC.VirtualEvents[i].UID = r(c.GC.VirtualEvents[i].UID)
	}
	for _, q := range []*[]Identity{&c.GC.AttemptToDelete, &c.GC.AttemptToOrphan} {
		for i := range *q {
			(*q)[i].UID = r((*q)[i].UID)
		}
		slices.SortFunc(*q, func(a, b Identity) int { return cmp.Compare(a.UID, b.UID) })
	}
	for i := range c.GC.Detached {
		dt := &c.GC.Detached[i]
		dt.UID = r(dt.UID)
		dt.Dependents = renameUIDs(dt.Dependents, r)
	}
	slices.SortFunc(c.GC.Detached, func(a, b Detached) int { return cmp.Compare(a.UID, b.UID) })
	for i := range c.GC.InFlight {
		f := &c.GC.InFlight[i]
		f.UID = r(f.UID)
		ws := slices.Clone(f.Writes)
		for j := range ws {
			w := &ws[j]
			w.Item.UID = r(w.Item.UID)
			w.Owners = renameRefs(w.Owners, r)
			rm := make([]UID, len(w.Remove))
			for k, u := range w.Remove {
				rm[k] = r(u)
			}
			w.Remove = rm
			if len(w.Waited) > 0 {
				wt := make([]UID, len(w.Waited))
				for k, u := range w.Waited {
					wt[k] = r(u)
				}
				slices.Sort(wt)
				w.Waited = wt
			}
		}
		f.Writes = ws
	}
	slices.SortFunc(c.GC.InFlight, func(a, b InFlight) int { return cmp.Compare(a.UID, b.UID) })
	for i := range c.GC.Absent {
		c.GC.Absent[i].UID = r(c.GC.Absent[i].UID)
	}
	slices.SortFunc(c.GC.Absent, cmpIdentity)
	for i := range c.Orphans {
		c.Orphans[i].Owner, c.Orphans[i].Dep = r(c.Orphans[i].Owner), r(c.Orphans[i].Dep)
	}
	slices.SortFunc(c.Orphans, func(a, b OrphanWatch) int {
		return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Dep, b.Dep))
	})
	return c
}

// renameUIDs returns a sorted copy of us renamed by r (a set of UIDs,
// such as a node's dependents).
func renameUIDs(us []UID, r func(UID) UID) []UID {
	out := make([]UID, len(us))
	for i, u := range us {
		out[i] = r(u)
	}
	slices.Sort(out)
	return out
}

func renameRefs(rs []OwnerRef, r func(UID) UID) []OwnerRef {
	if len(rs) == 0 {
		return rs
	}
	out := slices.Clone(rs)
	for i := range out {
		out[i].UID = r(out[i].UID)
	}
	return out
}

func renameObject(o *Object, r func(UID) UID) {
	o.UID = r(o.UID)
	o.Owners = renameRefs(o.Owners, r)
}

func sortObjects(os []Object) {
	slices.SortFunc(os, func(a, b Object) int { return cmp.Compare(a.UID, b.UID) })
}

func renameWatcher(w *Watcher, r func(UID) UID) {
	for k, q := range w.queues() {
		if len(q) == 0 {
			continue
		}
		nq := slices.Clone(q)
		for i := range nq {
			renameObject(&nq[i].Obj, r)
			if nq[i].Replaces != 0 {
				nq[i].Replaces = r(nq[i].Replaces)
			}
		}
		w.replaceQueue(heap{}, KindID(k), nq)
	}
	w.Cache = slices.Clone(w.Cache)
	for i := range w.Cache {
		renameObject(&w.Cache[i], r)
	}
	sortObjects(w.Cache)
}
