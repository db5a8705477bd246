package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// TestForegroundDecidedBeforeDependentsOnDeliveries: kubernetes#26120
// (lin gcPatch, foreground), the timeline of the fuzz failure on v1.34.4
// (`cascade fuzz --target upstream --checks 10 --steps 20 --clients 4
// --seed 1`). A client deletes rs c with Foreground while its controller
// creates pods a and b; the GC processes c with neither in its graph,
// GETs c (removeFinalizer's GET, after it decided) and removes
// foregroundDeletion. Times are µs; the ops' and the reads' are the
// audit log's, which kube-apiserver stamps after the proxy passed the
// request on, so a GET the proxy got at 12533 is stamped 14000 there.
// The GC decided before it sent that GET: before the proxy got it, on
// the proxy's clock, the clock of its delivery record.
func TestForegroundDecidedBeforeDependentsOnDeliveries(t *testing.T) {
	us := ms / 1000
	for _, tc := range []struct {
		name  string
		aAt   int64 // pod a's ADDED handed to the GC's informers, µs
		known bool
	}{
		// a handed on after the proxy got the GC's GET of c, before the
		// apiserver stamped it: the GC had decided without a
		{"pod handed on between the proxy's and the audit's GET", 13644, true},
		// a handed on after the GC's first GET of c (attemptToDeleteItem's)
		// was answered and before its second (removeFinalizer's): the
		// worker read the blocking dependents in between, and may have
		// read them before a reached the graph (this case was pinned as
		// illegal until the bound was the second GET; the relist fuzz
		// failure of seed 33, run 63, is this timeline)
		{"pod handed on between the GC's two GETs", 12000, true},
		// a handed on before the first GET was answered: in the graph
		// before the worker could read it
		{"pod handed on before the GC's first GET was answered", 11000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			c, a, p := key("rs", "c"), key("pod", "a"), key("pod", "b")
			b.create("client-1", c, -30000*us, -20000*us, nil)
			b.delivered(c, -19000*us)
			b.del("client-1", c, 3068*us, 6424*us, "Foreground")
			b.delivered(c, 6900*us)
			b.create("controller/replicaset-controller", a, 5914*us, 12307*us, nil, b.ref(c, true, true))
			b.delivered(a, tc.aAt*us)
			b.get("gc", c, 9300*us, 11500*us)
			b.requested("gc", "get", c, 7846*us, 11664*us)
			b.get("gc", c, 14000*us, 20900*us)
			b.requested("gc", "get", c, 12533*us, 21089*us)
			b.create("controller/replicaset-controller", p, 16066*us, 20171*us, nil, b.ref(c, true, true))
			b.delivered(p, 19127*us)
			b.requested("gc", "patch", c, 23517*us, 32695*us)
			gc := b.write("gc", c, 25975*us, 31878*us, withoutFinalizer(model.FinalizerForeground))
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownUnobservedDependent)
				expectBasis(t, r, basisDeliveries)
				return
			}
			expectIllegal(t, r, gc, model.PropForegroundWaits, "pod/ns/a's reference had been handed to the GC's informers before it decided")
		})
	}
}

// TestOrphanDecidedBeforeRetriesOnDeliveries: kubernetes#26120 (lin
// gcPatch, orphan), the timeline of a fuzz failure on v1.34.4 (seed 1,
// run 9): attemptToOrphan took rs d's dependents from its graph, then
// removeFinalizer GETs d at 3130 µs and patches; kube-apiserver refuses
// the patch with a Conflict and retry.RetryOnConflict GETs and patches
// again, on the same decision. Pod p's ADDED is handed on between the
// two tries: the GC decided without it. Times are µs; the requests' the
// proxy's, the ops' the audit log's.
func TestOrphanDecidedBeforeRetriesOnDeliveries(t *testing.T) {
	us := ms / 1000
	for _, tc := range []struct {
		name      string
		pAt       int64 // pod p's ADDED handed to the GC's informers, µs
		conflicts int   // patches refused with a Conflict before the one that lands
		known     bool
		// foreign: another worker's GET of d between each Conflict and
		// the next try (seed 7741, run 120)
		foreign bool
	}{
		{"pod handed on between two tries of one decision", 20465, 1, true, false},
		{"another worker's GET between the tries", 20465, 1, true, true},
		// attemptToOrphanWorker takes the dependents as soon as the
		// owner's orphan deletion (handed on at 1000 µs) is in the
		// graph, so only a pod handed on before that is surely seen
		// (TestOrphanTakesDependentsOnOwnersEvent)
		{"pod handed on before the owner's orphan deletion", 800, 1, false, false},
		// five tries are more than one RetryOnConflict makes: the last
		// GET may begin a new decision, made with p
		{"pod handed on before the last of five tries", 20465, 4, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			d, p := key("rs", "d"), key("pod", "p")
			b.create("client-0", d, -30000*us, -20000*us, nil)
			b.delivered(d, -19000*us)
			b.del("client-1", d, -2000*us, 500*us, "Orphan")
			b.delivered(d, 1000*us)
			at := int64(3130)
			for i := range tc.conflicts {
				b.requested("gc", "get", d, at*us, (at+4000)*us)
				b.requested("gc", "patch", d, (at+5900)*us, (at+17400)*us)
				b.requests[len(b.requests)-1].Code, b.requests[len(b.requests)-1].UID = 409, ""
				stale := b.refused("gc", history.Patch, d, (at+7000)*us, (at+16000)*us, 409, "Conflict")
				b.ops[stale].Sent = &history.Object{Kind: d.Kind, Namespace: d.Namespace, Name: d.Name, RV: 1} // a version gone by then
				if i == 0 {
					b.create("controller/replicaset-controller", p, 10500*us, 20000*us, nil, b.ref(d, true, true))
					b.delivered(p, tc.pAt*us)
				}
				if tc.foreign {
					b.requested("gc", "get", d, (at+25000)*us, (at+26000)*us)
				}
				at += 29100
			}
			b.requested("gc", "get", d, at*us, (at+57000)*us)
			b.requested("gc", "patch", d, (at+59600)*us, (at+88500)*us)
			gc := b.write("gc", d, (at+71200)*us, (at+87300)*us, withoutFinalizer(model.FinalizerOrphan))
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownUnobservedDependent)
				expectBasis(t, r, basisDeliveries)
				return
			}
			expectIllegal(t, r, gc, model.PropOrphanRespected, "pod/ns/p's reference had been handed to the GC's informers before it decided")
		})
	}
}
