package model

// controllerWatches reports whether the adopting controller has an
// informer for kind k: kinds that adopt, and kinds that are adopted.
// Every write asks (notify), so the answers are computed once.
func controllerWatches(k KindID) bool { return controllerWatched[k] }

var controllerWatched = func() (w [NumKinds]bool) {
	for k := range w {
		w[k] = controllerWatchesKind(KindID(k))
	}
	return w
}()

func controllerWatchesKind(k KindID) bool {
	info := k.Info()
	if info.Adopts != "" {
		return true
	}
	for i := range Kinds {
		if Kinds[i].Adopts == info.Short {
			return true
		}
	}
	return false
}

// pop removes the head event of kind k, returning it with the cached
// version it replaces (the informer's oldObj) and updating the cache.
// Both point into the queue and cache the watcher had before: those are
// never written again (copy-on-write), so the pointers stay valid and
// the caller must only read through them. An event a relist made to
// replace an object of the same name (WatchEvent.Replaces) is an update
// from that object: the cache drops it and its version is the oldObj.
func (s *State) pop(w *Watcher, k KindID) (ev *WatchEvent, old *Object) {
	q := w.queue(k)
	ev = &q[0]
	s.setQueue(w, k, q[1:])
	if ev.Replaces != 0 {
		if i, found := objectIndex(w.Cache, ev.Replaces); found {
			old = &w.Cache[i]
			s.uncache(w, i)
		}
	}
	i, found := objectIndex(w.Cache, ev.Obj.UID)
	if found {
		old = &w.Cache[i]
	}
	switch { // copy-on-write: states share caches
	case ev.Type == Deleted && found:
		s.uncache(w, i)
	case ev.Type == Deleted:
	case found:
		s.recache(w, i, ev.Obj)
	default:
		s.cache(w, i, ev.Obj)
	}
	return ev, old
}

// canCoalesce reports whether an informer relist may skip the head event
// of kind k: a later event for the same object supersedes it, or it
// deletes an object this informer never delivered (a relist emits deletes
// only for objects in its store), or it deletes an object whose name a
// new object took within the gap. client-go keys its store by
// namespace/name, so Replace finds the name still listed and emits no
// delete: the new object's event is handed on as an update from the old
// one (RealFIFO.Replace and DeltaFIFO.Replace, then processDeltas'
// OnUpdate(old, new); kubernetes#133565 proposed the delete and was
// closed unmerged). An event that carries such a replacement is skipped
// only for a later update of its object, which takes the replacement
// over, not for its delete: the relist would then have found the name
// gone and emitted the old object's delete.
func (w *Watcher) canCoalesce(k KindID) bool {
	q := w.queue(k)
	if len(q) == 0 {
		return false
	}
	head := q[0]
	if next := nextOfObject(q, head.Obj.UID); next >= 0 {
		return head.Replaces == 0 || q[next].Type != Deleted
	}
	if head.Type == Deleted {
		if _, found := objectIndex(w.Cache, head.Obj.UID); !found {
			return true
		}
		return nextOfName(q, &head.Obj) >= 0
	}
	return false
}

// nextOfObject is the position of the first event after the head about
// the object uid, -1 if none.
func nextOfObject(q []WatchEvent, uid UID) int {
	for i := 1; i < len(q); i++ {
		if q[i].Obj.UID == uid {
			return i
		}
	}
	return -1
}

// nextOfName is the position of the first event after the head about the
// name of o (its queue holds one kind), when that event is about another
// object and not its delete: the relist lists the name held by that
// object. -1 otherwise.
func nextOfName(q []WatchEvent, o *Object) int {
	for i := 1; i < len(q); i++ {
		if e := &q[i].Obj; e.Namespace == o.Namespace && e.Name == o.Name {
			if e.UID == o.UID || q[i].Type == Deleted {
				return -1
			}
			return i
		}
	}
	return -1
}

// coalesce drops the head event of kind k without delivering it. A
// replacement the head stands for (the head deletes an object whose name
// a later event's object took, or carries a replacement itself) passes
// to the event that supersedes it (canCoalesce).
func (s *State) coalesce(w *Watcher, k KindID) {
	q := w.queue(k)
	head := q[0]
	at, replaces := -1, head.Replaces
	switch {
	case head.Replaces != 0:
		at = nextOfObject(q, head.Obj.UID)
	case head.Type == Deleted:
		if _, found := objectIndex(w.Cache, head.Obj.UID); found {
			at, replaces = nextOfName(q, &head.Obj), head.Obj.UID
		}
	}
	if at < 0 {
		s.setQueue(w, k, q[1:])
		return
	}
	nq := s.cloneEvents(q[1:])
	nq[at-1].Replaces = replaces
	s.setQueue(w, k, nq)
}

// cached returns the watcher's cached version of a UID.
func (w *Watcher) cached(uid UID) *Object {
	i, found := objectIndex(w.Cache, uid)
	if !found {
		return nil
	}
	return &w.Cache[i]
}

// Pending reports whether any event is queued.
func (w *Watcher) Pending() bool {
	for _, q := range w.queues() {
		if len(q) > 0 {
			return true
		}
	}
	return false
}

// syncNeeded lists the custom kinds whose monitor a GC discovery sync
// would start (the CRD exists) or stop (it is gone).
func syncNeeded(s *State) (start, stop []KindID) {
	if s.GC.Monitored == 0 && !hasKind(s.Objects, crdKind()) {
		return nil, nil // no monitor to stop, no CRD to start one for
	}
	for i := range Kinds {
		k := KindID(i)
		if !k.Info().Custom {
			continue
		}
		served := s.Lookup(crdKind(), "", k.Info().CRDName) != nil
		mon := s.GC.Monitored&(1<<k) != 0
		switch {
		case served && !mon:
			start = append(start, k)
		case !served && mon:
			stop = append(stop, k)
		}
	}
	return start, stop
}

// hasKind reports whether some object is of kind k.
func hasKind(objs []Object, k KindID) bool {
	for i := range objs {
		if objs[i].Kind == k {
			return true
		}
	}
	return false
}

// gcSync is GarbageCollector.Sync finding the deletable resources changed:
// resyncMonitors starts an informer for each new custom kind, whose initial
// list delivers every existing object as added, and stops the informers of
// kinds no longer served (their nodes stay in the graph, as upstream).
func (m *Model) gcSync(s *State) {
	start, stop := syncNeeded(s)
	g := &s.GC
	for _, k := range start {
		g.Monitored |= 1 << k
		for i := range s.Objects {
			if o := &s.Objects[i]; o.Kind == k {
				s.push(&g.Watch, Added, o)
			}
		}
	}
	for _, k := range stop {
		g.Monitored &^= 1 << k
		s.setQueue(&g.Watch, k, nil)
		s.uncacheKind(&g.Watch, k)
	}
}

// gcDeliver hands the head event of kind k to the graph builder.
func (m *Model) gcDeliver(s *State, k KindID) {
	s.ownNodes()
	ev, old := s.pop(&s.GC.Watch, k)
	m.processGraphChanges(s, graphEvent{typ: ev.Type, obj: &ev.Obj, old: old, ident: identityOf(&ev.Obj)})
}

// gcDeliverVirtual processes the head virtual delete event.
func (m *Model) gcDeliverVirtual(s *State) {
	s.ownNodes()
	id := s.GC.VirtualEvents[0]
	s.GC.VirtualEvents = s.GC.VirtualEvents[1:]
	m.processGraphChanges(s, graphEvent{typ: Deleted, ident: id, virtual: true})
}
