package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/model"
)

// Observer watches the objects of a run and turns the writes no recorded
// op explains into Observed ops: on a target without an audit log, these
// are the writes of the actors the harness cannot see (the GC, workload
// controllers). Start it before the run and stop it once the target is
// quiescent.
//
// # Soundness of an Observed op's interval
//
// An Observed op stands for the write that produced one watch event. Its
// Return is when the event was received, or the Return of a recorded op
// that answered the object at the event's resourceVersion if earlier:
// the server delivers an event only after committing its write, and
// answers only a revision that exists. Its Call must be a time the write
// certainly came after. A watch delivers one object's events in
// resourceVersion order, so the write came after the write of the
// object's previous event, and after every recorded op that answered
// that previous revision saw it live, so after their Calls; the previous
// write, in turn, came after its own lower bound, back to the observer's
// start for an object's first event (objects in scope are created after
// the observer starts). Note that the previous event's receive time is
// not a lower bound: a write may land before the watch has delivered the
// event of the write before it.
//
// Events of Events are not watched (the GC ignores them), nor are CRDs
// (setup, never in scope).
type Observer struct {
	dyn   dynamic.Interface
	scope Scope
	start time.Time

	mu     sync.Mutex
	events []watchEvent
	errs   []error

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// watchEvent is one event received, in receive order.
type watchEvent struct {
	obj     *Object
	removed bool
	at      int64 // receive time, Unix nanoseconds
	// listed: the event comes from a list, not a watch; writes may have
	// been missed since the object's previous event.
	listed bool
}

// NewObserver returns an observer of the objects in scope on the cluster
// cfg points at; it needs list and watch on every model kind cluster-wide.
func NewObserver(cfg *rest.Config, s Scope) (*Observer, error) {
	c := rest.CopyConfig(cfg)
	c.UserAgent = "cascade-observer"
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("history: observer client: %w", err)
	}
	return &Observer{dyn: dyn, scope: s}, nil
}

// Start lists and watches every observed kind and returns once each has
// been listed (a custom kind whose CRD does not exist yet counts as
// listed; it is looked for again until it is served). ctx bounds the
// initial lists only; the watches run until Stop.
func (o *Observer) Start(ctx context.Context) error {
	o.start = time.Now()
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o.cancel = cancel
	var ready sync.WaitGroup
	for i := range model.Kinds {
		k := model.KindID(i)
		if info := k.Info(); info.Kind == "CustomResourceDefinition" || info.Kind == "Event" {
			continue
		}
		ready.Add(1)
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			o.watchKind(rctx, k, ready.Done)
		}()
	}
	done := make(chan struct{})
	go func() { ready.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		o.Stop()
		return fmt.Errorf("history: observer did not list every kind: %w", ctx.Err())
	}
}

// Stop ends the watches and waits for them. It returns the errors the
// watches met (other than the end of the watch itself).
func (o *Observer) Stop() error {
	if o.cancel != nil {
		o.cancel()
	}
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return errors.Join(o.errs...)
}

// watchKind lists and watches one kind until ctx ends, calling listed
// after the first list (or the first finding that the kind is not served).
func (o *Observer) watchKind(ctx context.Context, k model.KindID, listed func()) {
	info := k.Info()
	gv, _ := schema.ParseGroupVersion(info.APIVersion)
	res := o.dyn.Resource(gv.WithResource(info.Resource))
	known := map[string]*Object{} // live objects in scope of this kind, by UID
	signal := sync.OnceFunc(listed)
	defer signal()
	for ctx.Err() == nil {
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) && ctx.Err() == nil {
				o.fail(fmt.Errorf("history: observer: list %s: %w", info.Resource, err))
			}
			signal()
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		o.reconcile(k, list.Items, known)
		signal()
		o.follow(ctx, k, res, list.GetResourceVersion(), known)
	}
}

// reconcile records what a list shows: objects new or changed since last
// seen, and removals of objects the list no longer has (their DELETED
// event fell into a gap between watches).
func (o *Observer) reconcile(k model.KindID, items []unstructured.Unstructured, known map[string]*Object) {
	at := time.Now().UnixNano()
	seen := map[string]bool{}
	for i := range items {
		obj, ok := o.decode(k, &items[i])
		if !ok {
			continue
		}
		seen[obj.UID] = true
		if prev := known[obj.UID]; prev == nil || prev.RV != obj.RV {
			o.record(watchEvent{obj: obj, at: at, listed: true})
		}
		known[obj.UID] = obj
	}
	for uid, prev := range known {
		if !seen[uid] {
			gone := *prev
			gone.RV = 0 // the deletion's revision is unknown
			o.record(watchEvent{obj: &gone, removed: true, at: at, listed: true})
			delete(known, uid)
		}
	}
}

// follow watches from rv until the watch fails for good or ctx ends; it
// returns to let the caller list again when the watch cannot resume.
func (o *Observer) follow(ctx context.Context, k model.KindID, res dynamic.NamespaceableResourceInterface, rv string, known map[string]*Object) {
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) || apierrors.IsNotFound(err) {
				return
			}
			if ctx.Err() == nil {
				sleep(ctx, 100*time.Millisecond)
			}
			continue
		}
		relist := false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				relist = true // e.g. 410 Expired: resume from a fresh list
				break
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if ev.Type == watch.Bookmark {
				continue
			}
			obj, inScope := o.decode(k, u)
			if !inScope {
				continue
			}
			at := time.Now().UnixNano()
			if ev.Type == watch.Deleted {
				delete(known, obj.UID)
				o.record(watchEvent{obj: obj, removed: true, at: at})
				continue
			}
			if prev := known[obj.UID]; prev != nil && prev.RV == obj.RV {
				continue
			}
			known[obj.UID] = obj
			o.record(watchEvent{obj: obj, at: at})
		}
		w.Stop()
		if relist {
			return
		}
	}
}

// decode reads a watched object; ok is false for objects out of scope.
func (o *Observer) decode(k model.KindID, u *unstructured.Unstructured) (*Object, bool) {
	if !o.scope.Contains(k, u.GetNamespace(), u.GetName()) {
		return nil, false
	}
	raw, err := u.MarshalJSON()
	if err == nil {
		var obj *Object
		if obj, err = decodeObject(k, raw); err == nil {
			return obj, true
		}
	}
	o.fail(fmt.Errorf("history: observer: %s %s/%s: %w", k.Info().Resource, u.GetNamespace(), u.GetName(), err))
	return nil, false
}

func (o *Observer) record(ev watchEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, ev)
}

func (o *Observer) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Ops returns an Observed op (actor "cluster") for every event that no
// op of recorded explains, with the interval described at Observer, and
// marks Removed the recorded DELETEs the watch shows removed the object.
//
// A DELETED event is explained when a successful recorded op removed that
// object (an immediate DELETE answers a Status without a resourceVersion,
// and a removing update answers the resourceVersion before the removal).
//
// Any other event shows the revision some write produced; it is
// explained when that write may be a recorded op: one that answered the
// object at the event's resourceVersion and is not excluded from having
// written it (see mayHaveWritten: its precondition was that revision,
// the revision was seen before it was sent, or it is a DELETE that
// changes nothing on the version before). An answer's resourceVersion alone is
// no proof of a write: a write that changes nothing is not written, and
// the API server answers it with the live object at its current
// revision, which another actor may have produced. Crediting such a
// no-op with the revision drops the other actor's write from the history
// (a controller's status update answered to a client's no-op patch that
// carried the controller's revision as its precondition, found by
// fuzzing the kubeconfig target), and the checker then rightly finds the
// no-op's precondition failed on the version before.
//
// It also completes what the watch tells of recorded ops: a successful
// DELETE whose answer is at the revision of the object's DELETED event
// removed the object, and is marked Removed in recorded. Its answer
// alone may not say so: a DELETE that read the object bare deletes it at
// once, and etcd3's conditionalDelete removes whatever version is
// current by then, answering that version as last stored (finalizers
// and deletionTimestamp included) at the deletion's revision
// (kubernetes#77988, see harness/lin's removal). A revision is one
// write's, and no other answer carries a deletion's revision (a DELETE
// or an update that finds the object gone answers the version it read),
// so the DELETE is the remover. Left unmarked, the removal would stand
// twice in the history, once as the DELETE and once Observed.
//
// Every answer also bounds the intervals of the writes around the
// revision it shows, live at some instant between its Call and Return:
// the write that produced it came before the answer's Return (an
// Observed op's Return is the earlier of that and its receive time), and
// the write that replaced it came after the answer's Call (the lower
// bound the next Observed op of the object starts from).
func (o *Observer) Ops(recorded []Op) []Op {
	o.mu.Lock()
	events := append([]watchEvent(nil), o.events...)
	o.mu.Unlock()

	deletedAt := map[string]uint64{} // by UID: the revision of its DELETED event
	for _, ev := range events {
		if ev.removed && ev.obj.RV != 0 {
			deletedAt[ev.obj.UID] = ev.obj.RV
		}
	}
	for i := range recorded {
		op := &recorded[i]
		if op.Verb == Delete && op.OK() && !op.Removed && op.Got != nil && op.Got.UID != "" {
			if rv, ok := deletedAt[op.Got.UID]; ok && rv == op.Got.RV {
				op.Removed = true
			}
		}
	}

	answered := map[uint64][]*Op{} // successful recorded ops by the resourceVersion they answered
	removedUID := map[string]bool{}
	for i := range recorded {
		op := &recorded[i]
		if !op.OK() || op.Got == nil {
			continue
		}
		if op.Removed {
			removedUID[op.Got.UID] = true
			continue
		}
		answered[op.Got.RV] = append(answered[op.Got.RV], op)
	}
	// seen: the earliest instant each revision is known to have existed
	// at, by an event's receive time or an answer's Return.
	seen := map[uint64]int64{}
	saw := func(rv uint64, at int64) {
		if t, ok := seen[rv]; !ok || at < t {
			seen[rv] = at
		}
	}
	for _, ev := range events {
		if !ev.removed {
			saw(ev.obj.RV, ev.at)
		}
	}
	for rv, ops := range answered {
		for _, op := range ops {
			saw(rv, op.Return)
		}
	}

	lower := map[string]int64{}  // by UID: a lower bound of the next write after the last event seen
	prev := map[string]*Object{} // by UID: the object as its last event showed it
	var out []Op
	for _, ev := range events {
		uid := ev.obj.UID
		low, ok := lower[uid]
		if !ok {
			low = o.start.UnixNano()
		}
		if ev.removed {
			if removedUID[uid] {
				continue
			}
			lower[uid] = low
			out = append(out, observedOp(ev, min(low, ev.at), ev.at))
			continue
		}
		rv := ev.obj.RV
		var before *Object // the version rv replaced, when the watch showed it
		if p := prev[uid]; p != nil && !ev.listed {
			before = p
		}
		prev[uid] = ev.obj
		var after int64 // the latest Call of an answer at rv
		explained := false
		ret := ev.at
		for _, op := range answered[rv] {
			if op.Got.UID != "" && op.Got.UID != uid {
				continue // a revision is one object's; an answer without a uid (a Scale's may lack one) is taken at its word
			}
			after = max(after, op.Call)
			ret = min(ret, op.Return)
			explained = explained || mayHaveWritten(op, rv, before, seen)
		}
		// The next write came after this one, so after low, and after
		// every answer showed rv live, so after their Calls.
		lower[uid] = max(low, after)
		if explained {
			continue // the write is a recorded op's
		}
		out = append(out, observedOp(ev, min(low, ret), ret))
	}
	return out
}

// mayHaveWritten reports whether the successful op, which answered the
// object at revision rv, may be the write that produced rv; before is
// the version rv replaced, if the watch showed it (nil otherwise). The
// op is not the write when it provably wrote nothing, or when rv
// provably existed before the op took effect, for a write always yields
// a new revision:
//   - the op's resourceVersion precondition is rv: it was checked against
//     rv as the live version (a no-op patch answers the version it read);
//   - rv was seen, by an event received or another answer returned,
//     before the op was sent;
//   - the op is a DELETE that changes nothing on before: before was being
//     deleted already and the DELETE's options call for no change of its
//     finalizers (DeletionFinalizers leaves them as they are). Such a
//     DELETE writes nothing (the generic registry returns early on a
//     pending graceful deletion, and etcd3 does not write an update that
//     changes nothing; see harness/lin's delete) and is answered the live
//     object, which another actor may have written after before: the GC
//     removing foregroundDeletion from a Pod, answered to a second DELETE
//     without options that was sent before the watch delivered the GC's
//     write (found by fuzzing the kubeconfig target, seed 77). A DELETE
//     may still shorten a Pod's grace period, which the history does not
//     read: such a write changes nothing the checker judges, so taking it
//     for another actor's changes no verdict.
//
// None of these excludes a writer wrongly. The first two rest only on a
// write producing a revision that did not exist before it was sent. The
// third rests on the API server's rule that a DELETE which changes
// nothing writes nothing: had the DELETE written rv, it would have found
// before live, for a watch shows an object's revisions in order, so the
// version rv replaced is before (which is not taken across a relist),
// and on before the DELETE changes nothing. Excluding a writer wrongly
// would matter, as an Observed op would then stand for the recorded
// write, which the checker could take as a no-op answer.
//
// An op none of these excludes is taken for the write. Should it have
// been a no-op all the same (one without preconditions answered a
// revision another actor wrote before the watch delivered it, on an
// object that was not yet being deleted, or a DELETE that changes
// finalizers as its options say), the checker judges it as the write
// from the version before, more strictly than the Observed op it hides:
// a misattribution can raise a false alarm, never hide a fault.
func mayHaveWritten(op *Op, rv uint64, before *Object, seen map[uint64]int64) bool {
	if pre, ok := op.preconditionRV(); ok && pre == rv {
		return false
	}
	if t, ok := seen[rv]; ok && t < op.Call {
		return false
	}
	if op.Verb == Delete && before != nil && before.Deleting &&
		SameFinalizers(DeletionFinalizers(before, op.Delete), before.Finalizers) {
		return false
	}
	return true
}

// SameFinalizers reports whether a and b hold the same finalizers, in any
// order.
func SameFinalizers(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, f := range a {
		if !slices.Contains(b, f) {
			return false
		}
	}
	return true
}

// preconditionRV returns the resourceVersion precondition the op sent,
// if any: a DELETE's Preconditions.ResourceVersion, or the
// metadata.resourceVersion of an update or a merge patch.
func (op *Op) preconditionRV() (uint64, bool) {
	switch {
	case op.Verb == Delete:
		if op.Delete == nil || op.Delete.PreconditionRV == "" {
			return 0, false
		}
		rv, err := strconv.ParseUint(op.Delete.PreconditionRV, 10, 64)
		return rv, err == nil
	case (op.Verb == Update || op.Verb == Patch) && op.Sent != nil && op.Sent.RV != 0:
		return op.Sent.RV, true
	}
	return 0, false
}

func observedOp(ev watchEvent, call, ret int64) Op {
	return Op{Actor: ActorCluster, Verb: Observed, Kind: ev.obj.Kind, Namespace: ev.obj.Namespace,
		Name: ev.obj.Name, Code: 200, Got: ev.obj, Removed: ev.removed, Call: call, Return: ret}
}
