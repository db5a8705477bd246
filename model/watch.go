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
// the caller must only read through them.
func (w *Watcher) pop(ws *workspace, k KindID) (ev *WatchEvent, old *Object) {
	q := w.queue(k)
	ev = &q[0]
	w.setQueue(ws, k, q[1:])
	i, found := objectIndex(w.Cache, ev.Obj.UID)
	if found {
		old = &w.Cache[i]
	}
	switch { // copy-on-write: states share caches
	case ev.Type == Deleted && found:
		w.Cache = deleteIn(ws.objArena(), w.Cache, i)
	case ev.Type == Deleted:
	case found:
		w.Cache = cloneIn(ws.objArena(), w.Cache)
		w.Cache[i] = ev.Obj
	default:
		w.Cache = insertIn(ws.objArena(), w.Cache, i, ev.Obj)
	}
	return ev, old
}

// canCoalesce reports whether an informer relist may skip the head event
// of kind k: a later event for the same object supersedes it, or it
// deletes an object this informer never delivered (a relist emits deletes
// only for objects in its store).
func (w *Watcher) canCoalesce(k KindID) bool {
	q := w.queue(k)
	if len(q) == 0 {
		return false
	}
	head := q[0]
	for _, e := range q[1:] {
		if e.Obj.UID == head.Obj.UID {
			return true
		}
	}
	if head.Type == Deleted {
		_, found := objectIndex(w.Cache, head.Obj.UID)
		return !found
	}
	return false
}

// coalesce drops the head event of kind k without delivering it.
func (w *Watcher) coalesce(ws *workspace, k KindID) { w.setQueue(ws, k, w.queue(k)[1:]) }

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
				g.Watch.setQueue(s.ws, k, appendIn(s.ws.eventArena(), g.Watch.queue(k), WatchEvent{Type: Added, Obj: *o}))
			}
		}
	}
	for _, k := range stop {
		g.Monitored &^= 1 << k
		g.Watch.setQueue(s.ws, k, nil)
		g.Watch.Cache = deleteFuncIn(s.ws.objArena(), g.Watch.Cache, func(o Object) bool { return o.Kind == k })
	}
}

// gcDeliver hands the head event of kind k to the graph builder.
func (m *Model) gcDeliver(s *State, k KindID) {
	s.ownNodes()
	ev, old := s.GC.Watch.pop(s.ws, k)
	m.processGraphChanges(s, graphEvent{typ: ev.Type, obj: &ev.Obj, old: old, ident: identityOf(&ev.Obj)})
}

// gcDeliverVirtual processes the head virtual delete event.
func (m *Model) gcDeliverVirtual(s *State) {
	s.ownNodes()
	id := s.GC.VirtualEvents[0]
	s.GC.VirtualEvents = s.GC.VirtualEvents[1:]
	m.processGraphChanges(s, graphEvent{typ: Deleted, ident: id, virtual: true})
}
