package lin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

const ms = int64(time.Millisecond)

func label(k, v string) func(*history.Object) {
	return func(o *history.Object) { o.Labels = map[string]string{k: v} }
}

func TestLegalConcurrentHistory(t *testing.T) {
	b := newBuilder(t)
	o, d := key("cm", "owner"), key("cm", "dep")
	b.create("client-0", o, 0, 10*ms, nil)
	b.create("client-1", d, 5*ms, 15*ms, nil, b.ref(o, false, false))
	// Called in one order, linearized in the other: both are concurrent.
	b.write("client-1", o, 22*ms, 30*ms, label("a", "1"))
	b.write("client-0", o, 20*ms, 32*ms, label("a", "2"))
	b.del("client-0", o, 40*ms, 50*ms, "Background")
	// The GC's delete overlaps the owner's: it is legal only if it took
	// effect after the owner left.
	b.del("gc", d, 45*ms, 60*ms, "Background")
	b.create("client-1", o, 55*ms, 70*ms, nil)
	b.refused("client-2", history.Create, o, 72*ms, 78*ms, 409, "AlreadyExists")
	b.refused("client-2", history.Delete, d, 75*ms, 80*ms, 404, "NotFound")
	expectOk(t, b.check())
}

func TestGCDeleteWithSolidOwner(t *testing.T) {
	t.Run("owner live", func(t *testing.T) {
		b := newBuilder(t)
		o, d := key("cm", "owner"), key("cm", "dep")
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
		gc := b.del("gc", d, 30*ms, 40*ms, "Background")
		expectIllegal(t, b.check(), gc, "gc deleted cm/ns/dep", "cm/ns/owner", model.PropNoSolidOwnerCollected)
	})
	t.Run("owner deleted concurrently", func(t *testing.T) {
		b := newBuilder(t)
		o, d := key("cm", "owner"), key("cm", "dep")
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-1", o, 25*ms, 35*ms, "Background")
		b.del("gc", d, 30*ms, 40*ms, "Background")
		expectOk(t, b.check())
	})
	t.Run("owner with another uid", func(t *testing.T) {
		b := newBuilder(t)
		o, d := key("cm", "owner"), key("cm", "dep")
		b.create("client-0", o, 0, 10*ms, nil)
		r := b.ref(o, false, false)
		r.UID = "someone-else"
		b.create("client-0", d, 11*ms, 20*ms, nil, r)
		b.del("gc", d, 30*ms, 40*ms, "Background")
		expectOk(t, b.check())
	})
}

func TestResourceVersionBackwards(t *testing.T) {
	b := newBuilder(t)
	o := key("cm", "a")
	b.create("client-0", o, 0, 10*ms, nil)
	w := b.write("client-0", o, 20*ms, 30*ms, label("a", "1"))
	b.ops[w].Got.RV = 50 // the create answered 101
	expectIllegal(t, b.check(), w, "backwards", PropAPISemantics)
}

func TestMaybeAppliedCreate(t *testing.T) {
	maybe := func(b *builder, k history.Key) {
		sent := &history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Replicas: -1}
		b.add(history.Op{Actor: "client-0", Verb: history.Create, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
			Sent: sent, Code: 0, Call: 0, Return: 10 * ms})
	}
	k := key("cm", "a")
	t.Run("applied: a later create finds it", func(t *testing.T) {
		b := newBuilder(t)
		maybe(b, k)
		b.refused("client-1", history.Create, k, 20*ms, 30*ms, 409, "AlreadyExists")
		expectOk(t, b.check())
	})
	t.Run("applied: a later delete removes it", func(t *testing.T) {
		b := newBuilder(t)
		maybe(b, k)
		b.add(history.Op{Actor: "client-1", Verb: history.Delete, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
			Delete: &history.DeleteOptions{}, Code: 200, Removed: true,
			Got:  &history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: "server-chose", Replicas: -1},
			Call: 20 * ms, Return: 30 * ms})
		expectOk(t, b.check())
	})
	t.Run("not applied: a later create succeeds", func(t *testing.T) {
		b := newBuilder(t)
		maybe(b, k)
		b.create("client-1", k, 20*ms, 30*ms, nil)
		expectOk(t, b.check())
	})
	t.Run("both at once is illegal", func(t *testing.T) {
		b := newBuilder(t)
		maybe(b, k)
		b.refused("client-1", history.Create, k, 20*ms, 30*ms, 409, "AlreadyExists")
		c := b.create("client-2", k, 40*ms, 50*ms, nil)
		expectIllegal(t, b.check(), c, "the create succeeded while cm/ns/a")
	})
}

func TestKnownOrphanRace(t *testing.T) {
	o, p := key("cm", "owner"), key("pod", "p")
	t.Run("dependent created during the orphaning", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.del("client-0", o, 20*ms, 30*ms, "Orphan")
		b.create("client-1", p, 25*ms, 35*ms, nil, b.ref(o, false, false))
		gc := b.write("gc", o, 40*ms, 45*ms, withoutFinalizer(model.FinalizerOrphan))
		expectKnown(t, b.check(), gc, model.KnownUnobservedDependent)
	})
	t.Run("dependent long known", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-1", p, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 3000*ms, 3010*ms, "Orphan")
		gc := b.write("gc", o, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerOrphan))
		expectIllegal(t, b.check(), gc, model.PropOrphanRespected, "pod/ns/p")
	})
	t.Run("same resource, written before the orphaning was sent", func(t *testing.T) {
		// One watch delivers both in order: the GC saw the dependent.
		b := newBuilder(t)
		d := key("cm", "dep")
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-1", d, 11*ms, 15*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 20*ms, 30*ms, "Orphan")
		gc := b.write("gc", o, 40*ms, 45*ms, withoutFinalizer(model.FinalizerOrphan))
		expectIllegal(t, b.check(), gc, model.PropOrphanRespected)
	})
	t.Run("orphaned first", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-1", p, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 3000*ms, 3010*ms, "Orphan")
		b.write("gc", p, 3020*ms, 3030*ms, withRefs())
		b.write("gc", o, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerOrphan))
		expectOk(t, b.check())
	})
}

func TestKnownForegroundRace(t *testing.T) {
	o, p := key("cm", "owner"), key("pod", "p")
	t.Run("blocking dependent created during the deletion", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.del("client-0", o, 20*ms, 30*ms, "Foreground")
		b.create("client-1", p, 25*ms, 35*ms, nil, b.ref(o, true, false))
		gc := b.write("gc", o, 40*ms, 45*ms, withoutFinalizer(model.FinalizerForeground))
		expectKnown(t, b.check(), gc, model.KnownUnobservedDependent)
	})
	t.Run("blocking dependent long known", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-1", p, 11*ms, 20*ms, nil, b.ref(o, true, false))
		b.del("client-0", o, 3000*ms, 3010*ms, "Foreground")
		gc := b.write("gc", o, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerForeground))
		expectIllegal(t, b.check(), gc, model.PropForegroundWaits)
	})
	t.Run("non-blocking dependent does not hold it", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-1", p, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 3000*ms, 3010*ms, "Foreground")
		b.write("gc", o, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerForeground))
		expectOk(t, b.check())
	})
	t.Run("blocking dependent in another namespace does not hold it", func(t *testing.T) {
		b := newBuilder(t)
		far := history.Key{Kind: p.Kind, Namespace: "other", Name: p.Name}
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-1", far, 11*ms, 20*ms, nil, b.ref(o, true, false))
		b.del("client-0", o, 3000*ms, 3010*ms, "Foreground")
		b.write("gc", o, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerForeground))
		expectOk(t, b.check())
	})
}

func TestKnownPolicySwitchRace(t *testing.T) {
	o, d := key("cm", "owner"), key("cm", "dep")
	t.Run("foreground switched to orphan", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, true, false))
		b.del("client-0", o, 30*ms, 40*ms, "Foreground")
		b.del("client-1", o, 50*ms, 60*ms, "Orphan")
		gc := b.del("gc", d, 65*ms, 70*ms, "Background")
		expectKnown(t, b.check(), gc, model.KnownPolicySwitch)
	})
	t.Run("orphan from the start", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, true, false))
		b.del("client-1", o, 50*ms, 60*ms, "Orphan")
		gc := b.del("gc", d, 65*ms, 70*ms, "Background")
		expectIllegal(t, b.check(), gc, model.PropNoSolidOwnerCollected)
	})
}

// TestGCWrites covers the rules on GC patches and deletes one by one; each
// case is illegal or Ok as the comment says.
func TestGCWrites(t *testing.T) {
	o, d := key("cm", "owner"), key("cm", "dep")
	cases := []struct {
		name  string
		build func(b *builder) int // returns the op that must be the culprit, -1 if Ok
		words []string
	}{
		{"removing the reference to a solid owner", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
			return b.write("gc", d, 30*ms, 40*ms, withRefs())
		}, []string{PropGCWrites, "solid owner"}},
		{"removing a dangling reference (Ok)", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
			b.del("client-0", o, 21*ms, 25*ms, "Background")
			b.write("gc", d, 30*ms, 40*ms, withRefs())
			return -1
		}, nil},
		{"unblocking without a waiting owner", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, true, false))
			return b.write("gc", d, 30*ms, 40*ms, withRefs(b.ref(o, false, false)))
		}, []string{PropGCWrites, "blockOwnerDeletion=false"}},
		{"unblocking with a waiting owner (Ok)", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, true, false))
			b.del("client-0", o, 21*ms, 25*ms, "Foreground")
			b.write("gc", d, 30*ms, 40*ms, withRefs(b.ref(o, false, false)))
			return -1
		}, nil},
		{"adding a label", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			return b.write("gc", o, 30*ms, 40*ms, label("x", "y"))
		}, []string{PropGCWrites, "labels"}},
		{"removing a user finalizer", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
			b.del("client-0", o, 11*ms, 20*ms, "Background")
			return b.write("gc", o, 30*ms, 40*ms, withoutFinalizer("cascade.dev/hold"))
		}, []string{PropGCWrites, "cascade.dev/hold"}},
		{"removing orphan from an object not being deleted", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, []string{model.FinalizerOrphan})
			return b.write("gc", o, 30*ms, 40*ms, withoutFinalizer(model.FinalizerOrphan))
		}, []string{PropGCWrites, "not being deleted"}},
		{"deleting an object without owners", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			return b.del("gc", o, 30*ms, 40*ms, "Background")
		}, []string{model.PropNoSolidOwnerCollected, "no ownerReferences"}},
		{"deleting a cluster-scoped object through a namespaced owner kind", func(b *builder) int {
			pv := key("pv", "vol")
			b.create("client-0", o, 0, 10*ms, nil)
			r := b.ref(o, false, false)
			b.create("client-0", pv, 11*ms, 20*ms, nil, r)
			b.del("client-0", o, 21*ms, 25*ms, "Background")
			return b.del("gc", pv, 30*ms, 40*ms, "Background")
		}, []string{PropGCResolvable}},
		{"orphaning a cluster-scoped dependent of a namespaced owner (Ok: attemptToOrphanWorker)", func(b *builder) int {
			pv := key("pv", "vol")
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", pv, 11*ms, 20*ms, nil, b.ref(o, false, false))
			b.del("client-0", o, 21*ms, 25*ms, "Orphan")
			b.write("gc", pv, 30*ms, 40*ms, withRefs())
			return -1
		}, nil},
		{"unreferencing a cluster-scoped dependent of a namespaced owner that is not orphaning", func(b *builder) int {
			pv := key("pv", "vol")
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", pv, 11*ms, 20*ms, nil, b.ref(o, false, false))
			return b.write("gc", pv, 30*ms, 40*ms, withRefs())
		}, []string{PropGCResolvable}},
		{"unblocking one of two references to one owner (Ok)", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, true, true), b.ref(o, false, false))
			b.del("client-0", o, 21*ms, 25*ms, "Foreground")
			b.write("gc", d, 30*ms, 40*ms, withRefs(b.ref(o, false, true), b.ref(o, false, false)))
			return -1
		}, nil},
		{"deleting through a kind nobody serves", func(b *builder) int {
			b.create("client-0", d, 0, 10*ms, nil, history.Ref{APIVersion: "example.com/v1", Kind: "Nothing", Name: "x", UID: "u-x"})
			return b.del("gc", d, 30*ms, 40*ms, "Background")
		}, []string{PropGCResolvable, "Nothing"}},
		{"a delete that orphans the dependents of a cascade", func(b *builder) int {
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, []string{"cascade.dev/hold"}, b.ref(o, false, false))
			b.del("client-0", o, 21*ms, 25*ms, "Background")
			return b.del("gc", d, 30*ms, 40*ms, "Orphan")
		}, []string{model.PropNeverSilentlyOrphaned}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			culprit := tc.build(b)
			r := b.check()
			if culprit < 0 {
				expectOk(t, r)
				return
			}
			expectIllegal(t, r, culprit, tc.words...)
		})
	}
}

func TestAPIAnswers(t *testing.T) {
	o := key("cm", "a")
	t.Run("finalizer added while being deleted", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
		b.del("client-0", o, 11*ms, 20*ms, "Background")
		w := b.write("client-0", o, 30*ms, 40*ms, func(x *history.Object) { x.Finalizers = append(x.Finalizers, "cascade.dev/more") })
		expectIllegal(t, b.check(), w, model.PropNoFinalizerAfterDeletion)
	})
	t.Run("delete removed an object with a user finalizer", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
		dl := b.refused("client-0", history.Delete, o, 11*ms, 20*ms, 200, "")
		b.ops[dl].Removed = true
		b.ops[dl].Got = &history.Object{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: b.live[o].UID}
		expectIllegal(t, b.check(), dl, model.PropNoRemovalWithFinalizers)
	})
	t.Run("protection webhook", func(t *testing.T) {
		for _, labelled := range []bool{false, true} {
			b := newBuilder(t)
			b.create("client-0", o, 0, 10*ms, nil)
			if labelled {
				b.write("client-0", o, 11*ms, 12*ms, label(model.ProtectionLabel, model.ProtectAlways))
			}
			dl := b.refused("client-0", history.Delete, o, 20*ms, 30*ms, 403, "Forbidden")
			b.ops[dl].Message = `admission webhook "vdeletion.cascade.dev" denied the request: forbidden by deletion protection`
			if labelled {
				expectOk(t, b.check())
			} else {
				expectIllegal(t, b.check(), dl, model.ProtectionLabel)
			}
		}
	})
	t.Run("a metadata-only answer keeps the replicas", func(t *testing.T) {
		// Both GCs write through a metadata client, whose answers carry no
		// spec; a no-op patch answers the live resourceVersion.
		b := newBuilder(t)
		rs := key("rs", "r")
		b.create("client-0", rs, 0, 10*ms, nil)
		b.ops[0].Got.Replicas = 2
		noop := b.write("gc", rs, 20*ms, 30*ms, func(*history.Object) {})
		g := *b.ops[0].Got
		g.Replicas = -1
		b.ops[noop].Got = &g
		expectOk(t, b.check())
		b.ops[noop].Got.Labels = map[string]string{"changed": "yes"}
		expectIllegal(t, b.check(), noop, "kept rv")
	})
	t.Run("a removing update checks its precondition before the removal", func(t *testing.T) {
		for _, stale := range []bool{true, false} {
			b := newBuilder(t)
			b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
			b.del("client-0", o, 11*ms, 20*ms, "Background")
			read := b.live[o].RV
			// A write lands between the removing patch's precondition check
			// and its removal (both overlap; the label patch must come
			// first, or it would find nothing).
			b.write("client-1", o, 30*ms, 40*ms, label("x", "y"))
			rm := b.write("client-0", o, 25*ms, 45*ms, withoutFinalizer("cascade.dev/hold"))
			b.ops[rm].Sent = &history.Object{RV: read}
			if stale {
				expectOk(t, b.check())
				continue
			}
			b.ops[rm].Sent = &history.Object{RV: b.rv + 5}
			expectIllegal(t, b.check(), rm, "never live")
		}
	})
	t.Run("empty history", func(t *testing.T) {
		expectOk(t, Check(nil, Options{}))
	})
	t.Run("a no-op write with a stale resourceVersion answers the live object (etcd3 GuaranteedUpdate)", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		stale := b.live[o].RV
		b.write("client-0", o, 20*ms, 30*ms, func(x *history.Object) { x.Labels = map[string]string{"a": "b"} })
		b.write("client-0", o, 40*ms, 50*ms, func(x *history.Object) { x.Labels = nil })
		live := *b.live[o]
		noop := b.add(history.Op{Actor: "client-1", Verb: history.Patch, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			Sent: &history.Object{RV: stale}, Code: 200, Got: &live, Call: int64(60 * ms), Return: int64(70 * ms)})
		expectOk(t, b.check()) // the answer etcd3 gives
		changed := live
		changed.Labels = map[string]string{"c": "d"}
		changed.RV = b.nextRV()
		b.ops[noop].Got = &changed
		expectIllegal(t, b.check(), noop, "rv precondition failed")
	})
	t.Run("conflict needs a failed precondition", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-0", o, 0, 10*ms, nil)
		ok := b.refused("client-0", history.Patch, o, 20*ms, 30*ms, 409, "Conflict")
		b.ops[ok].Sent = &history.Object{RV: 7}
		bad := b.refused("client-1", history.Patch, o, 40*ms, 50*ms, 409, "Conflict")
		b.ops[bad].Sent = &history.Object{RV: b.live[o].RV}
		expectIllegal(t, b.check(), bad, "Conflict although its preconditions held")
	})
}

func TestVisualize(t *testing.T) {
	b := newBuilder(t)
	o, p := key("cm", "owner"), key("pod", "p")
	b.create("client-0", o, 0, 10*ms, nil)
	b.del("client-0", o, 20*ms, 30*ms, "Orphan")
	b.create("client-1", p, 25*ms, 35*ms, nil, b.ref(o, false, false))
	b.write("gc", o, 40*ms, 45*ms, withoutFinalizer(model.FinalizerOrphan))
	r := b.check()
	path := filepath.Join(t.TempDir(), "history.html")
	if err := r.Visualize(path); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"known kubernetes#26120", "0=client-0 1=client-1 2=gc", "gc patch cm/ns/owner"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the visualization lacks %q", want)
		}
	}
}

// TestDeleteFinalizerRace: kubernetes#77988. A DELETE that read an object
// without finalizers removes it at once, even when a write put a
// finalizer on it before the removal (harness/history's
// TestPVDeleteAndFinalizerRaces reproduces it on kube-apiserver v1.36).
// The answer is the object as last stored, finalizer on; the write
// answered 200 inside the DELETE's interval. That is a known race, never
// an Ok without it; a DELETE that cannot have read the object bare
// stays illegal, and so does a write answered after the removal.
func TestDeleteFinalizerRace(t *testing.T) {
	const hold = "cascade.dev/hold"
	v := key("pv", "a")
	addHold := func(x *history.Object) { x.Finalizers = append(x.Finalizers, hold) }
	// racing appends: create v bare; a DELETE [del0, del1] by client-1;
	// client-0's patch adding hold in [p0, p1]; the DELETE's answer is
	// the patched object at the deletion's revision, removed.
	racing := func(b *builder, del0, del1, p0, p1 int64, opts *history.DeleteOptions) (dl, p int) {
		b.create("client-1", v, 0, 10*ms, nil)
		dl = b.refused("client-1", history.Delete, v, del0, del1, 200, "")
		p = b.write("client-0", v, p0, p1, addHold)
		got := *b.live[v]
		got.RV = b.nextRV()
		b.ops[dl].Got, b.ops[dl].Removed, b.ops[dl].Delete = &got, true, opts
		delete(b.live, v)
		return dl, p
	}
	t.Run("sequential orders", func(t *testing.T) {
		b := newBuilder(t)
		b.create("client-1", v, 0, 10*ms, nil)
		b.write("client-0", v, 11*ms, 12*ms, addHold)
		b.del("client-1", v, 13*ms, 14*ms, "")
		b.write("client-0", v, 15*ms, 16*ms, withoutFinalizer(hold))
		expectOk(t, b.check())

		b = newBuilder(t)
		b.create("client-1", v, 0, 10*ms, nil)
		b.del("client-1", v, 13*ms, 14*ms, "")
		nf := b.refused("client-0", history.Patch, v, 15*ms, 16*ms, 404, "NotFound")
		b.ops[nf].Sent = &history.Object{RV: b.ops[0].Got.RV}
		expectOk(t, b.check())
	})
	t.Run("patch inside the DELETE's interval", func(t *testing.T) {
		b := newBuilder(t)
		dl, _ := racing(b, 20*ms, 60*ms, 30*ms, 40*ms, &history.DeleteOptions{})
		r := b.check()
		expectKnown(t, r, dl, model.KnownRemovalBeforeFinalizers)
		if !contains(r.Known[0].Message, "finalizers [cascade.dev/hold] remained") || r.Known[0].Property != model.PropNoRemovalWithFinalizers {
			t.Errorf("known finding: %+v", r.Known[0])
		}
	})
	t.Run("patch answered before the DELETE was sent", func(t *testing.T) {
		b := newBuilder(t)
		dl, _ := racing(b, 50*ms, 60*ms, 30*ms, 40*ms, &history.DeleteOptions{})
		expectIllegal(t, b.check(), dl, model.PropNoRemovalWithFinalizers)
	})
	t.Run("patch answered after the removal", func(t *testing.T) {
		b := newBuilder(t)
		_, p := racing(b, 20*ms, 25*ms, 30*ms, 40*ms, &history.DeleteOptions{})
		expectIllegal(t, b.check(), p, "no pv/a was live")
	})
	for _, c := range []struct {
		name string
		opts *history.DeleteOptions
	}{
		{"a resourceVersion precondition", &history.DeleteOptions{PreconditionRV: "102"}},
		{"Orphan, which writes the finalizer first", &history.DeleteOptions{Propagation: "Orphan"}},
	} {
		t.Run("a DELETE with "+c.name, func(t *testing.T) {
			b := newBuilder(t)
			dl, _ := racing(b, 20*ms, 60*ms, 30*ms, 40*ms, c.opts)
			if c.opts.PreconditionRV != "" {
				c.opts.PreconditionRV = fmt.Sprint(b.ops[dl].Got.RV - 1) // the patched version's
			}
			expectIllegal(t, b.check(), dl, model.PropNoRemovalWithFinalizers)
		})
	}
	t.Run("a Pod, whose DELETE writes deletionTimestamp first", func(t *testing.T) {
		b := newBuilder(t)
		v = key("pod", "a")
		defer func() { v = key("pv", "a") }()
		dl, p := racing(b, 20*ms, 60*ms, 30*ms, 40*ms, &history.DeleteOptions{})
		// Either order of the two fails; the summary names both.
		expectIllegal(t, b.check(), -1, fmt.Sprintf("op %d (client-0 patch", p), "no pod/ns/a was live",
			fmt.Sprintf("op %d (client-1 delete", dl), model.PropNoRemovalWithFinalizers)
	})
	t.Run("a Pod, whose DELETE another DELETE's GC finalizer races", func(t *testing.T) {
		// The graceless DELETE wrote deletionTimestamp, a DELETE with
		// propagation Orphan put orphan on, and the first removed the
		// Pod all the same (found by fuzzing the kubeconfig target).
		b := newBuilder(t)
		v = key("pod", "a")
		defer func() { v = key("pv", "a") }()
		b.create("client-1", v, 0, 10*ms, nil)
		dl := b.refused("client-1", history.Delete, v, 20*ms, 60*ms, 200, "")
		orphan := b.del("client-2", v, 30*ms, 40*ms, "Orphan")
		got := *b.live[v]
		got.RV = b.nextRV()
		b.ops[dl].Got, b.ops[dl].Removed, b.ops[dl].Delete = &got, true, &history.DeleteOptions{}
		delete(b.live, v)
		r := b.check()
		expectKnown(t, r, dl, model.KnownRemovalBeforeFinalizers)
		if !contains(r.Known[0].Message, fmt.Sprintf("before op %d put them on", orphan)) {
			t.Errorf("known finding: %+v", r.Known[0])
		}
		// Put on before the DELETE was sent, the finalizer was there to
		// be seen: no race explains the removal.
		b.ops[orphan].Call, b.ops[orphan].Return = 12*ms, 15*ms
		expectIllegal(t, b.check(), dl, model.PropNoRemovalWithFinalizers)
	})
	t.Run("removed after another DELETE started its deletion", func(t *testing.T) {
		// The parked DELETE retries on the version a second DELETE wrote
		// (being deleted, hold on) and removes it, answering that
		// version at the deletion's revision: FromAudit reads a DELETE
		// that kept the object, and only the later NotFound shows that
		// it did not.
		b := newBuilder(t)
		b.create("client-1", v, 0, 10*ms, nil)
		dl := b.refused("client-1", history.Delete, v, 20*ms, 80*ms, 200, "")
		b.write("client-0", v, 30*ms, 40*ms, addHold)
		b.del("client-2", v, 45*ms, 50*ms, "")
		got := *b.live[v]
		got.RV = b.nextRV()
		b.ops[dl].Got, b.ops[dl].Delete = &got, &history.DeleteOptions{}
		delete(b.live, v)
		nf := b.refused("client-0", history.Patch, v, 90*ms, 100*ms, 404, "NotFound")
		expectKnown(t, b.check(), dl, model.KnownRemovalBeforeFinalizers)
		b.ops[nf].Call, b.ops[nf].Return = 42*ms, 43*ms // before the second DELETE: the object was live
		expectIllegal(t, b.check(), nf, "NotFound while")
	})
}

// TestRemovedMeanwhile: the API server removes an object in a storage
// transaction of its own after the write that causes it read the object,
// and answers success when that transaction finds it gone already: an
// update emptying the finalizers (deleteWithoutFinalizers ignores
// NotFound, so two such updates both answer the removal), a Pod's DELETE
// after it wrote deletionTimestamp (ignoreNotFound). Such an answer is
// legal only if the object it names was removed by an op that may have
// taken effect after the write was sent.
func TestRemovedMeanwhile(t *testing.T) {
	const hold = "cascade.dev/hold"
	t.Run("two finalizer removals", func(t *testing.T) {
		for _, late := range []bool{false, true} {
			b := newBuilder(t)
			o := key("pod", "b")
			b.create("client-3", o, 0, 10*ms, []string{hold})
			b.del("client-2", o, 11*ms, 20*ms, "Background")
			read := *b.live[o]
			first := b.write("client-2", o, 30*ms, 45*ms, withoutFinalizer(hold))
			second := b.add(b.ops[first])
			b.ops[second].Actor = "client-1"
			b.ops[second].Call, b.ops[second].Return = 35*ms, 50*ms
			b.ops[first].Sent, b.ops[second].Sent = &history.Object{RV: read.RV}, &history.Object{RV: read.RV}
			if !late {
				expectOk(t, b.check())
				continue
			}
			b.ops[second].Call, b.ops[second].Return = 46*ms, 50*ms // sent after the removal answered
			expectIllegal(t, b.check(), second, "no pod/ns/b was live")
		}
	})
	t.Run("a Pod's DELETE and an adoption", func(t *testing.T) {
		// A DELETE of a Pod writes deletionTimestamp (grace 0),
		// which the history does not show; the controller's patch reads
		// that version, which ShouldDeleteDuringUpdate removes; the one
		// of the two that comes second answers the removal all the same.
		b := newBuilder(t)
		o := key("pod", "b")
		b.create("client-3", o, 0, 10*ms, nil)
		deleting := *b.live[o]
		deleting.Deleting, deleting.RV = true, b.nextRV()
		dl := b.refused("client-1", history.Delete, o, 20*ms, 40*ms, 200, "")
		b.ops[dl].Got, b.ops[dl].Removed, b.ops[dl].Delete = &deleting, true, &history.DeleteOptions{Propagation: "Background"}
		adopted := deleting
		adopted.Owners = []history.Ref{{APIVersion: "v1", Kind: "ReplicationController", Name: "b", UID: "u-rc", Controller: true, Block: true}}
		p := b.add(history.Op{Actor: "controller/replication-controller", Verb: history.Patch, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			Code: 200, Got: &adopted, Removed: true, Call: 25 * ms, Return: 45 * ms})
		expectOk(t, b.check())
		b.ops[p].Got.UID = "u-other"
		expectIllegal(t, b.check(), -1)
	})
	t.Run("a second DELETE of a ConfigMap", func(t *testing.T) {
		// Only kinds with graceful deletion answer a removal they did not make.
		b := newBuilder(t)
		o := key("cm", "c")
		b.create("client-0", o, 0, 10*ms, nil)
		gone := *b.live[o]
		b.del("client-0", o, 20*ms, 30*ms, "")
		dl := b.refused("client-1", history.Delete, o, 22*ms, 32*ms, 200, "")
		b.ops[dl].Got, b.ops[dl].Removed = &gone, true
		expectIllegal(t, b.check(), -1, "no cm/ns/c was live") // either DELETE may be the one that fails
	})
}

// TestConflictMeanwhile: a Pod's DELETE writes deletionTimestamp, then
// removes the Pod; a patch landing in between answers Conflict against a
// version the history never shows but the DELETE's answer implies (its
// newer resourceVersion).
func TestConflictMeanwhile(t *testing.T) {
	for _, late := range []bool{false, true} {
		b := newBuilder(t)
		o := key("pod", "b")
		b.create("client-1", o, 0, 10*ms, nil)
		read := b.live[o].RV
		last := *b.live[o]
		last.Deleting, last.RV = true, b.nextRV()
		dl := b.refused("gc", history.Delete, o, 20*ms, 40*ms, 200, "")
		b.ops[dl].Got, b.ops[dl].Removed, b.ops[dl].Delete = &last, true, &history.DeleteOptions{Propagation: "Background"}
		b.ops[0].Got.Owners = []history.Ref{{APIVersion: "v1", Kind: "ReplicationController", Name: "gone", UID: "u-gone"}}
		cf := b.refused("client-1", history.Patch, o, 25*ms, 35*ms, 409, "Conflict")
		b.ops[cf].Sent = &history.Object{RV: read}
		if !late {
			expectOk(t, b.check())
			continue
		}
		b.ops[cf].Call, b.ops[cf].Return = 41*ms, 45*ms // sent once the Pod was gone
		expectIllegal(t, b.check(), cf, "Conflict while no pod/ns/b was live")
	}
}

// TestRetryWithoutRV: upstream's deleteObject, refused 409 Conflict on its
// resourceVersion precondition, GETs the object and deletes again with
// only the UID precondition when the ownerReferences look unchanged; a
// client's removal of the last ownerReference between that GET and the
// DELETE lets the GC collect an object without owners. Without the
// refused DELETE before it, the same collection is illegal.
func TestRetryWithoutRV(t *testing.T) {
	for _, retried := range []bool{true, false} {
		b := newBuilder(t)
		del := retryHistory(b, retried)
		r := b.check()
		if retried {
			expectKnown(t, r, del, model.KnownRetryWithoutRV)
		} else {
			expectIllegal(t, r, del, "which has no ownerReferences")
		}
	}
}

// retryHistory builds TestRetryWithoutRV's history in b and returns the
// index of the GC's DELETE: an owner's Background delete, a client's
// label write of the dependent, the GC's DELETE of it refused 409 on the
// resourceVersion its GET read (when retried), the client removing the
// dependent's reference, and the GC's DELETE without a resourceVersion
// precondition.
func retryHistory(b *builder, retried bool) int {
	o, d := key("pod", "o"), key("rc", "d")
	b.create("client-0", o, 0, 10*ms, nil)
	b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, true))
	decided := b.live[d].RV
	b.del("client-0", o, 21*ms, 30*ms, "Background")
	b.write("client-1", d, 31*ms, 35*ms, func(x *history.Object) { x.Labels = map[string]string{"app": "web"} })
	if retried {
		c := b.refused("gc", history.Delete, d, 36*ms, 38*ms, 409, "Conflict")
		b.ops[c].Delete = &history.DeleteOptions{Propagation: "Background", PreconditionUID: b.live[d].UID, PreconditionRV: fmt.Sprint(decided)}
	}
	b.write("client-1", d, 40*ms, 45*ms, withRefs())
	del := b.del("gc", d, 50*ms, 55*ms, "Background")
	b.ops[del].Delete.PreconditionUID = "u2"
	return del
}

// TestProtectionRequired: with the deletion-protection webhook known to
// run, a DELETE may not succeed on a live object labelled Always; without
// that knowledge a denial is only permitted.
func TestProtectionRequired(t *testing.T) {
	for _, webhook := range []bool{true, false} {
		b := newBuilder(t)
		o := key("cm", "p")
		b.create("client-0", o, 0, 10*ms, nil)
		b.write("client-0", o, 11*ms, 20*ms, func(x *history.Object) {
			x.Labels = map[string]string{model.ProtectionLabel: model.ProtectAlways}
		})
		del := b.del("client-1", o, 30*ms, 40*ms, "")
		history.AssignLanes(b.ops)
		r := Check(b.ops, Options{Protection: webhook})
		if webhook {
			expectIllegal(t, r, del, model.PropProtectionHolds)
		} else {
			expectOk(t, r)
		}
	}
}

// TestRegistryDecidesRelease: the history TestRetryWithoutRV excuses as
// deleteObject's retry, judged on v1.33.13, whose deleteObject sends no
// resourceVersion precondition and so never retries without one: the
// registry has retry-without-rv from v1.34.0 only, so its site's excuse
// does not hold there, whatever the site saw (model.KnownIn).
func TestRegistryDecidesRelease(t *testing.T) {
	b := newBuilder(t)
	b.release = model.Release{Major: 1, Minor: 33, Patch: 13}
	del := retryHistory(b, true)
	expectIllegal(t, b.check(), del, "which has no ownerReferences", "known race "+model.KnownRetryWithoutRV+" would explain it", "v1.33.13 is not one")
}
