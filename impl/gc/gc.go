// Package gc is cascade's reference garbage collector: a re-implementation
// of the kube-controller-manager v1.36 garbage collector
// (pkg/controller/garbagecollector) against a real API server, with the
// bug catalogue switchable and a stepped scheduler for deterministic
// replay of model traces.
//
// The pipeline is upstream's: discovery finds every resource that
// supports delete, list and watch (re-synced periodically, so custom
// resources created later are monitored; events are ignored); one
// metadata-only informer per resource feeds a single-threaded graph
// builder (processGraphChanges), which keeps a graph of owners and
// dependents with virtual nodes for owners not yet observed, and feeds two
// work queues: attemptToDelete (collect garbage, drive foreground
// deletion, verify virtual nodes) and attemptToOrphan (orphan
// dependents). Workers classify an item's owners as solid, dangling or
// waitingForDependentsDeletion by live GETs and delete with UID and
// resourceVersion preconditions, patch ownerReferences (strategic merge,
// JSON merge for custom resources) or remove finalizers.
//
// Options.Mode picks the scheduler. Auto runs informers, graph builder and
// workers concurrently. Stepped runs only the informers: their events are
// held per resource and nothing else happens until the caller, through
// Stepper, delivers an event or runs a work item, one model trace step per
// call.
package gc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/step"
)

// UserAgent is the GC's user agent, so audit logs tell its requests apart.
const UserAgent = "cascade-gc"

// Options configures a GarbageCollector.
type Options struct {
	// Mode is step.Auto (default) or step.Stepped.
	Mode step.Mode
	// Workers is the number of attemptToDelete and of attemptToOrphan
	// workers in Auto mode; 0 means 5 (upstream's integration tests; the
	// kube-controller-manager default is 20).
	Workers int
	// SyncPeriod is how often discovery is re-synced in Auto mode; 0
	// means 30s, as in kube-controller-manager. Stepped mode syncs only
	// when a step asks (Resync).
	SyncPeriod time.Duration
	// Bugs switches catalogue entries on; nil is upstream behaviour.
	Bugs bugs.Set
	// EventWait bounds how long a Stepped call waits for the informer
	// event it names to arrive; 0 means 10s.
	EventWait time.Duration
	// InformerLag, in Auto mode, delays each informer event by a random
	// time up to it, each resource's events in order (lag.go): a fault
	// that makes the GC's lookup and adoption races likely. LagSeed
	// seeds the delays.
	InformerLag time.Duration
	LagSeed     uint64
	// InformerRelist, in Auto mode, breaks each resource's watch now and
	// then, and relists it a random time up to it later: the events in
	// between reach the graph builder as a relist hands them on, each
	// object's last state only (lag.go). A fault under which an owner
	// can come and go unobserved (kubernetes#56121). LagSeed seeds it.
	InformerRelist time.Duration
	// WriteDelay, in Auto mode, holds each GC write a random time up to
	// it before sending it (lag.go): a fault that widens the window
	// between a work item's GET and its write.
	WriteDelay time.Duration
	// OnGraphChange, when set, is called with each informer event once
	// processGraphChanges has applied it and released the graph lock
	// (worker-made virtual delete events are not reported). A conformance
	// harness records the calls as evidence of what the graph held when:
	// a worker that began after the call read a graph with the event in
	// it. Run calls it first with a Reset change, before any event. It
	// must return quickly; the graph builder waits for it.
	OnGraphChange func(GraphChange)
}

// GraphChange is one informer event processGraphChanges has applied.
type GraphChange struct {
	UID types.UID
	// ResourceVersion is the version of the object the event carried.
	ResourceVersion string
	// Deleted says the event removed the object.
	Deleted bool
	// Replaced is the UID of the informer's previous version when it is
	// another object's: a relist found the name held by a new object and
	// handed it on as an update from the old one (client-go stores are
	// keyed by namespace/name; kubernetes#133565). "" otherwise.
	Replaced types.UID
	// Reset marks a graph begun anew, and is the only field set: Run
	// reports it before its informers list, with the graph empty. The
	// changes reported before it, by this GC or an earlier one, describe
	// a graph no worker of this GC reads (a restart: impl.Target.RestartGC).
	Reset bool
}

// GarbageCollector is one GC instance. Create it with New, run it with
// Run. Never run two against one cluster, nor one next to the cluster's
// own kube-controller-manager GC: they would race.
type GarbageCollector struct {
	mode step.Mode
	bugs bugs.Set
	opts Options

	metadata    metadata.Interface
	discovery   discovery.DiscoveryInterface // for Resync only; the mapper has its own
	mapper      *restmapper.DeferredDiscoveryRESTMapper
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
	events      typedcorev1.EventInterface

	graph           graph
	absent          *absentCache
	attemptToDelete queue
	attemptToOrphan queue
	graphChanges    workqueue.TypedInterface[*event] // Auto mode
	lag             *informerLag                     // Auto mode, Options.InformerLag and InformerRelist
	stepper         *Stepper                         // Stepped mode

	syncMu    sync.Mutex
	resources map[schema.GroupVersionResource]bool
	monitorMu sync.Mutex
	monitors  map[schema.GroupVersionResource]*monitor
	stopped   bool

	workers sync.WaitGroup
	busy    atomic.Int32
	// writesOK counts successful GC writes (Stepper.Settle's progress).
	writesOK atomic.Int64
	running  atomic.Bool
}

// New builds a GarbageCollector for the cluster cfg points at. It makes
// no request until Run.
func New(cfg *rest.Config, opts Options) (*GarbageCollector, error) {
	if opts.Workers <= 0 {
		opts.Workers = 5
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = 30 * time.Second
	}
	if opts.EventWait <= 0 {
		opts.EventWait = 10 * time.Second
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = UserAgent
	cfg.WarningHandler = rest.NoWarnings{} // deprecated resources are listed on purpose
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 20, 30 // kube-controller-manager's defaults
	}
	// each deletion takes two API calls (kube-controller-manager doubles QPS)
	cfg.QPS *= 2
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapperDC, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	gc := &GarbageCollector{
		mode: opts.Mode, bugs: opts.Bugs, opts: opts,
		metadata: md, discovery: dc,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(mapperDC)),
		events: cs.CoreV1().Events(""),
		graph:  graph{nodes: map[types.UID]*node{}, detached: map[types.UID]*node{}},
		absent: newAbsentCache(500, opts.Bugs.Has(bugs.UIDOnlyIdentity)),
	}
	// Run replaces this with a recorder that writes Events; a broadcaster
	// starts a goroutine, which a GC that never runs must not leak.
	gc.recorder = &record.FakeRecorder{}
	if opts.Mode == step.Stepped {
		gc.stepper = newStepper(gc)
		gc.attemptToDelete, gc.attemptToOrphan = &gc.stepper.attemptToDelete, &gc.stepper.attemptToOrphan
	} else {
		gc.attemptToDelete = newAutoQueue("garbage_collector_attempt_to_delete")
		gc.attemptToOrphan = newAutoQueue("garbage_collector_attempt_to_orphan")
		gc.graphChanges = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[*event]{Name: "garbage_collector_graph_changes"})
		if opts.InformerLag > 0 || opts.InformerRelist > 0 {
			gc.lag = newInformerLag(opts.InformerLag, opts.InformerRelist, opts.LagSeed, gc.graphChanges.Add)
		}
	}
	return gc, nil
}

// Mode returns the scheduler mode.
func (gc *GarbageCollector) Mode() step.Mode { return gc.mode }

// Bugs returns the switched-on bugs.
func (gc *GarbageCollector) Bugs() bugs.Set { return gc.bugs }

// Stepper returns the stepped scheduler, or nil in Auto mode.
func (gc *GarbageCollector) Stepper() *Stepper { return gc.stepper }

// Run runs the GC until ctx is done and returns once every goroutine it
// started has stopped. It syncs discovery first and, in Auto mode, again
// every SyncPeriod, and starts the workers once the monitors have synced or SyncPeriod has passed
// (upstream proceeds without unsyncable monitors, kubernetes#125796).
// Run may be called once.
func (gc *GarbageCollector) Run(ctx context.Context) error {
	if !gc.running.CompareAndSwap(false, true) {
		return errors.New("gc: Run called twice")
	}
	ctx = ctrllog.IntoContext(ctx, ctrllog.FromContext(ctx).WithName("gc"))
	log := ctrllog.FromContext(ctx)
	log.Info("starting garbage collector", "mode", gc.mode, "bugs", gc.bugs.String())
	gc.broadcaster = record.NewBroadcaster()
	gc.recorder = gc.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "garbage-collector-controller"})
	gc.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: gc.events})
	defer gc.broadcaster.Shutdown()

	if f := gc.opts.OnGraphChange; f != nil {
		f(GraphChange{Reset: true}) // the graph is empty until Resync's monitors list
	}
	if err := gc.Resync(ctx); err != nil {
		log.Error(err, "initial discovery sync")
	}
	gc.workers.Go(func() {
		if gc.mode == step.Stepped {
			// the discovery sync is a step (`gc sync`, Target.Step) like
			// every other: a periodic one would start and stop monitors,
			// and hold their events, at moments no trace names
			return
		}
		t := time.NewTicker(gc.opts.SyncPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := gc.Resync(ctx); err != nil {
					log.Error(err, "discovery sync")
				}
			}
		}
	})
	if gc.mode == step.Auto {
		gc.workers.Go(func() {
			for {
				ev, quit := gc.graphChanges.Get()
				if quit {
					return
				}
				gc.processGraphChanges(ctx, ev)
				gc.graphChanges.Done(ev)
			}
		})
		syncCtx, cancel := context.WithTimeout(ctx, gc.opts.SyncPeriod)
		if err := gc.WaitForSync(syncCtx); err != nil && ctx.Err() == nil {
			log.Info("not all resource monitors could be synced, proceeding anyway")
		}
		cancel()
		for range gc.opts.Workers {
			gc.workers.Go(func() { gc.runAttemptToDeleteWorker(ctx) })
			gc.workers.Go(func() { gc.runAttemptToOrphanWorker(ctx) })
		}
	}
	<-ctx.Done()
	log.Info("stopping garbage collector")
	if gc.mode == step.Auto {
		gc.graphChanges.ShutDown()
		gc.attemptToDelete.(*autoQueue).q.ShutDown()
		gc.attemptToOrphan.(*autoQueue).q.ShutDown()
	} else {
		gc.stepper.shutdown()
	}
	gc.stopMonitors()
	if gc.lag != nil {
		gc.lag.close()
	}
	gc.workers.Wait()
	return nil
}

// WaitForSync waits until every monitor has synced (IsSynced).
func (gc *GarbageCollector) WaitForSync(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !gc.IsSynced() {
		select {
		case <-ctx.Done():
			return errors.New("gc: monitors did not sync: " + ctx.Err().Error())
		case <-t.C:
		}
	}
	return nil
}

func (gc *GarbageCollector) runAttemptToDeleteWorker(ctx context.Context) {
	q := gc.attemptToDelete.(*autoQueue)
	for {
		id, quit := q.get()
		if quit {
			return
		}
		gc.busy.Add(1)
		writes, out := gc.attemptToDeleteItem(ctx, id)
		for _, w := range writes {
			var next bool
			if out, next = gc.sent(ctx, w, gc.send(ctx, w)); !next {
				break
			}
		}
		gc.finish(id.UID, out)
		q.q.Done(id.UID)
		gc.busy.Add(-1)
	}
}

func (gc *GarbageCollector) runAttemptToOrphanWorker(ctx context.Context) {
	q := gc.attemptToOrphan.(*autoQueue)
	for {
		id, quit := q.get()
		if quit {
			return
		}
		gc.busy.Add(1)
		gc.finishOrphan(id, gc.attemptToOrphanItem(ctx, id.UID))
		q.q.Done(id.UID)
		gc.busy.Add(-1)
	}
}

// Stats is a snapshot of the GC's queues, for quiescence checks.
type Stats struct {
	// Nodes in the graph.
	Nodes int
	// GraphChanges: informer and virtual events not yet processed (in
	// Stepped mode: held).
	GraphChanges int
	// AttemptToDelete and AttemptToOrphan: items ready to run.
	AttemptToDelete, AttemptToOrphan int
	// Retrying: Auto-mode items waiting out a back-off (an owner of an
	// unserved kind is retried forever).
	Retrying int
	// Busy: work items being processed now; in Stepped mode, items with
	// held writes.
	Busy int
}

// Idle reports that nothing is queued or being processed; items waiting
// out a back-off do not count.
func (s Stats) Idle() bool {
	return s.GraphChanges == 0 && s.AttemptToDelete == 0 && s.AttemptToOrphan == 0 && s.Busy == 0
}

// Stats returns the current queue depths.
func (gc *GarbageCollector) Stats() Stats {
	gc.graph.mu.RLock()
	s := Stats{Nodes: len(gc.graph.nodes)}
	gc.graph.mu.RUnlock()
	s.AttemptToDelete, s.AttemptToOrphan = gc.attemptToDelete.Len(), gc.attemptToOrphan.Len()
	if gc.mode == step.Stepped {
		s.GraphChanges, s.Busy = gc.stepper.counts()
		return s
	}
	s.GraphChanges = gc.graphChanges.Len()
	if gc.lag != nil {
		s.GraphChanges += int(gc.lag.pending.Load())
	}
	s.Retrying = gc.attemptToDelete.(*autoQueue).retrying() + gc.attemptToOrphan.(*autoQueue).retrying()
	s.Busy = int(gc.busy.Load())
	return s
}

// Backoff names an item waiting out a back-off in one of the work queues,
// by the queue's name as upstream's (garbage_collector_attempt_to_delete,
// garbage_collector_attempt_to_orphan).
type Backoff struct {
	Queue string
	UID   types.UID
}

// BackingOff returns the Auto-mode items waiting out a back-off, each
// with the number of its wait: a new number every time the item fails
// and is requeued (AddRateLimited), so that a caller can tell whether an
// item it saw waiting has been retried since. Settling on a shared impl
// uses it to wait for one more try of its own items only: an item that
// fails for good (a delete the protection webhook denies, an owner of a
// kind nobody serves) is retried forever, with back-offs up to the
// rate limiter's 1000 s. Empty in Stepped mode.
func (gc *GarbageCollector) BackingOff() map[Backoff]uint64 {
	out := map[Backoff]uint64{}
	if gc.mode == step.Stepped {
		return out
	}
	gc.attemptToDelete.(*autoQueue).backingOff(out)
	gc.attemptToOrphan.(*autoQueue).backingOff(out)
	return out
}

// GraphHasUID reports whether the graph has a node for uid (observed or
// virtual), as upstream's GraphHasUID does for its integration tests.
func (gc *GarbageCollector) GraphHasUID(uid types.UID) bool {
	gc.graph.mu.RLock()
	defer gc.graph.mu.RUnlock()
	_, ok := gc.graph.nodes[uid]
	return ok
}

// NodeInfo describes one graph node.
type NodeInfo struct {
	Identity           Identity
	Owners             []metav1.OwnerReference
	Dependents         []types.UID
	Virtual            bool
	BeingDeleted       bool
	DeletingDependents bool
}

// Node returns the graph's node for uid.
func (gc *GarbageCollector) Node(uid types.UID) (NodeInfo, bool) {
	n, ok := gc.snapshot(uid)
	if !ok {
		return NodeInfo{}, false
	}
	return NodeInfo{Identity: n.identity, Owners: n.owners, Dependents: n.dependentUIDs(), Virtual: n.virtual,
		BeingDeleted: n.beingDeleted, DeletingDependents: n.deletingDependents}, true
}

// AbsentOwners lists absentOwnerCache, sorted.
func (gc *GarbageCollector) AbsentOwners() []Identity { return gc.absent.List() }

// virtualDeleteEvent builds the event enqueueVirtualDeleteEvent queues.
func virtualDeleteEvent(id Identity) *event {
	gv, _ := schema.ParseGroupVersion(id.APIVersion)
	return &event{virtual: true, typ: Deleted, gvk: gv.WithKind(id.Kind), obj: &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: id.APIVersion, Kind: id.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name, UID: id.UID},
	}}
}

// queue is a work queue of graph nodes (attemptToDelete or
// attemptToOrphan). Items are keyed by UID, as in the model, and each
// keeps the identity it was last queued with: upstream's queue holds the
// *node, and when the graph builder replaces a virtual node with the
// observed object of other coordinates it stores a clone, so the queued
// virtual node goes stale (attemptToDeleteItem forgets it). Queuing a
// queued UID again renames the item, as the model's set does.
type queue interface {
	// Add queues the node (workqueue Add).
	Add(id Identity)
	// AddRateLimited requeues the node after a back-off (workqueue
	// AddRateLimited); in Stepped mode it is Add.
	AddRateLimited(id Identity)
	// Forget resets the node's back-off.
	Forget(uid types.UID)
	// Len is the number of items ready to run.
	Len() int
}

// autoQueue is the rate-limited client-go work queue Auto mode's workers
// take from, with the count of items waiting out a back-off.
type autoQueue struct {
	name string
	q    workqueue.TypedRateLimitingInterface[types.UID]
	mu   sync.Mutex
	// waiting maps each item waiting out a back-off to the number of
	// that wait (waits counts them), so that BackingOff's callers can
	// tell an item that was retried since they last looked.
	waiting map[types.UID]uint64
	waits   uint64
	// ids is the identity each UID was last queued with, until a worker
	// takes it.
	ids map[types.UID]Identity
}

func newAutoQueue(name string) *autoQueue {
	return &autoQueue{
		name: name,
		q: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: name}),
		waiting: map[types.UID]uint64{},
		ids:     map[types.UID]Identity{},
	}
}

// Add queues the node.
func (a *autoQueue) Add(id Identity) {
	a.mu.Lock()
	a.ids[id.UID] = id
	a.mu.Unlock()
	a.q.Add(id.UID)
}

// AddRateLimited requeues the node after its back-off.
func (a *autoQueue) AddRateLimited(id Identity) {
	a.mu.Lock()
	a.waits++
	a.waiting[id.UID] = a.waits
	a.ids[id.UID] = id
	a.mu.Unlock()
	a.q.AddRateLimited(id.UID)
}

// Forget resets the node's back-off.
func (a *autoQueue) Forget(uid types.UID) { a.q.Forget(uid) }

// Len is the number of items ready to run.
func (a *autoQueue) Len() int { return a.q.Len() }

// get takes the next item, blocking; quit is true after shutdown. The
// item is the identity its UID was last queued with; one queued twice
// (an add while a back-off ran) comes the second time with its UID alone,
// which attemptToDeleteItem takes for the node the graph holds.
func (a *autoQueue) get() (Identity, bool) {
	uid, quit := a.q.Get()
	a.mu.Lock()
	delete(a.waiting, uid)
	id, ok := a.ids[uid]
	delete(a.ids, uid)
	a.mu.Unlock()
	if !ok {
		id = Identity{UID: uid}
	}
	return id, quit
}

func (a *autoQueue) retrying() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting)
}

// backingOff adds the queue's waiting items to out.
func (a *autoQueue) backingOff(out map[Backoff]uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for uid, n := range a.waiting {
		out[Backoff{Queue: a.name, UID: uid}] = n
	}
}

// heldQueue is a Stepped-mode work queue: an insertion-ordered set that
// nothing takes from until the caller names an item. A queued item keeps
// the identity it was (last) queued under, which is the name a trace
// gives it even after the node was removed or renamed.
type heldQueue struct {
	mu    sync.Mutex
	items []Identity
}

// Add queues the node, or renames it if it is queued.
func (h *heldQueue) Add(id Identity) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.items {
		if h.items[i].UID == id.UID {
			h.items[i] = id
			return
		}
	}
	h.items = append(h.items, id)
}

// AddRateLimited is Add: Stepped mode has no back-off.
func (h *heldQueue) AddRateLimited(id Identity) { h.Add(id) }

// Forget does nothing: Stepped mode has no back-off.
func (h *heldQueue) Forget(types.UID) {}

// Len is the number of queued items.
func (h *heldQueue) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.items)
}

// list returns the queued items in order.
func (h *heldQueue) list() []Identity {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Identity(nil), h.items...)
}

// remove dequeues uid; it reports whether it was queued.
func (h *heldQueue) remove(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.items {
		if h.items[i].UID == uid {
			h.items = append(h.items[:i:i], h.items[i+1:]...)
			return true
		}
	}
	return false
}
