package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
)

// TestOrphanMissesAnotherInformersReference: kubernetes#26120 (lin
// gcPatch) across informers, the timeline of a fuzz failure on v1.37.2
// (seed 5, run 60): a dependent's reference reached its informer (Pods)
// 0.18 ms before the owner's orphan deletion reached the owner's
// (ConfigMaps), and the GC removed the orphan finalizer without
// orphaning the dependent. The delivery record cannot tell whether the
// graph took the reference in before the owner's event: the two
// informers hand their events to the graph builder from goroutines of
// their own. The graph builder's log can: it began the events in one
// goroutine, in the order it logs them. So the verdict rests on that
// order when the log pairs both objects' events with their deliveries,
// and on the delivery record (which reports the race) when it does
// not. Times are µs on the proxy's clock.
func TestOrphanMissesAnotherInformersReference(t *testing.T) {
	us := ms / 1000
	o, p := key("cm", "a"), key("pod", "p")
	for _, tc := range []struct {
		name string
		// the graph builder's lines for the pod's reference and the
		// owner's deletion: "" no log; "pod-first", "owner-first"; "unpaired"
		// leaves out the line of the pod's creation
		log   string
		known bool
		basis string
		why   string
	}{
		{"no log: the delivery record reports it", "", false, "", "p's reference had been handed to the GC's informers before it decided"},
		{"the graph builder took the owner's event in first", "owner-first", true, basisGraph, ""},
		{"the graph builder took the reference in first", "pod-first", false, "", "graph builder had taken pod/ns/p's reference in before the GC took the owner's dependents"},
		{"the log does not pair the pod's events", "unpaired", false, "", "p's reference had been handed to the GC's informers before it decided"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			logged := tc.log != ""
			b.create("client-0", o, -9000*us, -8000*us, nil)
			b.delivered(o, -7900*us)
			if logged {
				b.processed(o, -7890*us)
			}
			b.create("client-1", p, -7000*us, -6000*us, nil)
			b.delivered(p, -5900*us)
			if logged && tc.log != "unpaired" {
				b.processed(p, -5890*us)
			}
			b.write("client-1", p, -3000*us, -2000*us, withRefs(b.ref(o, false, false)))
			b.del("client-0", o, -1500*us, -500*us, "Orphan")
			b.delivered(p, 820*us)
			b.delivered(o, 1000*us)
			switch tc.log {
			case "owner-first":
				b.processed(o, 1010*us)
				b.processed(p, 1020*us)
			case "pod-first", "unpaired":
				b.processed(p, 830*us)
				b.processed(o, 1010*us)
			}
			gc, r := orphanRemoved(b, o)
			expectOrphanVerdict(t, r, gc, tc.known, tc.basis, tc.why)
		})
	}
}

// TestGraphLogPairsByObject: appliedByUID pairs an object's lines with
// its deliveries in order, deletes with deletes: one to one, or, when
// each event was logged k times (k handlers), the i-th delivery with the
// bounds lines i and k·i; virtual lines pair with nothing.
func TestGraphLogPairsByObject(t *testing.T) {
	b := newBuilder(t)
	o := key("cm", "a")
	b.create("client-0", o, 0, 10*ms, nil)
	b.delivered(o, 11*ms)
	b.processed(o, 12*ms)
	b.logLines = append(b.logLines, b.logLines[0])
	b.logLines[1].Virtual, b.logLines[1].Seq = true, 2
	c := &checker{delivered: deliveriesByUID(b.deliveries)}
	uid := b.live[o].UID
	if got := appliedByUID(b.logLines, c.delivered)[uid]; len(got) != 1 || got[0].seq != 1 || got[0].rv != b.live[o].RV {
		t.Fatalf("want the one delivery paired with line 1, got %+v", got)
	}
	b.logLines[1].Virtual = false
	if got := appliedByUID(b.logLines, c.delivered)[uid]; len(got) != 1 || got[0].seq != 1 || got[0].seqLate != 1 {
		t.Fatalf("want one delivery logged twice paired with line 1, got %+v", got)
	}
	b.logLines = append(b.logLines, b.logLines[0])
	b.logLines[2].Seq = 3
	if _, ok := appliedByUID(b.logLines, c.delivered)[uid]; !ok {
		t.Fatal("one delivery logged three times left unpaired")
	}
	b.delivered(o, 13*ms) // a second event: three lines for two
	c.delivered = deliveriesByUID(b.deliveries)
	if _, ok := appliedByUID(b.logLines, c.delivered)[uid]; ok {
		t.Fatal("three lines for two deliveries paired")
	}
	b.logLines = append(b.logLines, history.Processed{UID: uid, Seq: 4, At: 14 * ms})
	got := appliedByUID(b.logLines, c.delivered)[uid]
	if len(got) != 2 || got[1].seq != 2 || got[1].seqLate != 3 {
		t.Fatalf("want the second of two deliveries logged twice bounded by lines 2 and 3, got %+v", got)
	}
	b.logLines[3].Deleted = true
	if _, ok := appliedByUID(b.logLines, c.delivered)[uid]; ok {
		t.Fatal("a delete line paired with updates' deliveries logged twice")
	}
	b.logLines = b.logLines[:1]
	b.deliveries = b.deliveries[:1]
	c.delivered = deliveriesByUID(b.deliveries)
	b.logLines[0].Deleted = true
	if _, ok := appliedByUID(b.logLines, c.delivered)[uid]; ok {
		t.Fatal("a delete line paired with an update's delivery")
	}
}

// TestOrphanMissesReferenceLoggedTwice: kube-controller-manager's graph
// builder may log each event of a resource more than once, one line per
// event handler its monitors registered on the shared informer (a
// custom resource whose CRD was deleted and created again: upstream's
// stopped monitor leaves its handler behind), so that an object's lines
// are k times its deliveries. The first copy of its i-th event is then
// among lines i to k·i, and the log still orders two objects' events
// where those bounds do not overlap. Found by `cascade fuzz --target
// upstream --write-delay 200ms --checks 200 --seed 32` run 25: a
// gizmo's watch list handed on dependent a 9 µs before its owner b,
// deleting with Orphan, the informer's replace (a temporary store's
// List, in no set order) gave the graph builder b first, and
// attemptToOrphan took b's dependents without a; each event was logged
// twice, the log was left unpaired, and the delivery record reported
// the GC removing orphan. Times are µs on the proxy's clock.
func TestOrphanMissesReferenceLoggedTwice(t *testing.T) {
	us := ms / 1000
	o, d := key("gizmo", "b"), key("gizmo", "a")
	for _, tc := range []struct {
		name string
		// lines lists whose graph builder lines come in order, "o" the
		// owner's, "d" the dependent's
		lines string
		known bool
		why   string
	}{
		{"the owner's event logged first, twice each", "oodd", true, ""},
		{"the reference logged first, twice each", "ddoo", false, "graph builder had taken gizmo/a's reference in before the GC took the owner's dependents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			b.create("client-0", o, -9000*us, -8000*us, nil)
			b.create("client-0", d, -7000*us, -6000*us, nil, b.ref(o, true, true))
			b.del("client-0", o, -5000*us, -4000*us, "Orphan")
			b.delivered(d, 1000*us)
			b.delivered(o, 1009*us)
			for i, x := range tc.lines {
				k := o
				if x == 'd' {
					k = d
				}
				b.processed(k, 1100*us+int64(i)*us)
			}
			gc, r := orphanRemoved(b, o)
			expectOrphanVerdict(t, r, gc, tc.known, basisGraph, tc.why)
		})
	}
}
