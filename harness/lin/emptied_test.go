package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// TestUpdateRemovalAfterFinalizerAdded: an update that empties the
// finalizers of the version its resourceVersion precondition names
// removes the object in a second storage transaction, without a
// precondition (Store.Update's deleteWithoutFinalizers), so a GC
// finalizer a DELETE put on in between goes with it, though no write
// removed it. Found by `cascade fuzz --target upstream --write-delay
// 200ms --seed 32` run 37 (harness/fuzz/testdata/open-concurrent,
// write-delay-seed32-run37): the GC's removeFinalizer of pv/a's
// foregroundDeletion, decided on its GET of the Foreground deletion and
// held by the proxy, landed after a client's DELETE with Orphan had
// switched the deletion to orphan, and pv/a went with the orphan
// finalizer while pv/c still referenced it; lin took the removal for
// the GC removing orphan ("orphan respected", the graph builder's log
// showing pv/c's reference taken in first). It is the API server
// removing an object with a finalizer no write removed (the
// emptied-finalizers-removal race); the GC's write is judged on the
// finalizers of the version it checked. A patch whose precondition
// names the version that carried orphan removed orphan itself, and
// stays illegal. Times are µs on the proxy's clock, as in the run.
func TestUpdateRemovalAfterFinalizerAdded(t *testing.T) {
	us := ms / 1000
	a, c := key("pv", "a"), key("pv", "c")
	for _, tc := range []struct {
		name string
		// checkedOrphan: the patch's precondition names the version the
		// Orphan DELETE wrote (the GC decided on the orphan finalizer)
		checkedOrphan bool
	}{
		{"the precondition names the Foreground deletion", false},
		{"the precondition names the orphan deletion", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			b.create("client-3", a, 0, 10*ms, nil)
			b.delivered(a, 11*ms)
			b.processed(a, 11*ms+100*us)
			b.create("client-0", c, 12*ms, 20*ms, nil)
			b.delivered(c, 21*ms)
			b.processed(c, 21*ms+100*us)
			b.write("client-1", c, 30*ms, 40*ms, withRefs(b.ref(a, false, true)))
			b.delivered(c, 41*ms)
			b.processed(c, 41*ms+100*us)
			b.del("client-3", a, 50*ms, 60*ms, "Foreground")
			b.delivered(a, 61*ms)
			b.processed(a, 61*ms+100*us)
			fg := *b.live[a]
			// removeFinalizer: GET, then the patch the proxy held 150 ms
			b.requested("gc", "get", a, 62*ms, 64*ms)
			b.requested("gc", "patch", a, 65*ms, 260*ms)
			b.del("client-0", a, 180*ms, 210*ms, "Orphan")
			b.delivered(a, 215*ms)
			b.processed(a, 215*ms+100*us)
			checked := fg
			if tc.checkedOrphan {
				checked = *b.live[a]
			}
			gc := b.emptying("gc", a, &checked, 200*ms, 250*ms)
			r := b.check()
			if tc.checkedOrphan {
				expectIllegal(t, r, gc, model.PropOrphanRespected, "gc removed orphan from pv/a while pv/c still references it")
				return
			}
			expectKnown(t, r, gc, model.KnownEmptiedFinalizersRemoval)
			expectBasis(t, r, basisOrder)
			if k := r.Known[0]; k.Property != model.PropNoRemovalWithFinalizers || !contains(k.Message, "[orphan]") {
				t.Errorf("known finding: %+v", k)
			}
		})
	}
}

// TestUpdateRemovalAfterAnotherWrite: a client's update that empties
// the finalizers of the version it checked removes the object where it
// lands; a write in between that put no finalizer on changes nothing
// (no violation, no known race), a DELETE that put orphan on makes the
// removal the known emptied-finalizers-removal, whoever sent the update.
func TestUpdateRemovalAfterAnotherWrite(t *testing.T) {
	const hold = "cascade.dev/hold"
	a := key("pv", "a")
	for _, orphan := range []bool{false, true} {
		b := newBuilder(t)
		b.create("client-0", a, 0, 10*ms, []string{hold})
		b.del("client-0", a, 11*ms, 15*ms, "Background")
		checked := *b.live[a]
		if orphan {
			b.del("client-1", a, 30*ms, 40*ms, "Orphan")
		} else {
			b.write("client-1", a, 30*ms, 40*ms, label("app", "web"))
		}
		p := b.emptying("client-0", a, &checked, 20*ms, 60*ms)
		r := b.check()
		if !orphan {
			expectOk(t, r)
			continue
		}
		expectKnown(t, r, p, model.KnownEmptiedFinalizersRemoval)
		if k := r.Known[0]; k.Property != model.PropNoRemovalWithFinalizers || !contains(k.Message, "finalizers [orphan] remained, which op 2 put on") {
			t.Errorf("known finding: %+v", k)
		}
	}
}

// emptying appends actor's patch of k that empties the finalizers of the
// version checked, its resourceVersion precondition, and removes the
// object where it lands (Store.Update's deleteWithoutFinalizers),
// answering the patched version as kube-apiserver does.
func (b *builder) emptying(actor string, k history.Key, checked *history.Object, call, ret int64) int {
	got := *checked
	got.Finalizers = nil
	delete(b.live, k)
	return b.add(history.Op{Actor: actor, Verb: history.Patch, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
		Sent: &history.Object{RV: checked.RV}, Code: 200, Got: &got, Removed: true, Call: call, Return: ret})
}
