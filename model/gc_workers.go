package model

import "slices"

// gcErr is the outcome class of a GC lookup, mirroring the sentinel
// errors of garbagecollector.go.
type gcErr uint8

const (
	errNone gcErr = iota
	errNotFound
	errRESTMapping                    // restMappingError: retried forever
	errNamespacedOwnerOfClusterScoped // forgotten
)

// apiResource resolves a kind name the way the GC's RESTMapper does: a
// kind nobody serves, or a custom kind whose CRD is absent, has no mapping.
func apiResource(s *State, kind string) (KindID, gcErr) {
	k, found := KindByName(kind)
	if !found {
		return NoKind, errRESTMapping
	}
	if info := k.Info(); info.Custom && s.Lookup(crdKind(), "", info.CRDName) == nil {
		return NoKind, errRESTMapping
	}
	return k, errNone
}

// getObject is the GC's live GET of an identity (operations.go).
// resourceDefaultNamespace drops the namespace for cluster-scoped kinds;
// BugLookupIgnoresScope keeps it, as before kubernetes#57211.
func (m *Model) getObject(s *State, id Identity) (*Object, gcErr) {
	k, err := apiResource(s, id.Kind)
	if err != errNone {
		return nil, err
	}
	ns := id.Namespace
	if !k.Info().Namespaced && !m.Bugs.Has(BugLookupIgnoresScope) {
		ns = ""
	}
	if k.Info().Namespaced && ns == "" {
		return nil, errNamespacedOwnerOfClusterScoped
	}
	o := s.Lookup(k, ns, id.Name)
	if o == nil {
		return nil, errNotFound
	}
	return o, errNone
}

// isDangling classifies one ownerReference of item by absentOwnerCache and
// a live GET of the owner where OwnerScope looks; classifyReferences
// (attemptToDeleteItem) sorts the owner it finds with ClassifyOwner.
func (m *Model) isDangling(s *State, ref OwnerRef, item *Node) (dangling bool, owner *Object, err gcErr) {
	g := &s.GC
	key := Identity{Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
	if m.hasAbsent(g, key) {
		return true, nil, errNone
	}
	key.Namespace = item.Namespace
	if m.hasAbsent(g, key) {
		return true, nil, errNone
	}
	k, e := apiResource(s, ref.Kind)
	if e != errNone {
		return false, nil, e
	}
	ns, ok := OwnerScope(k, item.Namespace)
	if !ok {
		return false, nil, errNamespacedOwnerOfClusterScoped
	}
	key.Namespace = ns
	o := s.Lookup(k, ns, ref.Name)
	if o == nil || o.UID != ref.UID {
		m.addAbsent(s, key)
		return true, nil, errNone
	}
	return false, o, errNone
}

// workResult is how attemptToDeleteItem ended, which decides what
// attemptToDeleteWorker tells its queue.
type workResult uint8

const (
	// done: attemptToDeleteItem returned nil. The worker forgets the item,
	// unless its node is still virtual (kubernetes#56121): then it requeues.
	done workResult = iota
	// forget: enqueuedVirtualDeleteEventErr or
	// namespacedOwnerOfClusterScopedObjectErr; forgotten, virtual or not.
	forget
	// requeue: any other error, retried with rate limiting.
	requeue
)

// attemptToDelete runs one attemptToDelete work item up to its first
// write: every GET happens now, the writes it decides on are left in
// flight for `gc delete|patch|unblock` steps. Removing foregroundDeletion
// happens within this step (processDeletingDependentsItem).
//
// The item is the identity it was queued with, as upstream's queue holds
// the *node. processGraphChanges gives the graph a clone when it replaces
// a virtual node with the observed object of other coordinates ("replacing
// virtual item with observed item"), and the queued pointer stays the
// virtual node: attemptToDeleteWorker finds it "no longer virtual in the
// graph" and forgets it without a GET. A queued identity that differs
// from its node's is that stale virtual node.
func (m *Model) attemptToDelete(s *State, uid UID) {
	g := &s.GC
	i, _ := identIndex(g.AttemptToDelete, uid)
	queued := g.AttemptToDelete[i]
	g.AttemptToDelete = s.dequeue(g.AttemptToDelete, uid)
	n := g.node(uid)
	if n == nil {
		// Upstream still holds the removed *node: its GET finds nothing (or
		// a new incarnation) and the virtual delete event it queues is
		// ignored by the graph builder. Forgetting is the same outcome.
		return
	}
	if queued != n.Identity && !n.Virtual {
		return // "item no longer virtual in the graph": forgotten
	}
	item := *n
	// A virtual node of other coordinates would be passed under the
	// queued ones, as upstream passes its old *node; the model does not
	// reach it: the alternate identity a virtual delete event gives a
	// virtual node is queued again, which renames the item.
	item.Identity = queued
	writes, res := m.attemptToDeleteItem(s, &item)
	if len(writes) > 0 {
		s.addInFlight(InFlight{UID: uid, Writes: writes})
		return
	}
	m.finishWork(s, uid, res)
}

// finishWork applies attemptToDeleteWorker's verdict. A node still
// virtual after a successful pass is requeued until an informer or a
// virtual delete event settles it (kubernetes#56121);
// BugForgetUnobservedVirtual forgets it instead.
func (m *Model) finishWork(s *State, uid UID, res workResult) {
	g := &s.GC
	if res == done {
		if n := g.node(uid); n != nil && n.Virtual && !m.Bugs.Has(BugForgetUnobservedVirtual) {
			res = requeue
		}
	}
	if res == requeue {
		g.AttemptToDelete = s.enqueue(g.AttemptToDelete, uid)
	}
}

// errResult maps a lookup failure to the worker's verdict.
func errResult(e gcErr) workResult {
	if e == errNamespacedOwnerOfClusterScoped {
		return forget
	}
	return requeue
}

// attemptToDeleteItem mirrors garbagecollector.go. It returns the writes
// to send, or the verdict when there is nothing to send. A result of
// forget with a virtual node still means requeue (finishWork).
func (m *Model) attemptToDeleteItem(s *State, item *Node) ([]Write, workResult) {
	if item.BeingDeleted && !item.DeletingDependents {
		return nil, done // "being deleted is an one-way trip"
	}
	latest, e := m.getObject(s, item.Identity)
	if e == errNotFound || (e == errNone && latest.UID != item.UID) {
		s.enqueueVirtualDeleteEvent(item.Identity)
		return nil, forget // enqueuedVirtualDeleteEventErr
	}
	if e != errNone {
		return nil, errResult(e)
	}
	if item.DeletingDependents {
		return m.processDeletingDependentsItem(s, item)
	}
	if len(latest.Owners) == 0 {
		return nil, done
	}
	// Buffers on the stack: most items have one or two owners.
	var classBuf [4]RefClass
	var danglingBuf, waitingBuf [4]OwnerRef
	classes, dangling, waiting, e := m.classifyReferences(s, item, latest.Owners, classBuf[:0], danglingBuf[:0], waitingBuf[:0])
	if e != errNone {
		return nil, errResult(e)
	}
	switch {
	case !GCMayDelete(classes):
		// the solid arm: remove the RefRemovable references
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil, done
		}
		remove := make([]UID, 0, len(dangling)+len(waiting))
		for _, r := range dangling {
			remove = append(remove, r.UID)
		}
		for _, r := range waiting {
			remove = append(remove, r.UID)
		}
		return []Write{{Op: WritePatchOwners, Item: item.Identity, Remove: remove}}, done
	case len(waiting) != 0 && len(item.Dependents) != 0:
		var writes []Write
		if !m.Bugs.Has(BugNoCycleUnblock) {
			for _, du := range item.Dependents {
				if d := s.GC.node(du); d != nil && d.DeletingDependents {
					var refs []OwnerRef
					for _, r := range item.Owners {
						if r.Block {
							r.Block = false
							refs = append(refs, r)
						}
					}
					writes = append(writes, Write{Op: WriteUnblock, Item: item.Identity, Owners: refs})
					break
				}
			}
		}
		return append(writes, m.deleteWrite(item, latest, Foreground, waiting)), done
	default:
		policy := Background
		switch {
		case latest.HasFinalizer(FinalizerOrphan):
			policy = Orphan
		case latest.HasFinalizer(FinalizerForeground):
			policy = Foreground
		}
		if m.Bugs.Has(BugDeleteDependentsWithoutPolicy) {
			policy = NoPolicy
		}
		return s.oneWrite(m.deleteWrite(item, latest, policy, waiting)), done
	}
}

// classifyReferences mirrors garbagecollector.go: it sorts the
// ownerReferences item's live GET read (latest) by isDangling and
// ClassifyOwner, appending each one's class, in order, to classes and
// the dangling and waitingForDependentsDeletion ones to those (the solid
// ones are those of class RefSolid). It fails with the first lookup that
// fails.
func (m *Model) classifyReferences(s *State, item *Node, latest []OwnerRef, classes []RefClass, dangling, waitingForDependentsDeletion []OwnerRef) ([]RefClass, []OwnerRef, []OwnerRef, gcErr) {
	for _, ref := range latest {
		d, owner, e := m.isDangling(s, ref, item)
		if e != errNone {
			return classes, dangling, waitingForDependentsDeletion, e
		}
		var v *View
		if !d {
			ov := owner.View()
			v = &ov
		}
		c := ClassifyOwner(v)
		classes = append(classes, c)
		switch {
		case !RefRemovable(c):
		case c == RefWaiting:
			waitingForDependentsDeletion = append(waitingForDependentsDeletion, ref)
		default:
			dangling = append(dangling, ref)
		}
	}
	return classes, dangling, waitingForDependentsDeletion, errNone
}

// deleteWrite is deleteObject's request: UID and resourceVersion
// preconditions (kubernetes#132632) on releases that carry
// ChangeGCDeleteRV, unless BugDeleteWithoutRVPrecondition; the UID
// precondition only before. The write keeps the ownerReferences its GET
// read (Owners) either way.
// waiting are the references classifyReferences found waiting for
// dependents (Write.Waited).
func (m *Model) deleteWrite(item *Node, latest *Object, p Policy, waiting []OwnerRef) Write {
	w := Write{Op: WriteDelete, Item: item.Identity, Policy: p, RV: latest.RV, Owners: latest.Owners}
	for _, r := range waiting {
		if !slices.Contains(w.Waited, r.UID) {
			w.Waited = append(w.Waited, r.UID)
		}
	}
	slices.Sort(w.Waited)
	if m.Bugs.Has(BugDeleteWithoutRVPrecondition) || !m.kubeRelease().Has(ChangeGCDeleteRV) {
		w.RV = 0
	}
	return w
}

// processDeletingDependentsItem: remove foregroundDeletion once no graph
// dependent blocks; otherwise push the blockers along.
func (m *Model) processDeletingDependentsItem(s *State, item *Node) ([]Write, workResult) {
	blocking := blockingDependents(&s.GC, item)
	if len(blocking) == 0 {
		// The graph check and removeFinalizer's GET+patch run in one
		// worker call upstream; the model keeps them in one step so that
		// "known blocking dependents" means known when the finalizer went.
		if r := m.removeFinalizer(s, item.Identity, FinalizerForeground); !r.OK() {
			return nil, requeue
		}
		return nil, done
	}
	for _, du := range blocking {
		if d := s.GC.node(du); !d.DeletingDependents {
			s.GC.AttemptToDelete = s.enqueue(s.GC.AttemptToDelete, du)
		}
	}
	return nil, done
}

// blockingDependents reads the graph only: a dependent the GC has not
// observed does not block (foreground deletion is best-effort).
func blockingDependents(g *GC, n *Node) []UID {
	var out []UID
	for _, du := range n.Dependents {
		d := g.node(du)
		for _, r := range d.Owners {
			if r.UID == n.UID && r.Block {
				out = append(out, du)
				break
			}
		}
	}
	return out
}

// sendWrite sends the next in-flight write of item uid. It returns the
// API result (for traces) of the request.
func (m *Model) sendWrite(s *State, uid UID) Result {
	g := &s.GC
	s.ownInFlight()
	i, _ := inflightIndex(g.InFlight, uid)
	f := g.InFlight[i]
	w := &f.Writes[0] // states share the writes, and none changes them
	rest := f.Writes[1:]
	r := m.doWrite(s, w)
	g = &s.GC
	switch {
	case r.OK() && len(rest) > 0:
		g.InFlight[i].Writes = rest
		return r
	case r.OK():
		g.InFlight = slices.Delete(g.InFlight, i, i+1)
		m.finishWork(s, uid, done)
	case r.Code == 404 && w.Op == WriteDelete && !m.kubeRelease().Has(ChangeGCDeleteNotFoundVirtual):
		// before v1.36 (kubernetes#136817): attemptToDeleteWorker requeues
		// the NotFound as an error. (deleteObject's other branch, "object
		// we wanted to delete is gone, success!" after a 409, needs a
		// client's delete between the DELETE and its follow-up GET, which
		// doWrite takes as one step.)
		g.InFlight = slices.Delete(g.InFlight, i, i+1)
		m.finishWork(s, uid, requeue)
	case r.Code == 404 && w.Op == WriteDelete:
		g.InFlight = slices.Delete(g.InFlight, i, i+1)
		s.enqueueVirtualDeleteEvent(w.Item) // enqueuedVirtualDeleteEventErr: forget
	default:
		g.InFlight = slices.Delete(g.InFlight, i, i+1)
		m.finishWork(s, uid, requeue)
	}
	return r
}

func (m *Model) gcRequest() request { return request{by: ActorGC, admit: true} }

// doWrite performs one GC request: for a DELETE, deleteObject's DELETE
// and, on a 409, its GET and retry, in one step.
func (m *Model) doWrite(s *State, w *Write) Result {
	k, e := apiResource(s, w.Item.Kind)
	if e != errNone {
		return fail(404, "NotFound", "no mapping for %s", w.Item.Kind)
	}
	t := Target{Kind: k, Namespace: w.Item.Namespace, Name: w.Item.Name}
	if !k.Info().Namespaced {
		t.Namespace = ""
	}
	switch w.Op {
	case WriteDelete:
		opts := DeleteOptions{Policy: w.Policy, PreconditionUID: w.Item.UID, PreconditionRV: w.RV}
		// the object before the delete, for trackOrphanOverride below
		// (a retry, or a foreground delete that waited), copied only when
		// that reads it: when it was deleting with the orphan finalizer
		var before *Object
		if w.RV != 0 || (w.Policy == Foreground && len(w.Waited) > 0) {
			if live := s.Lookup(t.Kind, t.Namespace, t.Name); live != nil && live.Deleting && live.HasFinalizer(FinalizerOrphan) {
				b := *live // live points into s.Objects, which delete changes
				before = &b
			}
		}
		r := m.delete(s, m.gcRequest(), t, opts)
		if r.Code == 409 && w.RV != 0 {
			// deleteObject: retry with the UID precondition alone when only
			// fields other than ownerReferences changed.
			live := s.Lookup(t.Kind, t.Namespace, t.Name)
			if live == nil {
				return notFound(t.Kind, t.Name)
			}
			if live.UID == w.Item.UID && live.RV != w.RV && slices.Equal(live.Owners, w.Owners) {
				opts.PreconditionRV = 0
				r = m.delete(s, m.gcRequest(), t, opts)
				if before != nil {
					s.trackOrphanOverride(before, OverriddenByRetry)
				}
			}
			return r
		}
		if r.OK() && w.Policy == Foreground && len(w.Waited) > 0 && before != nil {
			s.trackOrphanOverride(before, OverriddenByWaiting)
		}
		return r
	case WritePatchOwners:
		return m.update(s, m.gcRequest(), t, w.Item.UID, 0, func(o *Object) Result {
			o.Owners = slices.DeleteFunc(slices.Clone(o.Owners), func(r OwnerRef) bool { return slices.Contains(w.Remove, r.UID) })
			return ok(200)
		})
	case WriteUnblock:
		// Strategic merge by uid: refs present are overwritten with the
		// graph's copy (blockOwnerDeletion=false); refs no longer present
		// are appended, exactly as the patch list would merge.
		var putBack []UID
		r := m.update(s, m.gcRequest(), t, w.Item.UID, 0, func(o *Object) Result {
			owners := slices.Clone(o.Owners)
			for _, pr := range w.Owners {
				if j := slices.IndexFunc(owners, func(r OwnerRef) bool { return r.UID == pr.UID }); j >= 0 {
					owners[j] = pr
				} else {
					owners = append(owners, pr)
					putBack = append(putBack, pr.UID)
				}
			}
			o.Owners = owners
			return ok(200)
		})
		if r.OK() {
			for _, owner := range putBack {
				s.trackPutBack(owner, w.Item.UID)
			}
		}
		return r
	}
	panic("unknown write")
}

// trackOrphanOverride records on the orphan-respected ghost that a GC
// DELETE took the orphan finalizer away from prev, an object deleting
// with it: the GC, not a client, withdrew the promise.
func (s *State) trackOrphanOverride(prev *Object, how Override) {
	if !prev.Deleting || !prev.HasFinalizer(FinalizerOrphan) {
		return
	}
	if next := s.Get(prev.UID); next != nil && next.HasFinalizer(FinalizerOrphan) {
		return
	}
	cloned := false
	for i := range s.Orphans {
		if w := &s.Orphans[i]; w.Owner != prev.UID || w.Overridden != NotOverridden {
			continue
		}
		if !cloned {
			s.Orphans, cloned = slices.Clone(s.Orphans), true // states share it
		}
		s.Orphans[i].Overridden = how
	}
}

// trackPutBack records on the orphan-respected ghost that a GC patch put
// dep's reference to owner back after owner's orphaning removed it.
func (s *State) trackPutBack(owner, dep UID) {
	i := slices.IndexFunc(s.Orphans, func(w OrphanWatch) bool { return w.Owner == owner && w.Dep == dep && w.Ran })
	if i < 0 || s.Orphans[i].Overridden != NotOverridden {
		return
	}
	s.Orphans = slices.Clone(s.Orphans) // states share it
	s.Orphans[i].Overridden = PutBackByUnblock
}

// removeFinalizer is operations.go removeFinalizer: GET, drop the
// finalizer, merge-patch with the resourceVersion read. GET and patch are
// one step here, so RetryOnConflict never has to retry. The GET is by
// name, and nothing compares the UID it answers with the item's: a
// stale attemptToOrphan item (its owner removed and a same-name owner
// created since) takes the orphan finalizer off the new owner, whose own
// orphaning has not run (KnownStaleOrphanItem). processDeletingDependentsItem's
// call follows attemptToDeleteItem's GET and UID check in the same step,
// so there the object is the item.
func (m *Model) removeFinalizer(s *State, id Identity, f string) Result {
	o, e := m.getObject(s, id)
	if e == errNotFound {
		return ok(200)
	}
	if e != errNone {
		return fail(500, "InternalError", "cannot finalize owner %s/%s", id.Kind, id.Name)
	}
	if !o.HasFinalizer(f) {
		return ok(200)
	}
	var stale *Object // another incarnation's orphan deletion, for the ghost
	if o.UID != id.UID && f == FinalizerOrphan && o.Deleting {
		b := *o // o points into s.Objects, which update changes
		stale = &b
	}
	r := m.update(s, m.gcRequest(), TargetOf(o), 0, o.RV, func(x *Object) Result {
		x.Finalizers = slices.DeleteFunc(slices.Clone(x.Finalizers), func(y string) bool { return y == f })
		return ok(200)
	})
	if r.OK() && stale != nil {
		s.trackOrphanOverride(stale, OverriddenByStaleItem)
	}
	return r
}

// attemptToOrphan runs one attemptToOrphan work item: strip the owner's
// reference from every dependent the graph knows, then remove the orphan
// finalizer. Dependents the graph has not seen yet are not orphaned: that
// is kubernetes#26120, unfixed upstream. An owner whose node the graph
// removed after it was queued (its DELETED event, after a second DELETE
// took the orphan finalizer off) is still orphaned, through the
// dependents it had then (GC.Detached): upstream's queue holds the node.
func (m *Model) attemptToOrphan(s *State, uid UID) {
	g := &s.GC
	i, queued := identIndex(g.AttemptToOrphan, uid)
	if !queued {
		return
	}
	owner := g.AttemptToOrphan[i]
	g.AttemptToOrphan = s.dequeue(g.AttemptToOrphan, uid)
	var deps []UID
	if j, ok := g.detached(uid); ok {
		deps = g.Detached[j].Dependents
		g.Detached = slices.Delete(slices.Clone(g.Detached), j, j+1)
	} else if n := g.node(uid); n != nil {
		owner = n.Identity
		deps = slices.Clone(n.Dependents)
	} else {
		return
	}
	requeue := func() {
		if s.GC.node(uid) != nil {
			s.GC.AttemptToOrphan = s.enqueue(s.GC.AttemptToOrphan, uid)
			return
		}
		// detached: the item keeps its identity and the dependents it saw
		j, _ := identIndex(s.GC.AttemptToOrphan, uid)
		s.GC.AttemptToOrphan = s.insertIdentity(s.GC.AttemptToOrphan, j, owner)
		s.detach(uid, deps)
	}
	s.Orphans = slices.Clone(s.Orphans) // copy-on-write: states share it
	for i := range s.Orphans {
		if o := &s.Orphans[i]; o.Owner == uid && !o.Ran {
			o.Ran, o.Seen = true, hasUID(deps, o.Dep)
		}
	}
	failed := false
	for _, du := range deps {
		d := s.GC.node(du)
		if d == nil {
			continue
		}
		k, e := apiResource(s, d.Kind)
		if e != errNone {
			failed = true
			continue
		}
		t := Target{Kind: k, Namespace: d.Namespace, Name: d.Name}
		r := m.update(s, m.gcRequest(), t, du, 0, func(o *Object) Result {
			o.Owners = slices.DeleteFunc(slices.Clone(o.Owners), func(r OwnerRef) bool { return r.UID == owner.UID })
			return ok(200)
		})
		if !r.OK() && r.Code != 404 {
			failed = true
		}
	}
	if failed {
		requeue()
		return
	}
	if r := m.removeFinalizer(s, owner, FinalizerOrphan); !r.OK() {
		requeue()
	}
}
