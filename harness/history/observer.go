package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// event of the write before it. ObservedOps narrows these bounds by the
// order of revisions across all objects (revisionBounds).
//
// Events of Events are not watched (the GC ignores them), nor are CRDs
// (setup, never in scope).
type Observer struct {
	dyn   dynamic.Interface
	scope Scope
	start time.Time

	mu     sync.Mutex
	events []WatchEvent
	errs   []error

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// WatchEvent is one event an Observer received.
type WatchEvent struct {
	Object *Object
	// Removed: a DELETED event, or an object a list no longer has (its
	// RV then 0: the deletion's revision is unknown).
	Removed bool
	At      int64 // receive time, Unix nanoseconds
	// Listed: the event comes from a list, not a watch; writes may have
	// been missed since the object's previous event.
	Listed bool
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
			o.record(WatchEvent{Object: obj, At: at, Listed: true})
		}
		known[obj.UID] = obj
	}
	for uid, prev := range known {
		if !seen[uid] {
			gone := *prev
			gone.RV = 0 // the deletion's revision is unknown
			o.record(WatchEvent{Object: &gone, Removed: true, At: at, Listed: true})
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
				o.record(WatchEvent{Object: obj, Removed: true, At: at})
				continue
			}
			if prev := known[obj.UID]; prev != nil && prev.RV == obj.RV {
				continue
			}
			known[obj.UID] = obj
			o.record(WatchEvent{Object: obj, At: at})
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

func (o *Observer) record(ev WatchEvent) {
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

// Ops returns the Observed ops of the events received so far, given the
// ops recorded client-side (ObservedOps).
func (o *Observer) Ops(recorded []Op) []Op {
	o.mu.Lock()
	events := slices.Clone(o.events)
	o.mu.Unlock()
	return ObservedOps(o.start.UnixNano(), events, recorded)
}
