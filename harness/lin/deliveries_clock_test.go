package lin

import (
	"testing"

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
		// a handed on before the proxy got the GET: the GC may have had it
		{"pod handed on before the proxy got the GET", 12000, false},
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
