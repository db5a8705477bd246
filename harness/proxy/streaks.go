package proxy

// The real GC's work queues retry a failed item after a back-off that
// doubles with each failure in a row (attemptToDeleteWorker's and
// attemptToOrphanWorker's AddRateLimited on
// workqueue.DefaultTypedControllerRateLimiter, reset by Forget when a
// pass succeeds). A settle has to wait that back-off out, so it needs
// the longest run of failures; the record keeps the runs as requests are
// answered, so that a settle does not copy the whole record to count
// them (Proxy.GCFailStreak).

// streakKey names one object of one resource.
type streakKey struct{ group, resource, namespace, name string }

// failStreaks counts, per object, the garbage collector's writes
// answered with an error since its last write answered 2xx.
type failStreaks map[streakKey]int

// add counts r: a write of the proxy's own kube-controller-manager's
// GC to an object (not a subresource) that got an answer. Other
// clients' and processes' requests, reads, and requests refused or cut
// off on their way (Code 0) do not count.
func (f failStreaks) add(r Request) {
	if r.Client != GarbageCollectorClient || r.Process != "" || !r.Write() || r.Subresource != "" || r.Code == 0 {
		return
	}
	k := streakKey{r.Group, r.Resource, r.Namespace, r.Name}
	if r.Code >= 200 && r.Code < 300 {
		delete(f, k)
		return
	}
	f[k]++
}

// longest is the longest run among the objects inScope takes.
func (f failStreaks) longest(inScope func(namespace, name string) bool) int {
	n := 0
	for k, c := range f {
		if c > n && inScope(k.namespace, k.name) {
			n = c
		}
	}
	return n
}

// GCFailStreak is the longest run of failed garbage-collector writes in
// a row to one object inScope takes, over the requests recorded since
// the last Take: the number of failed passes in a row whose back-off the
// real GC may be waiting out for that object. A pass can also fail
// before its write (a GET's error) or succeed without one (forgetting
// the item), so this is an estimate; when it errs by counting a
// forgotten failure, a settle only waits longer.
func (p *Proxy) GCFailStreak(inScope func(namespace, name string) bool) int {
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	return p.rec.streaks.longest(inScope)
}
