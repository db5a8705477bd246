package adopter

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// watchLag is Auto mode's informer-lag fault (Options.InformerLag) for
// the adopter: every watch stream its informers open delivers each event
// a random time up to the maximum after the API server sent it, in the
// order sent, as a watch cache lagging behind etcd would. Streams lag
// independently, so the adopter's cache can still show an owner live
// after the update of a dependent the GC orphaned for that owner's
// deletion has arrived: the window of kubernetes#42639 that upstream's
// RecheckDeletionTimestamp closes with an uncached GET
// (pkg/controller/controller_ref_manager.go), which this fault leaves
// alone.
type watchLag struct {
	max time.Duration
	mu  sync.Mutex
	rnd *rand.Rand
	// pending counts events received from the API server and not yet
	// delivered to an informer: the adopter is not idle while one is due.
	pending atomic.Int64
}

func newWatchLag(max time.Duration, seed uint64) *watchLag {
	return &watchLag{max: max, rnd: rand.New(rand.NewPCG(seed, seed^0x94d049bb133111eb))}
}

// delay draws one event's lag.
func (l *watchLag) delay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.rnd.Int64N(int64(l.max) + 1))
}

// wrap returns a watch that delivers w's events late, in order.
func (l *watchLag) wrap(w watch.Interface) watch.Interface {
	lw := &laggedWatch{in: w, lag: l, buf: make(chan laggedEvent, 1024), out: make(chan watch.Event), stop: make(chan struct{})}
	go lw.receive()
	go lw.send()
	return lw
}

type laggedEvent struct {
	ev  watch.Event
	due time.Time
}

// laggedWatch is one lagging watch stream: receive takes the server's
// events as they come and stamps each with its due time, send delivers
// them in order, each no earlier than its due time. When the server
// ends the stream, the events already received are delivered before the
// result channel closes, so the informer's reflector resumes from the
// last of them.
type laggedWatch struct {
	in       watch.Interface
	lag      *watchLag
	buf      chan laggedEvent
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *laggedWatch) receive() {
	defer close(w.buf)
	for ev := range w.in.ResultChan() {
		w.lag.pending.Add(1)
		select {
		case w.buf <- laggedEvent{ev: ev, due: time.Now().Add(w.lag.delay())}:
		case <-w.stop:
			w.lag.pending.Add(-1)
			return
		}
	}
}

func (w *laggedWatch) send() {
	defer close(w.out)
	for x := range w.buf {
		if d := time.Until(x.due); d > 0 {
			select {
			case <-time.After(d):
			case <-w.stop:
				w.drop(x)
				return
			}
		}
		select {
		case w.out <- x.ev:
			w.lag.pending.Add(-1)
		case <-w.stop:
			w.drop(x)
			return
		}
	}
}

// drop discards x and the events behind it once the stream is stopped:
// a stopped watch's undelivered events are lost, as a real one's are.
func (w *laggedWatch) drop(x laggedEvent) {
	w.lag.pending.Add(-1)
	for range w.buf {
		w.lag.pending.Add(-1)
	}
}

// Stop stops the server's stream and the delivery of what is left.
func (w *laggedWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

// ResultChan delivers the lagged events.
func (w *laggedWatch) ResultChan() <-chan watch.Event { return w.out }

// newInformer is dynamicinformer.NewFilteredDynamicInformer's informer
// for every namespace with no resync, with each watch lagged when lag is
// set.
func newInformer(dyn dynamic.Interface, gvr schema.GroupVersionResource, lag *watchLag) cache.SharedIndexInformer {
	watchFn := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		w, err := dyn.Resource(gvr).Watch(ctx, opts)
		if err != nil || lag == nil {
			return w, err
		}
		return lag.wrap(w), nil
	}
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			return dyn.Resource(gvr).List(context.Background(), opts)
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) { return watchFn(context.Background(), opts) },
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return dyn.Resource(gvr).List(ctx, opts)
		},
		WatchFuncWithContext: watchFn,
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, dyn), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: gvr.String()})
}
