package lin

import (
	"github.com/cascade-k8s/cascade/model"

	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
)

// TestKnownAdoptionRace: a controller may adopt only to an owner that is
// not being deleted (PropAdoption). Upstream's controllers recheck the
// owner with a live GET before adopting (RecheckDeletionTimestamp,
// kubernetes#42938); a deletion landing between that GET and the PATCH
// is the residual race, known. When the history records the
// controllers' GETs (the audit log), the recheck must be in it: an
// adoption without one, or despite one showing the deletion, is illegal
// (the adopt-without-recheck bug, kubernetes#42639). When it does not (a
// kubeconfig target), only the timing can tell.
func TestKnownAdoptionRace(t *testing.T) {
	const rsc = "controller/replicaset-controller"
	r, p := key("rs", "r"), key("pod", "p")
	setup := func(b *builder) {
		b.create("client-0", r, 0, 10*ms, []string{"cascade.dev/hold"})
		b.create("client-0", p, 0, 10*ms, nil)
	}
	del := func(b *builder) { b.del("client-1", r, 20*ms, 30*ms, "Background") }
	t.Run("reads not recorded: adoption racing with the deletion is known", func(t *testing.T) {
		b := newBuilder(t)
		setup(b)
		del(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectKnown(t, b.check(), a, model.KnownAdoptionRecheck)
	})
	t.Run("reads not recorded: adoption long after is illegal", func(t *testing.T) {
		b := newBuilder(t)
		setup(b)
		del(b)
		a := b.write(rsc, p, 3000*ms, 3010*ms, withRefs(b.ref(r, true, true)))
		expectIllegal(t, b.check(), a, PropAdoption)
	})
	t.Run("reads recorded: adoption racing with the deletion after a recheck GET is known", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		b.get(rsc, r, 12*ms, 15*ms) // live
		del(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectKnown(t, b.check(), a, model.KnownAdoptionRecheck)
	})
	t.Run("reads recorded: adoption racing with the deletion without a GET is illegal", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		del(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectIllegal(t, b.check(), a, PropAdoption, "without rechecking the owner")
	})
	t.Run("reads recorded: another controller's GET is no recheck", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		b.get("controller/deployment-controller", r, 12*ms, 15*ms)
		del(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectIllegal(t, b.check(), a, PropAdoption, "without rechecking the owner")
	})
	t.Run("reads recorded: a GET returning after the write was sent is no recheck", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		b.get(rsc, r, 12*ms, 36*ms)
		del(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectIllegal(t, b.check(), a, PropAdoption, "without rechecking the owner")
	})
	t.Run("reads recorded: a GET longer than the race window before is no recheck", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		b.get(rsc, r, 12*ms, 15*ms)
		del(b)
		a := b.write(rsc, p, 1500*ms, 1510*ms, withRefs(b.ref(r, true, true)))
		expectIllegal(t, b.check(), a, PropAdoption, "without rechecking the owner")
	})
	t.Run("reads recorded: adoption despite a recheck showing the deletion is illegal", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		del(b)
		b.get(rsc, r, 31*ms, 33*ms) // deleting
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectIllegal(t, b.check(), a, PropAdoption, "despite its recheck showing the deletion")
	})
	t.Run("reads recorded: a GET of another incarnation is no recheck", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		b.get(rsc, r, 12*ms, 15*ms)
		b.reads[0].Got.UID = "other"
		del(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectIllegal(t, b.check(), a, PropAdoption, "finding the owner gone")
	})
	// kubernetes#42639's orphan adoption proper: the owner left storage
	// before the adoption landed. The reference is dangling, which only
	// the reads can tell from a race.
	gone := func(b *builder) history.Ref {
		ref := b.ref(r, true, true)
		b.del("client-1", r, 20*ms, 30*ms, "Background")
		b.write("client-1", r, 31*ms, 33*ms, withoutFinalizer("cascade.dev/hold"))
		return ref
	}
	t.Run("reads recorded: adoption to a gone owner without a GET is illegal", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		ref := gone(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(ref))
		expectIllegal(t, b.check(), a, PropAdoption, "which was gone", "without rechecking the owner")
	})
	t.Run("reads recorded: adoption to a gone owner after a recheck GET is known", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		b.get(rsc, r, 12*ms, 15*ms)
		ref := gone(b)
		a := b.write(rsc, p, 35*ms, 40*ms, withRefs(ref))
		expectKnown(t, b.check(), a, model.KnownAdoptionRecheck)
	})
	t.Run("reads not recorded: adoption to a gone owner is not judged", func(t *testing.T) {
		b := newBuilder(t)
		setup(b)
		ref := gone(b)
		b.write(rsc, p, 35*ms, 40*ms, withRefs(ref))
		expectOk(t, b.check())
	})
	t.Run("reads recorded: a write keeping a controller reference among several to one UID adopts nothing", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		o := key("cm", "o")
		b.create("client-0", o, 0, 10*ms, nil)
		plain, ctl := b.ref(o, false, false), b.ref(o, true, true)
		b.create("client-0", r, 11*ms, 15*ms, nil, plain, ctl)
		b.del("client-1", o, 20*ms, 30*ms, "Background")
		b.write(rsc, r, 35*ms, 40*ms, withRefs(plain, ctl)) // a status update echoing them
		expectOk(t, b.check())
	})
	t.Run("a client may add the reference", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		del(b)
		b.write("client-0", p, 3000*ms, 3010*ms, withRefs(b.ref(r, true, true)))
		expectOk(t, b.check())
	})
	t.Run("reads recorded: adoption by a live owner needs no recheck in the history", func(t *testing.T) {
		b := newBuilder(t)
		b.readsRecorded = true
		setup(b)
		b.write(rsc, p, 35*ms, 40*ms, withRefs(b.ref(r, true, true)))
		expectOk(t, b.check())
	})
}

// TestWriteBetweenPodDeleteAndRemoval: a Pod's DELETE writes
// deletionTimestamp (grace 0) and then removes the Pod in a second
// transaction, answering the Pod as it first read it. A controller's
// patch landing between the two reads the version with
// deletionTimestamp, which no op of the history answers, finds the Pod
// without finalizers and removes it (Store.deleteWithoutFinalizers); the
// DELETE's removal then finds it gone and succeeds all the same. Both
// answers are the API server's (found by fuzzing, once the family action
// made adoptions common); a patch answering a version the Pod never
// reached before any DELETE is not.
func TestWriteBetweenPodDeleteAndRemoval(t *testing.T) {
	p := key("pod", "p")
	build := func(deleting bool) *builder {
		b := newBuilder(t)
		b.readsRecorded = true
		b.create("client-0", p, 0, 10*ms, nil)
		live := *b.live[p]
		b.del("client-1", p, 20*ms, 60*ms, "")
		b.ops[len(b.ops)-1].Got = &live // the Pod as the DELETE first read it
		got := live
		got.RV, got.Deleting = live.RV+1, deleting
		got.Owners = []history.Ref{{APIVersion: "v1", Kind: "ReplicationController", Name: "rc", UID: "u9", Controller: true, Block: true}}
		b.add(history.Op{Actor: "controller/replication-controller", Verb: history.Patch, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name,
			Code: 200, Got: &got, Removed: deleting, Call: 30 * ms, Return: 50 * ms})
		return b
	}
	expectOk(t, build(true).check())
	b := build(false)
	b.ops[len(b.ops)-1].Call, b.ops[len(b.ops)-1].Return = 70*ms, 80*ms
	expectIllegal(t, b.check(), -1, "no pod/ns/p was live")
}

// TestConflictBetweenPodDeleteAndRemoval: a write whose resourceVersion
// precondition names the version of a Pod not being deleted, landing
// between the two writes of the Pod's DELETE, meets the version with
// deletionTimestamp and answers 409 Conflict (Store.Update's
// OptimisticLockErrorMsg), although no op of the history shows that
// version: when a controller's patch removes the Pod in between, the
// DELETE finds it gone and answers the Pod as it first read it
// (updateForGracefulDeletionAndFinalizers' lastExisting). Found by
// fuzzing upstream v1.37.2 (seed 777001, run 174): a client's
// remove-finalizer patch carrying the version its GET had read. A kind
// without graceful deletion is removed in one write, and a Conflict on
// its removed version is not the API server's; nor is one sent after
// the removal returned.
func TestConflictBetweenPodDeleteAndRemoval(t *testing.T) {
	build := func(k history.Key, call, ret int64) *builder {
		b := newBuilder(t)
		b.readsRecorded = true
		b.create("client-0", k, 0, 10*ms, nil)
		live := *b.live[k]
		b.del("client-0", k, 20*ms, 60*ms, "")
		read := live
		read.Deleting = true
		b.ops[len(b.ops)-1].Got = &read // the object as the DELETE first read it
		if model.GracefulDelete(k.Kind) {
			got := live
			got.RV, got.Deleting = live.RV+1, true
			got.Owners = []history.Ref{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u9", Controller: true, Block: true}}
			b.add(history.Op{Actor: "controller/replicaset-controller", Verb: history.Patch, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
				Code: 200, Got: &got, Removed: true, Call: 30 * ms, Return: 50 * ms})
		}
		sent := history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, RV: live.RV, Replicas: -1}
		b.add(history.Op{Actor: "client-3", Verb: history.Patch, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
			Sent: &sent, Code: 409, Call: call, Return: ret})
		return b
	}
	t.Run("a Pod's DELETE: Conflict on the version before deletionTimestamp", func(t *testing.T) {
		expectOk(t, build(key("pod", "p"), 25*ms, 55*ms).check())
	})
	t.Run("a Pod's DELETE: Conflict sent after the removal returned", func(t *testing.T) {
		expectIllegal(t, build(key("pod", "p"), 70*ms, 80*ms).check(), -1, "no pod/ns/p was live")
	})
	t.Run("a ReplicaSet's DELETE is one write", func(t *testing.T) {
		expectIllegal(t, build(key("rs", "r"), 25*ms, 55*ms).check(), -1, "Conflict")
	})
}
