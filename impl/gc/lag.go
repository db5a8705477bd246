package gc

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

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
type informerLag struct {
	max     time.Duration
	add     func(*event) // graphChanges.Add
	mu      sync.Mutex
	rnd     *rand.Rand
	streams map[schema.GroupVersionResource]chan lagged
	stop    chan struct{}
	wg      sync.WaitGroup
	// pending counts events delayed and not yet added: Stats counts them
	// as graph changes, so that the GC is not quiet while one is due.
	pending atomic.Int64
}

type lagged struct {
	ev  *event
	due time.Time
}

func newInformerLag(max time.Duration, seed uint64, add func(*event)) *informerLag {
	return &informerLag{max: max, add: add, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		streams: map[schema.GroupVersionResource]chan lagged{}, stop: make(chan struct{})}
}

// deliver delays ev on its resource's stream. A stream's events are due
// in the order they came, each at the latest of its own random delay and
// the one before it.
func (l *informerLag) deliver(ev *event) {
	l.mu.Lock()
	ch, ok := l.streams[ev.gvr]
	if !ok {
		ch = make(chan lagged, 1024)
		l.streams[ev.gvr] = ch
		l.wg.Add(1)
		go l.drain(ch)
	}
	due := time.Now().Add(time.Duration(l.rnd.Int64N(int64(l.max) + 1)))
	l.mu.Unlock()
	l.pending.Add(1)
	select {
	case ch <- lagged{ev: ev, due: due}:
	case <-l.stop:
		l.pending.Add(-1)
	}
}

// drain adds a stream's events as they fall due, in order.
func (l *informerLag) drain(ch chan lagged) {
	defer l.wg.Done()
	for {
		select {
		case <-l.stop:
			return
		case x := <-ch:
			if d := time.Until(x.due); d > 0 {
				select {
				case <-l.stop:
					return
				case <-time.After(d):
				}
			}
			l.add(x.ev)
			l.pending.Add(-1)
		}
	}
}

// close stops the streams; events still delayed are dropped, as a
// stopped informer's are.
func (l *informerLag) close() {
	close(l.stop)
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
