package target

import (
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
)

// The back-off is client-go's DefaultTypedControllerRateLimiter's per
// item: 5 ms after the first failure, doubling, up to 1000 s.
func TestWorkqueueBackoff(t *testing.T) {
	// 19: 5 ms·2^18 = 1310.72 s, capped
	for n, want := range map[int]time.Duration{0: 0, 1: 5 * time.Millisecond, 2: 10 * time.Millisecond, 10: 2560 * time.Millisecond, 19: 1000 * time.Second, 60: 1000 * time.Second} {
		if got := workqueueBackoff(n); got != want {
			t.Errorf("after %d failures: %s, want %s", n, got, want)
		}
	}
}

// gcBackoff counts, per object of the run, the GC's writes answered with
// an error since its last 2xx write: a 2xx write resets the object's
// count; other clients, subresources, unanswered requests and objects out
// of scope do not count.
func TestGCBackoffCountsFailedWritesInARow(t *testing.T) {
	gc := func(verb, name string, code int) proxy.Request {
		return proxy.Request{Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: verb, Resource: "statefulsets", Namespace: "run-ns", Name: name}, Code: code}
	}
	in := func(ns, _ string) bool { return ns == "run-ns" }
	var ev proxy.Evidence
	for range 4 {
		ev.Requests = append(ev.Requests, gc(proxy.VerbDelete, "a", 403))
	}
	ev.Requests = append(ev.Requests, gc(proxy.VerbPatch, "a", 200))
	for range 3 {
		ev.Requests = append(ev.Requests, gc(proxy.VerbDelete, "a", 403), gc(proxy.VerbGet, "a", 200))
	}
	ev.Requests = append(ev.Requests, gc(proxy.VerbDelete, "b", 409), gc(proxy.VerbDelete, "b", 0))
	other := gc(proxy.VerbDelete, "a", 403)
	other.Client = "replicaset-controller"
	status := gc(proxy.VerbPatch, "a", 500)
	status.Subresource = "status"
	out := gc(proxy.VerbDelete, "c", 403)
	out.Namespace = "elsewhere"
	ev.Requests = append(ev.Requests, other, status, out, out, out, out, out)
	if got, want := gcBackoff(ev, in), workqueueBackoff(3); got != want {
		t.Fatalf("back-off %s, want %s (a's 3 failed DELETEs after its patch)", got, want)
	}
}

// stretch lengthens the quiet window by the back-off, up to
// backoffWaitMax, and the timeout with it; no back-off leaves it.
func TestStretchOutlastsTheBackoff(t *testing.T) {
	q := replay.DefaultQuiet
	if got := stretch(q, 0); got.Window != q.Window || got.Timeout != q.Timeout {
		t.Fatalf("no back-off changed the window: %+v", got)
	}
	got := stretch(q, 2560*time.Millisecond)
	if got.Window != q.Window+2560*time.Millisecond || got.Timeout != q.Timeout+2560*time.Millisecond {
		t.Fatalf("window %s timeout %s", got.Window, got.Timeout)
	}
	if got := stretch(q, time.Hour); got.Window != q.Window+backoffWaitMax {
		t.Fatalf("window %s, want capped at %s", got.Window, q.Window+backoffWaitMax)
	}
}
