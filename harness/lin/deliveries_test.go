package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"

	"github.com/cascade-k8s/cascade/model"
)

// The proxy's delivery record decides the excuses that say the GC had
// not seen a write yet (Options.Deliveries): each history below passes
// on the race window alone without it; with it, it passes only when the
// record shows the event carrying the write reached the GC's informers
// after the GC decided, and fails when it shows the event had reached
// them before. The window is not consulted: a write older than it is
// excused when the record shows the GC could not have seen it.

// expectBasis checks that r's one Known finding rests on basis.
func expectBasis(t *testing.T, r Result, basis string) {
	t.Helper()
	if len(r.Known) != 1 || r.Known[0].Basis != basis {
		t.Fatalf("want one known race resting on %s, got %+v", basis, r.Known)
	}
}

// TestUnobservedDependentOnDeliveries: kubernetes#26120 (lin gcPatch).
// A pod referencing the owner is created while the owner is deleted
// with Orphan; the GC removes the orphan finalizer at 40 ms, its GET of
// the owner (removeFinalizer's) at 38 ms.
func TestUnobservedDependentOnDeliveries(t *testing.T) {
	o, p := key("cm", "owner"), key("pod", "p")
	cases := []struct {
		name     string
		ownerDel int64 // the client's DELETE with Orphan, ms
		podAt    int64 // the pod's event handed to the GC's informers, ms
		get      bool  // the GC GETs the owner at [36, 37] ms
		known    bool
	}{
		{"pod handed on after the GC's patch", 20, 50, false, true},
		{"pod handed on before the GC's patch", 20, 37, false, false},
		{"pod handed on after the GC's GET, before its patch", 20, 38, true, true},
		{"pod handed on before the GC's GET", 20, 35, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			b.create("client-0", o, 0, 10*ms, nil)
			b.delivered(o, 12*ms)
			b.del("client-0", o, tc.ownerDel*ms, (tc.ownerDel+10)*ms, "Orphan")
			b.create("client-1", p, 25*ms, 35*ms, nil, b.ref(o, false, false))
			b.delivered(p, tc.podAt*ms)
			if tc.get {
				b.get("gc", o, 36*ms, 37*ms)
			}
			gc := b.write("gc", o, 40*ms, 45*ms, withoutFinalizer(model.FinalizerOrphan))
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownUnobservedDependent)
				expectBasis(t, r, basisDeliveries)
				return
			}
			expectIllegal(t, r, gc, model.PropOrphanRespected, "handed to the GC's informers before it decided")
		})
	}
	t.Run("without the record the window admits it", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-1", p, 11*ms, 15*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 20*ms, 30*ms, "Orphan")
		gc := b.write("gc", o, 40*ms, 45*ms, withoutFinalizer(model.FinalizerOrphan))
		r := b.check()
		expectKnown(t, r, gc, model.KnownUnobservedDependent)
		expectBasis(t, r, basisWindow)
		// and the record refutes it: the pod was handed on at 16 ms
		b.delivered(p, 16*ms)
		expectIllegal(t, b.check(), gc, model.PropOrphanRespected, "handed to the GC's informers before it decided")
	})
	t.Run("a reference older than the window, handed on late", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.delivered(o, 12*ms)
		b.create("client-1", p, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 3000*ms, 3010*ms, "Orphan")
		b.delivered(p, 3050*ms)
		gc := b.write("gc", o, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerOrphan))
		r := b.check()
		expectKnown(t, r, gc, model.KnownUnobservedDependent)
		expectBasis(t, r, basisDeliveries)
	})
}

// TestVirtualNamespaceOnDeliveries: kubernetes#124378 (lin
// borrowedNamespace), TestVirtualNamespace's race: the GC deletes pv a
// at 60 ms, its GET of a at [55, 56] ms. It held a as a virtual node
// only if a's event had not reached its informers when it decided.
func TestVirtualNamespaceOnDeliveries(t *testing.T) { virtualNamespaceOn(t, onDeliveries) }

// virtualNamespaceOn runs TestVirtualNamespaceOnDeliveries' timeline with
// ev as the record of when the GC could have had pv a.
func virtualNamespaceOn(t *testing.T, ev evidence) {
	cases := []struct {
		name  string
		at    int64 // the GC's DELETE, ms
		pvAt  int64 // pv a's ADDED in the record, ms
		known bool
	}{
		{"pv recorded after the GC's GET", 60, 58, true},
		{"pv recorded before the GC's GET", 60, 40, false},
		{"long after its creation, still not recorded", 5000, 5010, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			c, a := key("secret", "c"), key("pv", "a")
			b.create("client-0", c, 0, 10*ms, []string{"cascade.dev/hold"})
			ev.record(b, c, 11*ms)
			b.create("client-1", a, 11*ms, 20*ms, nil, b.ref(c, true, true))
			ev.record(b, a, tc.pvAt*ms)
			b.write("client-0", c, 21*ms, 25*ms, withRefs(b.ref(a, true, true)))
			b.del("client-2", c, 26*ms, 30*ms, "Foreground")
			b.get("gc", a, (tc.at-5)*ms, (tc.at-4)*ms)
			del := b.del("gc", a, tc.at*ms, (tc.at+5)*ms, "Foreground")
			r := b.check()
			if tc.known {
				expectKnown(t, r, del, model.KnownVirtualNamespace)
				expectBasis(t, r, ev.basis)
				return
			}
			expectIllegal(t, r, del, "through its reference to v1/Secret c", "held no virtual node")
		})
	}
}

// TestCycleUnblockedOnDeliveries: model.KnownStaleGraph (lin
// cycleUnblocked), TestCycleUnblocked's race: a's foreground deletion
// at 30 ms, the GC's DELETE of b at 40 ms with b's reference to a still
// blocking. The graph can have been stale only if an event carrying one
// of the three writes had not reached the GC's informers by then.
func TestCycleUnblockedOnDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		aAt   int64 // a's deletion handed on, ms
		known bool
	}{
		{"a's deletion handed on after the DELETE", 42, true},
		{"a's deletion handed on before the DELETE", 35, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			a, bk := key("cm", "a"), key("cm", "b")
			b.create("client-0", a, 0, 10*ms, nil)
			b.create("client-0", bk, 11*ms, 20*ms, nil, b.ref(a, true, false))
			b.delivered(bk, 21*ms)
			b.write("client-0", a, 21*ms, 25*ms, withRefs(b.ref(bk, true, false)))
			b.del("client-1", a, 26*ms, 30*ms, "Foreground")
			b.delivered(a, tc.aAt*ms)
			del := b.del("gc", bk, 40*ms, 45*ms, "Foreground")
			r := b.check()
			if tc.known {
				expectKnown(t, r, del, model.KnownStaleGraph)
				expectBasis(t, r, basisDeliveries)
				return
			}
			expectIllegal(t, r, del, "still blocking, while its dependent", "handed all three before the DELETE")
		})
	}
}

// TestUnblockPutsBackReferenceOnDeliveries: model.KnownStaleGraph (lin
// unblockedFromGraph), TestUnblockPutsBackReference's race: a client
// removes b's reference at 25 ms and the GC's unblock patch at 30 ms
// puts it back. The graph listed it only if b's version without it had
// not reached the GC's informers before the patch.
func TestUnblockPutsBackReferenceOnDeliveries(t *testing.T) {
	unblockPutsBackReferenceOn(t, onDeliveries, "version without it had been handed")
}

// unblockPutsBackReferenceOn runs TestUnblockPutsBackReferenceOnDeliveries'
// timeline with ev as the record of when the GC could have had b's
// versions; seen is what an illegal verdict says the record showed.
func unblockPutsBackReferenceOn(t *testing.T, ev evidence, seen string) {
	for _, tc := range []struct {
		name  string
		bAt   int64 // b's version without the reference in the record, ms
		known bool
	}{
		{"removal recorded after the patch", 32, true},
		{"removal recorded before the patch", 27, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			a, bk := key("pv", "a"), key("pv", "b")
			b.create("client-0", a, 0, 10*ms, nil)
			b.create("client-0", bk, 11*ms, 20*ms, nil, b.ref(a, true, false))
			ref := b.ref(a, false, false)
			ev.record(b, bk, 21*ms)
			b.write("client-1", bk, 21*ms, 25*ms, withRefs())
			ev.record(b, bk, tc.bAt*ms)
			gc := b.write("gc", bk, 30*ms, 35*ms, withRefs(ref))
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownStaleGraph)
				expectBasis(t, r, ev.basis)
				return
			}
			expectIllegal(t, r, gc, "gc added an ownerReference", seen)
		})
	}
}

// TestOrphanTakesDependentsOnOwnersEvent: kubernetes#26120 (lin gcPatch,
// orphan), the timeline of a fuzz failure on v1.37.2 (seed 5, run 37):
// the GC's informer of a just-created CRD's resource lists it, owner
// first (the list is in name order), already deleted with Orphan, then
// its dependent. The graph builder queues the owner for attemptToOrphan
// as it processes the owner's event, and attemptToOrphanWorker takes
// the owner's dependents from the graph at once, before the graph builder
// has processed the dependent's event handed on just after; then
// removeFinalizer GETs the owner and patches. So a reference handed on
// after the owner's orphan deletion was handed on may be missed even
// when it came before removeFinalizer's GET; one handed on before the
// owner's event is in the graph when the owner is queued. Times are µs
// on the proxy's clock.
func TestOrphanTakesDependentsOnOwnersEvent(t *testing.T) {
	us := ms / 1000
	for _, tc := range []struct {
		name  string
		depAt int64 // the dependent's ADDED handed to the GC's informers, µs
		known bool
	}{
		{"dependent handed on just after the owner's orphan deletion", 1020, true},
		{"dependent handed on before the owner's orphan deletion", 980, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			o, d := key("cm", "a"), key("cm", "d")
			b.create("client-0", o, -9000*us, -8000*us, nil)
			b.create("client-0", d, -7000*us, -6000*us, nil, b.ref(o, false, true))
			b.del("client-0", o, -5000*us, -4000*us, "Orphan")
			b.delivered(o, 1000*us)
			b.delivered(d, tc.depAt*us)
			gc, r := orphanRemoved(b, o)
			expectOrphanVerdict(t, r, gc, tc.known, basisDeliveries, "cm/ns/d's reference had been handed to the GC's informers before it decided")
		})
	}
}

// orphanRemoved records removeFinalizer's GET of o, sent at 2 ms and
// answered at 4 ms, and its patch, sent at 5 ms and answered at 10 ms,
// on the proxy's clock, and the GC's write removing o's orphan
// finalizer in the audit log at [6, 9] ms; it checks the history.
func orphanRemoved(b *builder, o history.Key) (gc int, r Result) {
	b.requested("gc", "get", o, 2*ms, 4*ms)
	b.requested("gc", "patch", o, 5*ms, 10*ms)
	gc = b.write("gc", o, 6*ms, 9*ms, withoutFinalizer(model.FinalizerOrphan))
	return gc, b.check()
}

// expectOrphanVerdict checks that the write gc is kubernetes#26120 on
// basis when known, else illegal as "orphan respected" for why.
func expectOrphanVerdict(t *testing.T, r Result, gc int, known bool, basis, why string) {
	t.Helper()
	if known {
		expectKnown(t, r, gc, model.KnownUnobservedDependent)
		expectBasis(t, r, basis)
		return
	}
	expectIllegal(t, r, gc, model.PropOrphanRespected, why)
}
