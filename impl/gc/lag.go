package gc

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl/step"
)

// informerLag is Auto mode's informer-lag and informer-relist faults
// (Options.InformerLag, Options.InformerRelist).
//
// With a lag, each informer event reaches the graph builder a random time
// after the informer delivered it, up to the maximum, and each resource's
// events keep their order, as one watch stream lagging behind another
// would deliver them. The GC's lookup and adoption races need exactly
// that: a dependent's event before its owner's (kubernetes#54940's
// cluster-scoped owner looked up in the dependent's namespace), an
// orphaned dependent's update before its owner's deletion. Upstream has
// no such switch; a loaded API server's watch cache lags this way.
//
// With relist gaps, a resource's watch breaks now and then and its
// informer relists up to the maximum gap later (reflector.go
// ListAndWatch; DeltaFIFO.Replace), while the other resources' watches go
// on. A relist hands the handler only each object's state at the time of
// the list: an event that a later one about the same object supersedes
// within the gap never reaches it, and neither does the delete of an
// object it never saw (created and deleted within the gap: Replace, and
// DeltaFIFO.Delete, emit deletes only for objects in the informer's
// store). The graph builder then gets, for an object it saw, an update
// from the version it last had, and for one it never saw, an add: what
// Replace's Sync deltas give the handler. The stores are keyed by
// namespace/name, so an object deleted while another took its name
// within the gap gets no delete: the new object comes as an update from
// it (kubernetes#133565, closed unmerged), and its node stays in the
// graph (model.KnownRelistUIDChange's race). This is the model's `gc
// coalesce` (model.OpCoalesce) and impl's Stepper.Coalesce, taken where a
// gap falls: kubernetes#56121's stranded virtual node needs an owner
// created and deleted within a gap of its resource while its dependent's
// resource is watched.
type informerLag struct {
	max    time.Duration // lag
	gap    time.Duration // relist
	add    func(*event)  // graphChanges.Add
	mu     sync.Mutex
	rnd    *rand.Rand
	gaps   int // relist gaps begun, numbering them
	stream map[schema.GroupVersionResource]*lagStream
	stop   chan struct{}
	wg     sync.WaitGroup
	// pending counts events delayed and not yet added or skipped: Stats
	// counts them as graph changes, so that the GC is not quiet while
	// one is due.
	pending atomic.Int64
	// skipped counts the events a relist skipped (for tests).
	skipped atomic.Int64
}

// gapChance is the chance that an event on a stream outside a gap breaks
// its watch: the event and those after it wait for the relist.
const gapChance = 4 // one in

// lagStream is one resource's delayed events, oldest first, guarded by
// informerLag.mu.
type lagStream struct {
	queue []lagged
	wake  chan struct{} // one token: queue grew
	// gapEnd is when the current relist gap ends, gap its number (0:
	// none yet).
	gapEnd time.Time
	gap    int
	// given is, by UID, the version of each object the graph builder
	// last got (with relist gaps only).
	given map[types.UID]*metav1.PartialObjectMetadata
	// replaces maps an object whose event a relist hands on to the UID of
	// the object of the same name whose delete it skipped (next).
	replaces map[types.UID]types.UID
}

type lagged struct {
	ev  *event
	due time.Time
	gap int // the relist gap the event fell in, 0 for none
}

func newInformerLag(lag, gap time.Duration, seed uint64, add func(*event)) *informerLag {
	return &informerLag{max: lag, gap: gap, add: add, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stream: map[schema.GroupVersionResource]*lagStream{}, stop: make(chan struct{})}
}

// deliver delays ev on its resource's stream. A stream's events are
// handed on in the order they came, each at the latest of its own due
// time and the one before it: a random lag, or the end of the relist gap
// it falls in.
func (l *informerLag) deliver(ev *event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stop:
		return
	default:
	}
	s, ok := l.stream[ev.gvr]
	if !ok {
		s = &lagStream{wake: make(chan struct{}, 1), given: map[types.UID]*metav1.PartialObjectMetadata{}, replaces: map[types.UID]types.UID{}}
		l.stream[ev.gvr] = s
		l.wg.Add(1)
		go l.drain(s)
	}
	now := time.Now()
	x := lagged{ev: ev, due: now}
	if l.max > 0 {
		x.due = now.Add(time.Duration(l.rnd.Int64N(int64(l.max) + 1)))
	}
	if l.gap > 0 {
		if !now.Before(s.gapEnd) && l.rnd.IntN(gapChance) == 0 {
			l.gaps++
			s.gap, s.gapEnd = l.gaps, now.Add(time.Duration(l.rnd.Int64N(int64(l.gap)+1)))
		}
		if now.Before(s.gapEnd) {
			x.gap = s.gap
			x.due = s.gapEnd
		}
	}
	s.queue = append(s.queue, x)
	l.pending.Add(1)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drain hands a stream's events on as they fall due, in order.
func (l *informerLag) drain(s *lagStream) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		var head lagged
		ok := len(s.queue) > 0
		if ok {
			head = s.queue[0]
		}
		l.mu.Unlock()
		if !ok {
			select {
			case <-l.stop:
				return
			case <-s.wake:
				continue
			}
		}
		if d := time.Until(head.due); d > 0 {
			select {
			case <-l.stop:
				return
			case <-time.After(d):
			}
		}
		l.mu.Lock()
		s.queue = s.queue[1:]
		ev := l.next(s, head)
		l.mu.Unlock()
		if ev != nil {
			l.add(ev)
		}
		l.pending.Add(-1)
	}
}

// next is the event to hand on for x, the stream's head just taken off
// its queue, or nil when a relist skips it. Without relist gaps it is
// x's event.
func (l *informerLag) next(s *lagStream, x lagged) *event {
	if l.gap <= 0 {
		return x.ev
	}
	ev := x.ev
	uid := ev.obj.UID
	prev, seen := s.given[uid]
	superseded := false
	for _, later := range s.queue {
		superseded = superseded || x.gap != 0 && later.gap == x.gap && later.ev.obj.UID == uid
	}
	// The delete of an object never handed on is dropped in or out of a
	// gap: the informer's store does not hold it, and DeltaFIFO.Delete
	// drops a delete for an object not among its known objects.
	if superseded || ev.typ == Deleted && !seen {
		l.skipped.Add(1)
		return nil
	}
	// The delete of an object whose name another object holds when the
	// gap ends is never handed on: client-go's stores are keyed by
	// namespace/name, so Replace finds the name listed and hands the new
	// object on as an update from the old one (kubernetes#133565).
	if ev.typ == Deleted && x.gap != 0 {
		if heir := nameHeldAtGapEnd(s.queue, x.gap, ev.obj); heir != "" && heir != uid {
			s.replaces[heir] = uid
			l.skipped.Add(1)
			return nil
		}
	}
	out := *ev
	if old, ok := s.replaces[uid]; ok && ev.typ != Deleted {
		delete(s.replaces, uid)
		out.typ, out.old = Modified, s.given[old]
		delete(s.given, old)
		s.given[uid] = ev.obj
		return &out
	}
	switch {
	case ev.typ == Deleted:
		delete(s.given, uid)
		return &out
	case !seen:
		out.typ, out.old = Added, nil
	default:
		out.typ, out.old = Modified, prev
	}
	s.given[uid] = ev.obj
	return &out
}

// nameHeldAtGapEnd is the UID of the object that holds o's name at the
// end of gap, as the queue's events of that gap show (the last about the
// name, unless it is a delete); "" when none does.
func nameHeldAtGapEnd(queue []lagged, gap int, o *metav1.PartialObjectMetadata) types.UID {
	var holder types.UID
	for _, later := range queue {
		if later.gap == gap && later.ev.obj.Namespace == o.Namespace && later.ev.obj.Name == o.Name {
			holder = later.ev.obj.UID
			if later.ev.typ == Deleted {
				holder = ""
			}
		}
	}
	return holder
}

// close stops the streams; events still delayed are dropped, as a
// stopped informer's are.
func (l *informerLag) close() {
	l.mu.Lock()
	close(l.stop)
	l.mu.Unlock()
	l.wg.Wait()
}

// writeDelay is Auto mode's write-delay fault (Options.WriteDelay): it
// holds each GC write a random time up to the maximum before sending it,
// as a client-side rate limiter under load does (the GC's client allows
// 40 requests a second). The window between attemptToDeleteItem's GET
// and its DELETE, where a client's ownerReference change goes unnoticed
// without the resourceVersion precondition (kubernetes#114603), widens
// with it.
func (gc *GarbageCollector) writeDelay(ctx context.Context) {
	if gc.opts.WriteDelay <= 0 || gc.mode != step.Auto {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(rand.N(gc.opts.WriteDelay + 1)):
	}
}
