package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/step"
)

// Stepper is the stepped scheduler of a GarbageCollector in step.Stepped
// mode. Informers run, but their events are held in one FIFO per
// resource, and the graph builder and the workers act only when a method
// names the step. Each method is one model trace step (model/step.go):
//
//	gc deliver KEY          Deliver
//	gc deliver-virtual KEY  DeliverVirtual
//	gc coalesce KEY         Coalesce
//	gc lose KEY             Lose (bug lost-first-update only)
//	gc attemptToDelete KEY  AttemptToDelete
//	gc delete|patch|unblock KEY   Send with VerbDelete|VerbPatch|VerbUnblock
//	gc attemptToOrphan KEY  AttemptToOrphan
//	settle                  Settle
//
// Pending, PendingVirtual and Queues show what is held and queued. Keys
// are trace keys (step.Key); a key names the head event of its resource
// (waiting up to Options.EventWait for it to arrive) or the one queued or
// in-flight item under that key (give the UID when several share it).
// A step that cannot be taken now returns an error wrapping
// step.ErrNotEnabled and changes nothing. Methods are safe to call from
// any goroutine; they run one at a time.
type Stepper struct {
	gc     *GarbageCollector
	stepMu sync.Mutex // one step at a time

	mu       sync.Mutex
	arrivals step.Arrivals // signalled whenever an event is held
	pending  map[schema.GroupVersionResource][]*event
	virtual  []*event
	// delivered is the graph builder's view per resource: the version of
	// each object it was last given (or that a lost update put in the
	// informer's cache). It supplies an update's old object.
	delivered map[schema.GroupVersionResource]map[types.UID]*metav1.PartialObjectMetadata
	inflight  []*inFlight

	attemptToDelete heldQueue
	attemptToOrphan heldQueue
}

// inFlight is an attemptToDelete item whose writes are decided, not all sent.
type inFlight struct {
	uid    types.UID
	writes []write
}

func newStepper(gc *GarbageCollector) *Stepper {
	return &Stepper{gc: gc, arrivals: step.NewArrivals(),
		pending:   map[schema.GroupVersionResource][]*event{},
		delivered: map[schema.GroupVersionResource]map[types.UID]*metav1.PartialObjectMetadata{}}
}

// hold is the informer handler in Stepped mode.
func (s *Stepper) hold(ev *event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[ev.gvr] = append(s.pending[ev.gvr], ev)
	s.arrivals.Signal()
}

func (s *Stepper) holdVirtual(ev *event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.virtual = append(s.virtual, ev)
	s.arrivals.Signal()
}

// forget drops what a stopped monitor of r held: the events its handler
// had not yet given the graph builder go with the informer (its nodes stay
// in the graph, as upstream's syncMonitors leaves them), and so does its
// cache, which a later monitor of r rebuilds from its own initial list.
func (s *Stepper) forget(r schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, r)
	delete(s.delivered, r)
}

func (s *Stepper) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals.Close()
}

func (s *Stepper) counts() (events, busy int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.pending {
		events += len(q)
	}
	return events + len(s.virtual), len(s.inflight)
}

// resourceFor finds the monitored resource of a key's kind. A kind not
// monitored yet triggers one discovery sync first, so that a step can
// name a custom resource whose CRD appeared since the last discovery sync
// (the new informer's initial list then holds its events).
func (s *Stepper) resourceFor(ctx context.Context, k step.Key) (schema.GroupVersionResource, error) {
	known, isKnown := step.KindByName(k.Kind)
	lookup := func() (schema.GroupVersionResource, bool) {
		s.gc.monitorMu.Lock()
		defer s.gc.monitorMu.Unlock()
		for r, m := range s.gc.monitors {
			if m.gvk.Kind == k.Kind && (!isKnown || m.gvk.Group == known.Group) {
				return r, true
			}
		}
		return schema.GroupVersionResource{}, false
	}
	if r, ok := lookup(); ok {
		return r, nil
	}
	if err := s.gc.Resync(ctx); err != nil {
		return schema.GroupVersionResource{}, err
	}
	if r, ok := lookup(); ok {
		return r, nil
	}
	return schema.GroupVersionResource{}, step.NotEnabled("the gc has no informer for kind %s", k.Kind)
}

// head waits (up to Options.EventWait) for an event of k's resource and
// checks that the oldest is about k, where the adds of an informer's
// initial list count as equally old (initialListIndex). Caller holds
// stepMu, not s.mu.
func (s *Stepper) head(ctx context.Context, k step.Key) (schema.GroupVersionResource, *event, error) {
	r, err := s.resourceFor(ctx, k)
	if err != nil {
		return r, nil, err
	}
	timer := time.NewTimer(s.gc.opts.EventWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.arrivals.Closed() {
			s.mu.Unlock()
			return r, nil, errors.New("gc: stopped")
		}
		if q := s.pending[r]; len(q) > 0 {
			i := initialListIndex(q, k)
			if i > 0 {
				// the initial list's adds come in no fixed order: take
				// the one about k first
				e := q[i]
				copy(q[1:i+1], q[:i])
				q[0] = e
			}
			s.mu.Unlock()
			if !k.Matches(q[0].gvk.Kind, q[0].obj.Namespace, q[0].obj.Name, q[0].obj.UID) {
				return r, nil, step.NotEnabled("next %s event is for %s, not %s", r.Resource, describe(q[0]).Key, k)
			}
			return r, q[0], nil
		}
		wait := s.arrivals.Wait()
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return r, nil, ctx.Err()
		case <-timer.C:
			return r, nil, step.NotEnabled("no pending %s event (waited %s)", r.Resource, s.gc.opts.EventWait)
		case <-wait:
		}
	}
}

// initialListIndex finds the event about k among the initial list's adds
// at the front of q, or returns -1. client-go's reflector streams the
// initial list into a map-backed temporary store and hands the informer
// its List() (reflector.go watchList: r.store.Replace(temporaryStore.List(),
// ...)), so upstream's graph builder gets those adds in map order: any
// order is one it can see.
func initialListIndex(q []*event, k step.Key) int {
	for i, e := range q {
		if !e.listed {
			break
		}
		if k.Matches(e.gvk.Kind, e.obj.Namespace, e.obj.Name, e.obj.UID) {
			return i
		}
	}
	return -1
}

// pop removes r's head event and updates the graph builder's view; it
// returns the version the event replaces.
func (s *Stepper) pop(r schema.GroupVersionResource, updateView bool) (ev, old *metav1.PartialObjectMetadata, e *event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e = s.pending[r][0]
	s.pending[r] = s.pending[r][1:]
	if !updateView {
		return e.obj, nil, e
	}
	view := s.delivered[r]
	if view == nil {
		view = map[types.UID]*metav1.PartialObjectMetadata{}
		s.delivered[r] = view
	}
	if e.replaces != "" {
		old = view[e.replaces]
		delete(view, e.replaces)
	}
	if v, ok := view[e.obj.UID]; ok {
		old = v
	}
	if e.typ == Deleted {
		delete(view, e.obj.UID)
	} else {
		view[e.obj.UID] = e.obj
	}
	return e.obj, old, e
}

// Deliver is `gc deliver KEY`: the graph builder processes the next
// informer event of KEY's resource, which must be about KEY.
func (s *Stepper) Deliver(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	r, _, err := s.head(ctx, k)
	if err != nil {
		return err
	}
	_, old, e := s.pop(r, true)
	ev := *e
	ev.old = old
	s.gc.processGraphChanges(ctx, &ev)
	return nil
}

// Coalesce is `gc coalesce KEY`: an informer relist skips the head event
// of KEY's resource, because a later event about the same object
// supersedes it, because it deletes an object the graph builder never
// saw (a relist emits deletes only for objects in its store), or because
// it deletes an object whose name a new object took within the gap:
// client-go's stores are keyed by namespace/name, so the relist finds the
// name listed and hands the new object's event on as an update from the
// old one, with no delete (RealFIFO.Replace, processDeltas;
// kubernetes#133565). An event that carries such a replacement is
// skipped only for a later update of its object, which takes the
// replacement over, never for its delete. The model's Watcher.coalesce.
func (s *Stepper) Coalesce(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	r, _, err := s.head(ctx, k)
	if err != nil {
		return err
	}
	// The superseding event may still be on its way from the API server:
	// wait for it as head waits for the event it names.
	timer := time.NewTimer(s.gc.opts.EventWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok := s.coalesce(r)
		wait := s.arrivals.Wait()
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return step.NotEnabled("a relist cannot skip the next %s event", k)
		case <-wait:
		}
	}
}

// coalesce skips r's head event if a relist may (Coalesce), passing on
// the replacement it stands for; s.mu is held.
func (s *Stepper) coalesce(r schema.GroupVersionResource) bool {
	q := s.pending[r]
	h := q[0]
	at, replaces := -1, h.replaces
	for i, later := range q[1:] {
		if later.obj.UID == h.obj.UID {
			if h.replaces != "" && later.typ == Deleted {
				return false
			}
			at = i + 1
			break
		}
	}
	if at < 0 && h.replaces != "" {
		return false
	}
	if at < 0 && h.typ == Deleted {
		if _, seen := s.delivered[r][h.obj.UID]; !seen {
			s.pending[r] = q[1:]
			return true
		}
		at, replaces = nextOfName(q, h), h.obj.UID
	}
	if at < 0 {
		return false
	}
	nq := slices.Clone(q[1:])
	if replaces != "" {
		e := *nq[at-1]
		e.replaces = replaces
		nq[at-1] = &e
	}
	s.pending[r] = nq
	return true
}

// nextOfName is the position in q of the first event after the head
// about the head's name, when that event is about another object and not
// its delete: the relist lists the name held by that object. -1
// otherwise.
func nextOfName(q []*event, h *event) int {
	for i, e := range q[1:] {
		if e.obj.Namespace == h.obj.Namespace && e.obj.Name == h.obj.Name {
			if e.obj.UID == h.obj.UID || e.typ == Deleted {
				return -1
			}
			return i + 1
		}
	}
	return -1
}

// Lose is `gc lose KEY` (bug lost-first-update only): the informer's cache
// takes the head update of KEY's resource, but the handler is not called.
func (s *Stepper) Lose(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	if !s.gc.bugs.Has(bugs.LostFirstUpdate) {
		return step.NotEnabled("gc lose needs bug %s", bugs.LostFirstUpdate)
	}
	r, h, err := s.head(ctx, k)
	if err != nil {
		return err
	}
	if h.typ != Modified {
		return step.NotEnabled("gc lose needs a pending update, the next %s event is a %s", k, h.typ)
	}
	s.pop(r, true)
	return nil
}

// DeliverVirtual is `gc deliver-virtual KEY`: the graph builder processes
// the next virtual delete event, which must be about KEY.
func (s *Stepper) DeliverVirtual(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	s.mu.Lock()
	if len(s.virtual) == 0 || !k.Matches(s.virtual[0].gvk.Kind, s.virtual[0].obj.Namespace, s.virtual[0].obj.Name, s.virtual[0].obj.UID) {
		s.mu.Unlock()
		return step.NotEnabled("next virtual delete event is not for %s", k)
	}
	ev := s.virtual[0]
	s.virtual = s.virtual[1:]
	s.mu.Unlock()
	s.gc.processGraphChanges(ctx, ev)
	return nil
}

// find resolves a key to the one queued item it names.
func find(items []Identity, k step.Key) (Identity, error) {
	var found []Identity
	for _, id := range items {
		if k.Matches(id.Kind, id.Namespace, id.Name, id.UID) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return Identity{}, step.NotEnabled("%s is not queued", k)
	case 1:
		return found[0], nil
	}
	return Identity{}, step.NotEnabled("%s names several queued items; give its UID", k)
}

func (s *Stepper) inFlightFor(uid types.UID) *inFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.inflight {
		if f.uid == uid {
			return f
		}
	}
	return nil
}

// AttemptToDelete is `gc attemptToDelete KEY`: run attemptToDeleteItem up
// to its writes. Every live GET happens now and the decision is made; the
// writes are held for Send. Removing the foregroundDeletion finalizer
// happens here, inside the work item, as in upstream's single call.
func (s *Stepper) AttemptToDelete(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	id, err := find(s.attemptToDelete.list(), k)
	if err != nil {
		return err
	}
	if s.inFlightFor(id.UID) != nil {
		return step.NotEnabled("%s is being processed: its writes are in flight", k)
	}
	s.attemptToDelete.remove(id.UID)
	writes, out := s.gc.attemptToDeleteItem(ctx, id)
	if len(writes) > 0 {
		s.mu.Lock()
		s.inflight = append(s.inflight, &inFlight{uid: id.UID, writes: writes})
		s.mu.Unlock()
		return nil
	}
	s.gc.finish(id.UID, out)
	return nil
}

// Send is `gc delete|patch|unblock KEY`: send the next held write of the
// item KEY names, which must be of that verb. err reports a step that
// cannot be taken; writeErr is the API server's answer to a write that
// was sent (nil on success), after which the item's verdict applies as in
// attemptToDeleteWorker.
func (s *Stepper) Send(ctx context.Context, k step.Key, verb Verb) (writeErr, err error) {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	s.mu.Lock()
	var f *inFlight
	for _, c := range s.inflight {
		if w := c.writes[0].item; k.Matches(w.Kind, w.Namespace, w.Name, w.UID) {
			if f != nil {
				s.mu.Unlock()
				return nil, step.NotEnabled("%s names several in-flight items; give its UID", k)
			}
			f = c
		}
	}
	s.mu.Unlock()
	switch {
	case f == nil:
		return nil, step.NotEnabled("the gc has no write in flight for %s", k)
	case f.writes[0].verb != verb:
		return nil, step.NotEnabled("the next write for %s is %s, not %s", k, f.writes[0].verb, verb)
	}
	w := f.writes[0]
	writeErr = s.gc.send(ctx, w)
	out, next := s.gc.sent(ctx, w, writeErr)
	s.mu.Lock()
	if next && len(f.writes) > 1 {
		f.writes = f.writes[1:]
		s.mu.Unlock()
		return writeErr, nil
	}
	for i, c := range s.inflight {
		if c == f {
			s.inflight = append(s.inflight[:i:i], s.inflight[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if out != forget {
		s.gc.finish(f.uid, out)
	}
	return writeErr, nil
}

// AttemptToOrphan is `gc attemptToOrphan KEY`: the whole orphan work item.
func (s *Stepper) AttemptToOrphan(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	id, err := find(s.attemptToOrphan.list(), k)
	if err != nil {
		return err
	}
	s.attemptToOrphan.remove(id.UID)
	s.gc.finishOrphan(id, s.gc.attemptToOrphanItem(ctx, id.UID))
	return nil
}

// Arrived returns a channel closed when the next informer event (or
// virtual delete event) is held: Settle's quiet wait, and
// impl.Target.Settle's, which waits for the GC and the adopting
// controller at once.
func (s *Stepper) Arrived() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrivals.Wait()
}

// CatchUp is Settle without its quiet wait: it runs Settle's rounds until
// one delivers no event and makes no successful write, and reports
// whether any did.
//
// A round whose only progress is successful writes counts only once one
// of their events arrives (within SettleQuiet). A write that changes
// nothing succeeds without an event: a foreground DELETE of an object
// already deleting in the foreground, an unblock patch built from a
// graph node whose references are no longer blocking. An item the GC
// requeues after such writes (attemptToDeleteWorker's requeue of a node
// not yet observed) repeats them every round, as upstream retries it
// forever; counted as progress, they would never let the GC catch up.
//
// A round that ends where an earlier round of this call ended (the same
// fingerprint) has caught up too: the GC is in a loop of retries that
// change nothing, as upstream's rate-limited requeues are. The one the
// fuzzer found (traces/scenarios/virtual-owner-two-identities.trace): a
// virtual owner node that two ownerReferences of one dependent name by
// one UID under two absent identities passes from one identity to the
// other for ever (processGraphChanges keeps the node for the
// nonmatching dependent and getAlternateOwnerIdentity picks the other
// name). The model's Settle stops the same way, when every internal step
// leads back to a state it has seen. progressed then reports whether
// the loop is somewhere other than where the call began, and loop is an
// arrival channel taken just before the round that closed the loop: the
// events held until then are the loop's own (a virtual delete event it
// enqueues again every round), so a caller's quiet wait listens to loop
// instead of a channel taken before the rounds, and does not count held
// events as work. loop is nil when the rounds caught up without a loop.
func (s *Stepper) CatchUp(ctx context.Context) (progressed bool, loop <-chan struct{}, err error) {
	start := s.fingerprint()
	seen := map[string]bool{start: true}
	for range MaxSettleRounds {
		before := s.gc.writesOK.Load()
		arrived := s.Arrived()
		delivered, err := s.settleRound(ctx)
		if err != nil {
			return progressed, nil, err
		}
		if delivered == 0 && s.gc.writesOK.Load() == before {
			return progressed, nil, nil
		}
		if delivered == 0 {
			select {
			case <-ctx.Done():
				return progressed, nil, ctx.Err()
			case <-arrived:
			case <-time.After(SettleQuiet):
				return progressed, nil, nil // writes without effect
			}
		}
		next := s.Arrived()
		now := s.fingerprint()
		if seen[now] {
			return now != start, next, nil
		}
		seen[now] = true
		progressed = true
	}
	return progressed, nil, fmt.Errorf("gc: did not catch up within %d rounds: %s", MaxSettleRounds, s)
}

// Held is the number of informer and virtual delete events held.
func (s *Stepper) Held() int {
	n, _ := s.counts()
	return n
}
