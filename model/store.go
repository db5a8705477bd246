package model

import "slices"

// The state's copy-on-write operations: everything the semantic code
// (the API server, the GC, the informers, the controller) changes in a
// State, it changes through these, and these take their memory from the
// state's memory (memory.go). They keep every slice of a State sorted as
// its doc says and never write to memory another state may share.

// Clone returns an independent copy. Every slice of a State is
// copy-on-write: mutations build a new slice or clip before appending.
// The graph's nodes are the one exception the code must respect: the
// graph builder updates nodes in place through pointers, so it first takes
// a private copy (ownNodes); nothing else writes to them.
func (s *State) Clone() *State {
	c := s.memory().newState()
	*c = *s
	return c
}

// put inserts or replaces an object, keeping Objects sorted.
func (s *State) put(o Object) {
	mem := s.memory()
	i, ok := objectIndex(s.Objects, o.UID)
	if ok {
		s.Objects = cloneTo(mem.makeObjects(len(s.Objects)), s.Objects)
		s.Objects[i] = o
		return
	}
	s.Objects = insertTo(mem.makeObjects(len(s.Objects)+1), s.Objects, i, o)
}

// remove deletes an object from the store (UIDs are unique in it).
func (s *State) remove(uid UID) {
	if i, ok := objectIndex(s.Objects, uid); ok {
		s.Objects = deleteTo(s.memory().makeObjects(len(s.Objects)-1), s.Objects, i)
	}
}

// newUID hands out the next UID.
func (s *State) newUID(info UIDInfo) UID {
	if info.Kind != NoKind {
		for _, u := range s.UIDs {
			if u.Kind == info.Kind && u.Namespace == info.Namespace && u.Name == info.Name {
				info.Nth++
			}
		}
		info.Nth++
	}
	s.UIDs = appendTo(s.memory().makeUIDInfos(len(s.UIDs)+1), s.UIDs, info)
	return UID(len(s.UIDs))
}

// ownNodes gives the graph builder a private copy of the nodes before it
// mutates them in place.
func (s *State) ownNodes() {
	s.GC.Nodes = cloneTo(s.memory().makeNodes(len(s.GC.Nodes)), s.GC.Nodes)
}

// putNode inserts or replaces a node; the caller owns the nodes
// (ownNodes).
func (s *State) putNode(n Node) {
	g := &s.GC
	i, ok := nodeIndex(g.Nodes, n.UID)
	if ok {
		g.Nodes[i] = n
		return
	}
	g.Nodes = insertTo(s.memory().makeNodes(len(g.Nodes)+1), g.Nodes, i, n)
}

// enqueue adds a node's identity to a work queue set (workqueue.Add
// deduplicates). A queued item keeps its identity even if the graph later
// drops the node, as upstream's queued *node pointers do.
func (s *State) enqueue(set []Identity, uid UID) []Identity {
	n := s.GC.node(uid)
	if n == nil {
		return set
	}
	i, found := identIndex(set, uid)
	if found {
		if set[i] == n.Identity {
			return set // unchanged: no copy needed
		}
		set = cloneTo(s.memory().makeIdentities(len(set)), set)
		set[i] = n.Identity
		return set
	}
	return s.insertIdentity(set, i, n.Identity)
}

// dequeue removes a UID from a work queue set.
func (s *State) dequeue(set []Identity, uid UID) []Identity {
	del := func(x Identity) bool { return x.UID == uid }
	return deleteFuncTo(s.memory().makeIdentities(keepCount(set, del)), set, del)
}

// insertIdentity returns set with id inserted at i.
func (s *State) insertIdentity(set []Identity, i int, id Identity) []Identity {
	return insertTo(s.memory().makeIdentities(len(set)+1), set, i, id)
}

// enqueueVirtualDeleteEvent queues a virtual delete event for id on
// graphChanges (GraphBuilder.enqueueVirtualDeleteEvent).
func (s *State) enqueueVirtualDeleteEvent(id Identity) {
	g := &s.GC
	g.VirtualEvents = appendTo(s.memory().makeIdentities(len(g.VirtualEvents)+1), g.VirtualEvents, id)
}

// addInFlight records a work item's decided writes, keeping InFlight
// sorted by UID.
func (s *State) addInFlight(f InFlight) {
	g := &s.GC
	i, _ := inflightIndex(g.InFlight, f.UID)
	g.InFlight = insertTo(s.memory().makeInFlight(len(g.InFlight)+1), g.InFlight, i, f)
}

// ownInFlight gives sendWrite a private copy of the in-flight writes
// before it changes them.
func (s *State) ownInFlight() {
	g := &s.GC
	g.InFlight = cloneTo(s.memory().makeInFlight(len(g.InFlight)), g.InFlight)
}

// oneWrite returns the write list [w].
func (s *State) oneWrite(w Write) []Write {
	ws := s.memory().makeWrites(1)
	ws[0] = w
	return ws
}

// absentOwnerCacheAdd adds id to absentOwnerCache (GC.Absent, sorted
// by cmpIdentity).
func (s *State) absentOwnerCacheAdd(id Identity) {
	g := &s.GC
	if i, found := slices.BinarySearchFunc(g.Absent, id, cmpIdentity); !found {
		g.Absent = s.insertIdentity(g.Absent, i, id)
	}
}

// absentOwnerCacheHas reports whether absentOwnerCache holds id.
func (g *GC) absentOwnerCacheHas(id Identity) bool {
	if len(g.Absent) <= 8 {
		// A membership test: for a small cache a scan that compares
		// UIDs first beats a binary search by string comparisons.
		for i := range g.Absent {
			if a := &g.Absent[i]; a.UID == id.UID && a.Kind == id.Kind && a.Namespace == id.Namespace && a.Name == id.Name {
				return true
			}
		}
		return false
	}
	_, found := slices.BinarySearchFunc(g.Absent, id, cmpIdentity)
	return found
}

// addUID inserts into a sorted UID set, returning the new set.
func (s *State) addUID(set []UID, u UID) []UID {
	i, ok := slices.BinarySearch(set, u)
	if ok {
		return set
	}
	return insertTo(s.memory().makeUIDs(len(set)+1), set, i, u)
}

// removeUID removes from a sorted UID set, returning the new set.
func (s *State) removeUID(set []UID, u UID) []UID {
	i, ok := slices.BinarySearch(set, u)
	if !ok {
		return set
	}
	return deleteTo(s.memory().makeUIDs(len(set)-1), set, i)
}

// identKeyIs reports identKey(*id) == t.String(), from the memory's memo
// when it has one.
func (s *State) identKeyIs(id *Identity, t *Target) bool {
	if is, known := identKeyShortcut(id, t); known {
		return is // s.memory() only when the keys are built
	}
	return identKeyIs(s.memory(), id, t)
}

// ---- informers ----

// setQueue replaces w's queue of kind k.
func (s *State) setQueue(w *Watcher, k KindID, q []WatchEvent) { w.replaceQueue(s.memory(), k, q) }

// replaceQueue replaces w's queue of kind k on a private copy of the
// array from mem.
func (w *Watcher) replaceQueue(mem memory, k KindID, q []WatchEvent) {
	c := mem.newQueues()
	if w.Queues != nil {
		*c = *w.Queues
	} else {
		*c = [NumKinds][]WatchEvent{}
	}
	c[k] = q
	w.Queues = c
}

// push appends the event of type t about o to w's queue of o's kind. The
// event is written in place in the new queue rather than built and
// copied in: an Object is a few hundred bytes, and every write notifies.
func (s *State) push(w *Watcher, t EventType, o *Object) {
	k := o.Kind
	q := w.queue(k)
	c := s.memory().makeEvents(len(q) + 1)
	copy(c, q)
	ev := &c[len(q)]
	ev.Type, ev.Obj, ev.Replaces = t, *o, 0
	s.setQueue(w, k, c)
}

// cloneEvents returns a private copy of queued events.
func (s *State) cloneEvents(q []WatchEvent) []WatchEvent {
	return cloneTo(s.memory().makeEvents(len(q)), q)
}

// uncache drops the object at position i of w's cache.
func (s *State) uncache(w *Watcher, i int) {
	w.Cache = deleteTo(s.memory().makeObjects(len(w.Cache)-1), w.Cache, i)
}

// recache replaces the object at position i of w's cache.
func (s *State) recache(w *Watcher, i int, o Object) {
	w.Cache = cloneTo(s.memory().makeObjects(len(w.Cache)), w.Cache)
	w.Cache[i] = o
}

// cache inserts o at position i of w's cache.
func (s *State) cache(w *Watcher, i int, o Object) {
	w.Cache = insertTo(s.memory().makeObjects(len(w.Cache)+1), w.Cache, i, o)
}

// uncacheKind drops every object of kind k from w's cache.
func (s *State) uncacheKind(w *Watcher, k KindID) {
	del := func(o Object) bool { return o.Kind == k }
	w.Cache = deleteFuncTo(s.memory().makeObjects(keepCount(w.Cache, del)), w.Cache, del)
}

// ---- lookups: searches written for speed ----

// IdentIndex finds an identity in a work-queue set sorted by UID, as
// the GC's queues are kept (State.GC.AttemptToDelete): its place, and
// whether it is there. The checker's sleep sets read it.
func IdentIndex(set []Identity, uid UID) (int, bool) { return identIndex(set, uid) }

// identIndex finds an identity in a set sorted by UID (see nodeIndex).
func identIndex(set []Identity, uid UID) (int, bool) {
	lo, hi := 0, len(set)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if set[m].UID < uid {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(set) && set[lo].UID == uid
}

// nodeIndex is slices.BinarySearchFunc by UID, written out: the generic
// one calls its comparison through a pointer, and the graph is searched
// several times in every GC step.
func nodeIndex(nodes []Node, uid UID) (int, bool) {
	lo, hi := 0, len(nodes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if nodes[m].UID < uid {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(nodes) && nodes[lo].UID == uid
}

// inflightIndex finds a work item's decided writes by UID (see nodeIndex).
func inflightIndex(fs []InFlight, uid UID) (int, bool) {
	lo, hi := 0, len(fs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if fs[m].UID < uid {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(fs) && fs[lo].UID == uid
}

// identKeysEqual reports identKey(*a) == identKey(*b), building the keys
// only when the cheap tests cannot tell (see identKeyIs).
func identKeysEqual(a, b *Identity) bool {
	sameName := sameString(a.Name, b.Name)
	if sameName && sameString(a.Kind, b.Kind) && sameString(a.Namespace, b.Namespace) {
		return true // identKey reads nothing else
	}
	if !sameName && lastSegmentsDiffer(a.Name, b.Name) {
		return false
	}
	return identKey(*a) == identKey(*b)
}
