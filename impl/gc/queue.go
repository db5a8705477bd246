package gc

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// queue is a work queue of graph nodes (attemptToDelete or
// attemptToOrphan). Items are keyed by UID, as in the model: a node's
// identity may change while it is queued (a virtual node takes its
// observed or an alternate identity), and the worker reads the node the
// graph holds when it runs.
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
	q       workqueue.TypedRateLimitingInterface[types.UID]
	mu      sync.Mutex
	waiting map[types.UID]bool
}

func newAutoQueue(name string) *autoQueue {
	return &autoQueue{
		q: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: name}),
		waiting: map[types.UID]bool{},
	}
}

func (a *autoQueue) Add(id Identity) { a.q.Add(id.UID) }

func (a *autoQueue) AddRateLimited(id Identity) {
	a.mu.Lock()
	a.waiting[id.UID] = true
	a.mu.Unlock()
	a.q.AddRateLimited(id.UID)
}

func (a *autoQueue) Forget(uid types.UID) { a.q.Forget(uid) }

func (a *autoQueue) Len() int { return a.q.Len() }

// get takes the next item, blocking; quit is true after shutdown.
func (a *autoQueue) get() (types.UID, bool) {
	uid, quit := a.q.Get()
	a.mu.Lock()
	delete(a.waiting, uid)
	a.mu.Unlock()
	return uid, quit
}

func (a *autoQueue) retrying() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting)
}

// heldQueue is a Stepped-mode work queue: an insertion-ordered set that
// nothing takes from until the caller names an item. A queued item keeps
// the identity it was (last) queued under, which is the name a trace
// gives it even after the node was removed or renamed.
type heldQueue struct {
	mu    sync.Mutex
	items []Identity
}

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

func (h *heldQueue) AddRateLimited(id Identity) { h.Add(id) }

func (h *heldQueue) Forget(types.UID) {}

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
