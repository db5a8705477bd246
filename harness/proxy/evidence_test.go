package proxy

import (
	"testing"
	"time"
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
