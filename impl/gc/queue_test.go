package gc

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// An item waiting out a back-off gets a new wait number every time it is
// requeued, so that a settle can tell "retried since I looked" from
// "still waiting"; taking it ends the wait.
func TestAutoQueueBackoffWaits(t *testing.T) {
	q := newAutoQueue("garbage_collector_attempt_to_delete")
	defer q.q.ShutDown()
	a, b := Identity{UID: types.UID("a")}, Identity{UID: types.UID("b")}
	waits := func() map[Backoff]uint64 {
		out := map[Backoff]uint64{}
		q.backingOff(out)
		return out
	}
	key := func(id Identity) Backoff { return Backoff{Queue: "garbage_collector_attempt_to_delete", UID: id.UID} }

	q.AddRateLimited(a)
	q.AddRateLimited(b)
	first := waits()
	if len(first) != 2 || first[key(a)] == first[key(b)] {
		t.Fatalf("two items waiting should have two distinct wait numbers, got %v", first)
	}
	got, _ := q.get() // the first back-off (5 ms) to end
	x, y := a, b
	if got.UID == b.UID {
		x, y = b, a
	}
	if _, waiting := waits()[key(x)]; waiting {
		t.Fatalf("%s was taken but still counts as waiting: %v", x.UID, waits())
	}
	q.q.Done(x.UID)
	q.AddRateLimited(x) // failed again
	if n := waits()[key(x)]; n == first[key(x)] || n == 0 {
		t.Fatalf("%s requeued kept its old wait number %d", x.UID, n)
	}
	if n := waits()[key(y)]; n != first[key(y)] {
		t.Fatalf("%s was not retried but its wait number changed from %d to %d", y.UID, first[key(y)], n)
	}
	if q.retrying() != 2 {
		t.Fatalf("retrying() = %d, want 2", q.retrying())
	}
}

// An item keeps the identity it was last queued with: a worker that takes
// it gets that identity, not the UID alone, so that a virtual node the
// graph replaced meanwhile stays recognisable as stale.
func TestAutoQueueKeepsQueuedIdentity(t *testing.T) {
	q := newAutoQueue("garbage_collector_attempt_to_delete")
	defer q.q.ShutDown()
	virtual := Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns2", Name: "a", UID: "a"}
	q.Add(virtual)
	got, _ := q.get()
	if got != virtual {
		t.Fatalf("got %v, want the identity it was queued with, %v", got, virtual)
	}
	q.q.Done(got.UID)
	renamed := virtual
	renamed.Namespace = "default"
	q.Add(virtual)
	q.Add(renamed) // queued again under its new identity: renamed
	if got, _ := q.get(); got != renamed {
		t.Fatalf("got %v, want the identity it was last queued with, %v", got, renamed)
	}
}
