package proxy

import (
	"slices"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// Summary counts the events handed on and those a fault held, the
// streams a relist ended (not the event it dropped), and the GC's writes
// and those held; other clients' writes and reads are requests only.
func TestEvidenceSummary(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	e := Evidence{
		Requests: []Request{
			{Client: GarbageCollectorClient, Call: Call{Verb: VerbDelete}, Received: t0, Sent: t0.Add(150 * ms)},
			{Client: GarbageCollectorClient, Call: Call{Verb: VerbPatch}, Received: t0, Sent: t0.Add(5 * ms)},
			{Client: GarbageCollectorClient, Call: Call{Verb: VerbGet}, Received: t0, Sent: t0.Add(300 * ms)},
			{Client: "replicaset-controller", Call: Call{Verb: VerbCreate}, Received: t0, Sent: t0.Add(300 * ms)},
		},
		Deliveries: []Delivery{
			{Type: "ADDED", Received: t0, Delivered: t0.Add(120 * ms)},
			{Type: "MODIFIED", Received: t0, Delivered: t0.Add(10 * ms)},
			{Type: "MODIFIED", Received: t0, Fault: "relist"},
			{Type: "ERROR", Received: t0, Delivered: t0, Fault: "relist"},
		},
	}
	want := "4 requests, 2 watch events handed on (1 held over 20ms, longest 120ms), 1 watches ended for a relist, 2 GC writes (1 held over 20ms, longest 150ms)"
	if got := e.Summary(); got != want {
		t.Errorf("Summary() = %q\nwant        %q", got, want)
	}
}

// GCDeliveries keeps the object events handed to an informer the GC's
// monitors read (the shared typed and the metadata informers), with
// their version and moment, in the order handed on; it leaves out other
// clients' streams, bookmarks, events never handed on (a relist fault
// ended the stream first) and events without a numeric version.
func TestGCDeliveries(t *testing.T) {
	t0 := time.Unix(100, 0)
	ev := Evidence{Deliveries: []Delivery{
		{Client: MetadataInformersClient, Type: "MODIFIED", UID: "u2", ResourceVersion: "12", Delivered: t0.Add(2 * time.Millisecond)},
		{Client: SharedInformersClient, Type: "ADDED", UID: "u1", ResourceVersion: "11", Delivered: t0.Add(time.Millisecond)},
		{Client: SharedInformersClient, Type: "DELETED", UID: "u1", ResourceVersion: "13", Delivered: t0.Add(3 * time.Millisecond)},
		{Client: "replicaset-controller", Type: "ADDED", UID: "u3", ResourceVersion: "14", Delivered: t0},
		{Client: SharedInformersClient, Type: "BOOKMARK", ResourceVersion: "15", Delivered: t0},
		{Client: SharedInformersClient, Type: "MODIFIED", UID: "u1", ResourceVersion: "16", Fault: "relist"},
		{Client: SharedInformersClient, Type: "MODIFIED", UID: "u1", ResourceVersion: "x", Delivered: t0},
	}}
	got := ev.GCDeliveries()
	want := []history.Delivery{
		{UID: "u1", RV: 11, At: t0.Add(time.Millisecond).UnixNano()},
		{UID: "u2", RV: 12, At: t0.Add(2 * time.Millisecond).UnixNano()},
		{UID: "u1", RV: 13, Deleted: true, At: t0.Add(3 * time.Millisecond).UnixNano()},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("GCDeliveries:\n got %+v\nwant %+v", got, want)
	}
}

// TestGCRequests: the GC's GETs and writes of named objects of the
// model's kinds, on the proxy's clock and in the order it got them;
// other clients, lists, subresources, unknown resources and requests
// never answered are left out.
func TestGCRequests(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	gc := GarbageCollectorClient
	ev := Evidence{Requests: []Request{
		{Client: gc, Call: Call{Verb: VerbPatch, Group: "apps", Resource: "replicasets", Namespace: "ns", Name: "c"}, Received: at(5), Answered: at(9), Code: 200, UID: "u1"},
		{Client: gc, Call: Call{Verb: VerbGet, Group: "apps", Resource: "replicasets", Namespace: "ns", Name: "c", Metadata: true}, Received: at(1), Answered: at(3), Code: 200, UID: "u1"},
		{Client: gc, Call: Call{Verb: VerbGet, Resource: "persistentvolumes", Namespace: "", Name: "a"}, Received: at(2), Answered: at(4), Code: 404},
		{Client: "replicaset-controller", Call: Call{Verb: VerbGet, Group: "apps", Resource: "replicasets", Namespace: "ns", Name: "c"}, Received: at(1), Answered: at(2), Code: 200},
		{Client: gc, Call: Call{Verb: VerbList, Resource: "pods", Namespace: "ns"}, Received: at(1), Answered: at(2), Code: 200},
		{Client: gc, Call: Call{Verb: VerbPatch, Resource: "pods", Subresource: "status", Namespace: "ns", Name: "p"}, Received: at(1), Answered: at(2), Code: 200},
		{Client: gc, Call: Call{Verb: VerbGet, Group: "example.com", Resource: "things", Namespace: "ns", Name: "t"}, Received: at(1), Answered: at(2), Code: 200},
		{Client: gc, Call: Call{Verb: VerbDelete, Resource: "pods", Namespace: "ns", Name: "p"}, Received: at(6), Err: "kube-controller-manager went away"},
	}}
	rs, pv := kindOf(t, "apps", "replicasets"), kindOf(t, "", "persistentvolumes")
	want := []history.GCRequest{
		{Verb: VerbGet, Kind: rs, Namespace: "ns", Name: "c", Code: 200, UID: "u1", Received: at(1).UnixNano(), Answered: at(3).UnixNano()},
		{Verb: VerbGet, Kind: pv, Name: "a", Code: 404, Received: at(2).UnixNano(), Answered: at(4).UnixNano()},
		{Verb: VerbPatch, Kind: rs, Namespace: "ns", Name: "c", Code: 200, UID: "u1", Received: at(5).UnixNano(), Answered: at(9).UnixNano()},
	}
	if got := ev.GCRequests(); !slices.Equal(got, want) {
		t.Fatalf("GCRequests:\n got %+v\nwant %+v", got, want)
	}
}

func kindOf(t *testing.T, group, resource string) model.KindID {
	t.Helper()
	k, ok := history.KindOf(group, resource)
	if !ok {
		t.Fatalf("no kind %s.%s", resource, group)
	}
	return k
}
