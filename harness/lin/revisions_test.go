package lin

import (
	"strconv"
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// observedRemoval appends the removal of the live object at k as a
// watch showed it (a DELETED event at a revision of its own).
func (b *builder) observedRemoval(k history.Key, call, ret int64) int {
	cur := b.live[k]
	if cur == nil {
		b.t.Fatalf("removal of %s, which is not live", k)
	}
	gone := *cur
	gone.RV = b.nextRV()
	delete(b.live, k)
	return b.add(history.Op{Actor: history.ActorCluster, Verb: history.Observed, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
		Code: 200, Got: &gone, Removed: true, Call: call, Return: ret})
}

// gcDelete appends the GC's DELETE of the pod, checked against the
// resourceVersion it read, which puts deletionTimestamp on it at a new
// revision (the pod holds a finalizer of its own).
func (b *builder) gcDelete(pod history.Key, call, ret int64) int {
	read := b.live[pod].RV
	i := b.del(history.ActorGC, pod, call, ret, "Background")
	b.ops[i].Delete.PreconditionRV = strconv.FormatUint(read, 10)
	return i
}

// TestWritesFollowRevisionOrder: etcd numbers writes in the order it
// applies them, so the writes that certainly made their revisions (a
// write seen by watch, a create, a write checked against a
// resourceVersion and answered at another) linearize in that order, even
// where their intervals let them swap. The GC's DELETE of a Pod made rv
// 103 and the watch saw the Pod's ReplicaSet removed at rv 104: the GC
// deleted the Pod while its owner was still solid, though the intervals
// alone would put the owner's removal first. With the revisions the
// other way round, the DELETE came after the owner was gone.
func TestWritesFollowRevisionOrder(t *testing.T) {
	setup := func() (*builder, history.Key, history.Key) {
		b := newBuilder(t)
		rs, pod := key("rs", "r"), key("pod", "p")
		b.create("client-0", rs, 0, ms, nil)
		b.create("client-0", pod, 2*ms, 3*ms, []string{"cascade.dev/hold"}, b.ref(rs, true, true))
		return b, rs, pod
	}
	b, rs, pod := setup()
	gc := b.gcDelete(pod, 10*ms, 50*ms)
	b.observedRemoval(rs, 10*ms, 50*ms)
	expectIllegal(t, b.check(), gc, model.PropNoSolidOwnerCollected)

	b, rs, pod = setup()
	b.observedRemoval(rs, 10*ms, 50*ms)
	b.gcDelete(pod, 10*ms, 50*ms)
	expectOk(t, b.check())
}
