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

// informerLag is Auto mode's informer-lag fault (Options.InformerLag):
// each informer event reaches the graph builder a random time after the
// informer delivered it, up to the maximum, and each resource's events
// keep their order, as one watch stream lagging behind another would
// deliver them. The GC's lookup and adoption races need exactly that: a
// dependent's event before its owner's (kubernetes#54940's cluster-scoped
// owner looked up in the dependent's namespace), an orphaned dependent's
// update before its owner's deletion. Upstream has no such switch; a
// loaded API server's watch cache lags this way.
//
// With relist (Options.InformerRelist) a lagging stream may also skip
// events as an informer that relists instead of watching does
// (reflector.go ListAndWatch, DeltaFIFO.Replace): the relist hands the
// handler only each object's state at the time of the list, so an event
// a later one about the same object supersedes never reaches it, and
// neither does the delete of an object it never saw (created and deleted
// between two lists; Replace emits deletes only for objects in its
// store). The graph builder then gets, for an object it saw, an update
// from the version it last had, and for one it never saw, an add: what
// Replace's Sync deltas give the handler. This is the model's `gc
// coalesce` (model.OpCoalesce) and impl's Stepper.Coalesce, taken at
// random: kubernetes#56121's stranded virtual node needs it.
type informerLag struct {
	max     time.Duration
	relist  bool
	add     func(*event) // graphChanges.Add
	mu      sync.Mutex
	rnd     *rand.Rand
	streams map[schema.GroupVersionResource]*lagStream
	stop    chan struct{}
	wg      sync.WaitGroup
	// pending counts events delayed and not yet added or skipped: Stats
	// counts them as graph changes, so that the GC is not quiet while
	// one is due.
	pending atomic.Int64
	// skipped counts the events a relist skipped (for tests and logs).
	skipped atomic.Int64
}

// lagStream is one resource's delayed events, oldest first, guarded by
// informerLag.mu.
type lagStream struct {
	queue []lagged
	wake  chan struct{} // one token: queue grew
	// given is, by UID, the version of each object the graph builder
	// last got, for relist: kept only with relist.
	given map[types.UID]*metav1.PartialObjectMetadata
}

type lagged struct {
	ev  *event
	due time.Time
}

func newInformerLag(max time.Duration, relist bool, seed uint64, add func(*event)) *informerLag {
	return &informerLag{max: max, relist: relist, add: add, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		streams: map[schema.GroupVersionResource]*lagStream{}, stop: make(chan struct{})}
}

// deliver delays ev on its resource's stream. A stream's events are due
// in the order they came, each at the latest of its own random delay and
// the one before it.
func (l *informerLag) deliver(ev *event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stop:
		return
	default:
	}
	s, ok := l.streams[ev.gvr]
	if !ok {
		s = &lagStream{wake: make(chan struct{}, 1), given: map[types.UID]*metav1.PartialObjectMetadata{}}
		l.streams[ev.gvr] = s
		l.wg.Add(1)
		go l.drain(s)
	}
	due := time.Now().Add(time.Duration(l.rnd.Int64N(int64(l.max) + 1)))
	s.queue = append(s.queue, lagged{ev: ev, due: due})
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
		ev := l.next(s, head.ev)
		l.mu.Unlock()
		if ev != nil {
			l.add(ev)
		}
		l.pending.Add(-1)
	}
}

// next is the event to hand on for ev, the stream's head just taken off
// its queue, or nil when a relist skips it. Without relist it is ev.
func (l *informerLag) next(s *lagStream, ev *event) *event {
	if !l.relist {
		return ev
	}
	uid := ev.obj.UID
	prev, seen := s.given[uid]
	superseded := false
	for _, later := range s.queue {
		superseded = superseded || later.ev.obj.UID == uid
	}
	// A relist comes at random, so a superseded event is skipped at
	// random; the delete of an object never handed on always is: the
	// informer's store does not hold it, and DeltaFIFO.Delete drops a
	// delete for an object not in its known objects.
	if ev.typ == Deleted && !seen || superseded && l.rnd.IntN(2) == 0 {
		l.skipped.Add(1)
		return nil
	}
	out := *ev
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
