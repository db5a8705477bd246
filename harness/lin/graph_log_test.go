package lin

import "testing"

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
// its deliveries only one to one, in order, deletes with deletes;
// virtual lines pair with nothing.
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
	if _, ok := appliedByUID(b.logLines, c.delivered)[uid]; ok {
		t.Fatal("two lines for one delivery paired")
	}
	b.logLines = b.logLines[:1]
	b.logLines[0].Deleted = true
	if _, ok := appliedByUID(b.logLines, c.delivered)[uid]; ok {
		t.Fatal("a delete line paired with an update's delivery")
	}
}
