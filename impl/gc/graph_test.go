package gc

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/step"
)

// Unit tests of the graph builder and the GC's patch bodies, on a Stepped
// GC that never runs: processGraphChanges is fed events directly and
// makes no API request.

func newTestGC(t *testing.T, bs bugs.Set) (*GarbageCollector, *record.FakeRecorder) {
	t.Helper()
	g, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{Mode: step.Stepped, Bugs: bs})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	g.recorder = rec
	return g, rec
}

var (
	cmGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func cmEvent(typ EventType, ns, name string, uid types.UID, owners ...metav1.OwnerReference) *event {
	return &event{typ: typ, gvk: cmGVK, gvr: cmGVR, obj: &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, OwnerReferences: owners}}}
}

func cmRef(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: uid}
}

func queued(g *GarbageCollector) []types.UID {
	var out []types.UID
	for _, id := range g.stepper.attemptToDelete.list() {
		out = append(out, id.UID)
	}
	return out
}

// "bad child in ns1 -> owner in ns2 (child first)" (garbagecollector_test.go
// TestConflictingData): the child builds a virtual owner in ns1; observing
// the owner in ns2 replaces the identity, reports the invalid reference
// and requeues the child.
func TestVirtualOwnerObservedElsewhere(t *testing.T) {
	g, rec := newTestGC(t, nil)
	ctx := context.Background()
	g.processGraphChanges(ctx, cmEvent(Added, "ns1", "bad", "child", cmRef("parent", "owner")))
	n := g.graph.nodes["owner"]
	if n == nil || !n.virtual || n.identity.Namespace != "ns1" {
		t.Fatalf("virtual owner: %+v", n)
	}
	if q := queued(g); len(q) != 1 || q[0] != "owner" {
		t.Fatalf("attemptToDelete after the child: %v", q)
	}
	g.stepper.attemptToDelete.remove("owner")
	g.processGraphChanges(ctx, cmEvent(Added, "ns2", "parent", "owner"))
	if n := g.graph.nodes["owner"]; n.virtual || n.identity.Namespace != "ns2" {
		t.Fatalf("observed owner: %+v", n)
	}
	if q := queued(g); len(q) != 1 || q[0] != "child" {
		t.Fatalf("attemptToDelete after the owner: %v", q)
	}
	want := `Warning OwnerRefInvalidNamespace ownerRef [v1/ConfigMap, namespace: ns1, name: parent, uid: owner] does not exist in namespace "ns1"`
	if got := <-rec.Events; got != want {
		t.Fatalf("event %q, want %q", got, want)
	}
}

// The virtual owner's work item keeps the identity it was queued with;
// once the owner is observed in another namespace the item is stale, and
// attemptToDeleteItem forgets it without a request, as upstream's
// attemptToDeleteWorker does with the old *node ("item no longer virtual
// in the graph"). This GC's API server does not answer: a GET would fail
// and requeue the item.
func TestStaleVirtualItemIsForgotten(t *testing.T) {
	g, _ := newTestGC(t, nil)
	ctx := context.Background()
	g.processGraphChanges(ctx, cmEvent(Added, "ns1", "bad", "child", cmRef("parent", "owner")))
	g.processGraphChanges(ctx, cmEvent(Added, "ns2", "parent", "owner"))
	i := slices.IndexFunc(g.stepper.attemptToDelete.list(), func(id Identity) bool { return id.UID == "owner" })
	if i < 0 {
		t.Fatalf("the virtual owner is not queued: %v", g.stepper.attemptToDelete.list())
	}
	item := g.stepper.attemptToDelete.list()[i]
	if item.Namespace != "ns1" {
		t.Fatalf("the queued item is %v, want the virtual identity in ns1", item)
	}
	if writes, out := g.attemptToDeleteItem(ctx, item); len(writes) != 0 || out != forget {
		t.Fatalf("attemptToDeleteItem(%v) = %v, %v; want no write, forget", item, writes, out)
	}
}

// A virtual delete under coordinates some dependents do not use keeps the
// node, caches the verified identity as absent and requeues only the
// dependents that used it, and the virtual node takes the other
// coordinates; with uid-only-identity the node goes and every dependent is
// requeued, with the UID cached as absent.
func TestVirtualDeletePartitions(t *testing.T) {
	for _, tc := range []struct {
		bugs   bugs.Set
		keep   bool
		queued string
	}{
		// dep-a used the verified coordinates; the node takes dep-b's and
		// is verified again under them
		{nil, true, "[dep-a o]"},
		{bugs.Of(bugs.UIDOnlyIdentity), false, "[dep-a dep-b]"},
	} {
		g, _ := newTestGC(t, tc.bugs)
		ctx := context.Background()
		g.processGraphChanges(ctx, cmEvent(Added, "ns1", "a", "dep-a", cmRef("owner", "o")))
		wrongKind := metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: "owner", UID: "o"}
		g.processGraphChanges(ctx, cmEvent(Added, "ns1", "b", "dep-b", wrongKind))
		g.stepper.attemptToDelete.items = nil
		absent := Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns1", Name: "owner", UID: "o"}
		g.processGraphChanges(ctx, virtualDeleteEvent(absent))
		_, kept := g.graph.nodes["o"]
		if kept != tc.keep || fmt.Sprint(queued(g)) != tc.queued {
			t.Errorf("bugs %v: kept=%v queued=%v", tc.bugs, kept, queued(g))
		}
		if !g.absent.Has(absent) {
			t.Errorf("bugs %v: %v not cached absent", tc.bugs, absent)
		}
		other := absent
		other.Kind = "Secret"
		if g.absent.Has(other) != tc.bugs.Has(bugs.UIDOnlyIdentity) {
			t.Errorf("bugs %v: the absent cache answers %v for other coordinates of the UID", tc.bugs, g.absent.Has(other))
		}
		if tc.keep {
			if id := g.graph.nodes["o"].identity; id.Kind != "Secret" {
				t.Errorf("the virtual node should take the alternate identity, has %v", id)
			}
		}
	}
}

// Foreground starts on the level (deleting with foregroundDeletion, old
// not both), also for a second delete that only adds the finalizer;
// edge-triggered-transitions misses the second one.
func TestDeletionStartsWithFinalizer(t *testing.T) {
	now := metav1.Now()
	mk := func(deleting bool, fs ...string) *metav1.PartialObjectMetadata {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Finalizers: fs}}
		if deleting {
			o.DeletionTimestamp = &now
		}
		return o
	}
	level, _ := newTestGC(t, nil)
	edge, _ := newTestGC(t, bugs.Of(bugs.EdgeTriggeredTransitions))
	fg := metav1.FinalizerDeleteDependents
	for _, tc := range []struct {
		old, new    *metav1.PartialObjectMetadata
		level, edge bool
	}{
		{nil, mk(true, fg), true, true},
		{mk(false), mk(true, fg), true, true},
		{mk(true, "x"), mk(true, "x", fg), true, false},
		{mk(true, fg), mk(true, fg), false, false},
		{mk(false), mk(true), false, false},
	} {
		var old metav1.Object
		if tc.old != nil {
			old = tc.old
		}
		if got := level.deletionStartsWithFinalizer(old, tc.new, fg); got != tc.level {
			t.Errorf("level: %v -> %v: %v", tc.old, tc.new, got)
		}
		if got := edge.deletionStartsWithFinalizer(old, tc.new, fg); got != tc.edge {
			t.Errorf("edge: %v -> %v: %v", tc.old, tc.new, got)
		}
	}
}

func TestReferencesDiffs(t *testing.T) {
	a, b, c := cmRef("a", "a"), cmRef("b", "b"), cmRef("c", "c")
	bBlock := b
	bBlock.BlockOwnerDeletion = ptr.To(true)
	added, removed, changed := referencesDiffs([]metav1.OwnerReference{a, bBlock}, []metav1.OwnerReference{b, c})
	if len(added) != 1 || added[0].UID != "c" || len(removed) != 1 || removed[0].UID != "a" ||
		len(changed) != 1 || !blocks(changed[0].old) || blocks(changed[0].new) {
		t.Fatalf("added %v removed %v changed %v", added, removed, changed)
	}
	bFalse := b
	bFalse.BlockOwnerDeletion = ptr.To(false)
	if _, _, changed := referencesDiffs([]metav1.OwnerReference{b}, []metav1.OwnerReference{bFalse}); len(changed) != 1 {
		t.Fatal("unset and false blockOwnerDeletion must differ, as reflect.DeepEqual says")
	}
	// Duplicate UIDs, as upstream: the last old reference stands for its
	// UID, a second new reference to a matched UID is added, and a
	// removed UID is reported once, by its last reference.
	if a, r, c := referencesDiffs([]metav1.OwnerReference{bBlock, b}, []metav1.OwnerReference{b}); len(a)+len(r)+len(c) != 0 {
		t.Errorf("[b block, b] -> [b]: added %v removed %v changed %v, want nothing", a, r, c)
	}
	if a, r, c := referencesDiffs([]metav1.OwnerReference{b}, []metav1.OwnerReference{b, bBlock}); len(a) != 1 || !blocks(a[0]) || len(r)+len(c) != 0 {
		t.Errorf("[b] -> [b, b block]: added %v removed %v changed %v", a, r, c)
	}
	if a, r, c := referencesDiffs([]metav1.OwnerReference{bBlock, b}, nil); len(r) != 1 || blocks(r[0]) || len(a)+len(c) != 0 {
		t.Errorf("[b block, b] -> []: added %v removed %v changed %v", a, r, c)
	}
}

// The exact bytes of the GC's patches: a strategic merge patch must never
// carry "ownerReferences":null (which deletes every reference), while a
// JSON merge patch that removes the last reference must.
func TestPatchBodies(t *testing.T) {
	if got := string(deleteOwnerRefsSMP("dep", []types.UID{"o1", "o2"})); got !=
		`{"metadata":{"uid":"dep","ownerReferences":[{"$patch":"delete","uid":"o1"},{"$patch":"delete","uid":"o2"}]}}` {
		t.Errorf("delete SMP: %s", got)
	}
	refs := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "a-uid", BlockOwnerDeletion: ptr.To(false)}}
	if got := string(unblockSMP(Identity{UID: "b"}, refs)); got != `{"metadata":{"uid":"b"}}` {
		t.Errorf("unblock SMP without blocking references: %s", got)
	}
	refs[0].BlockOwnerDeletion = ptr.To(true)
	if got := string(unblockSMP(Identity{UID: "b"}, refs)); got !=
		`{"metadata":{"uid":"b","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"a-uid","blockOwnerDeletion":false}]}}` {
		t.Errorf("unblock SMP: %s", got)
	}
	if got, _ := jmp("7", nil); string(got) != `{"metadata":{"resourceVersion":"7","ownerReferences":null}}` {
		t.Errorf("JMP removing every reference: %s", got)
	}
}

// OnGraphChange hears of every informer event once it is in the graph,
// with the lock released (the callback may read the graph), and never of
// a worker's virtual delete event: a harness takes the calls as evidence
// of what a worker that began after them read.
func TestOnGraphChange(t *testing.T) {
	g, _ := newTestGC(t, nil)
	var got []string
	g.opts.OnGraphChange = func(c GraphChange) {
		_, inGraph := g.snapshot(c.UID) // deadlocks if called under the lock
		got = append(got, fmt.Sprintf("%s@%s deleted=%v in-graph=%v", c.UID, c.ResourceVersion, c.Deleted, inGraph))
	}
	ctx := context.Background()
	owner := cmEvent(Added, "ns1", "owner", "o")
	owner.obj.ResourceVersion = "7"
	g.processGraphChanges(ctx, owner)
	dep := cmEvent(Added, "ns1", "dep", "d", cmRef("gone", "x"))
	dep.obj.ResourceVersion = "8"
	g.processGraphChanges(ctx, dep)
	g.processGraphChanges(ctx, virtualDeleteEvent(Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns1", Name: "gone", UID: "x"}))
	del := cmEvent(Deleted, "ns1", "owner", "o")
	del.obj.ResourceVersion = "9"
	g.processGraphChanges(ctx, del)
	want := []string{"o@7 deleted=false in-graph=true", "d@8 deleted=false in-graph=true", "o@9 deleted=true in-graph=false"}
	if !slices.Equal(got, want) {
		t.Errorf("OnGraphChange calls:\n got %q\nwant %q", got, want)
	}
}
