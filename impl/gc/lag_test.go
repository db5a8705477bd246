package gc

import (
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// TestInformerLag: the informer-lag fault delivers every event, each
// resource's in the order they came, while it may hand a later event of
// one resource to the graph builder before an earlier one of another —
// the reordering the GC's lookup races need. Until an event is handed
// on it counts as pending, which Stats reports as a graph change.
func TestInformerLag(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pvs := schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	var mu sync.Mutex
	var got []*event
	l := newInformerLag(20*time.Millisecond, 0, 1, func(ev *event) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	})
	defer l.close()
	sent := map[*event]int{}
	for i := range 200 {
		r := pods
		if i%2 == 1 {
			r = pvs
		}
		ev := &event{obj: &metav1.PartialObjectMetadata{}, gvr: r}
		sent[ev] = i
		l.deliver(ev)
	}
	if l.pending.Load() == 0 {
		t.Fatal("no event pending right after 200 were delivered with a lag")
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.pending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 200 || l.pending.Load() != 0 {
		t.Fatalf("%d of 200 events handed on, %d pending", len(got), l.pending.Load())
	}
	last := map[schema.GroupVersionResource]int{pods: -1, pvs: -1}
	reordered := false
	for i, ev := range got {
		if sent[ev] < last[ev.gvr] {
			t.Fatalf("%s: event %d handed on after event %d", ev.gvr.Resource, sent[ev], last[ev.gvr])
		}
		last[ev.gvr] = sent[ev]
		if i > 0 && sent[ev] < sent[got[i-1]] {
			reordered = true
		}
	}
	if !reordered {
		t.Error("no event of one resource overtook an earlier one of the other")
	}
}

// TestInformerRelist: with relist gaps, a stream skips some events, and
// only those a relist could skip: what reaches the graph builder is,
// object by object, a consistent history — an add first, each update
// from the version last handed on, a delete only of an object handed
// on — that ends in each surviving object's last version. Some objects
// created and deleted within a gap are never handed on at all.
func TestInformerRelist(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var mu sync.Mutex
	var got []*event
	l := newInformerLag(0, 5*time.Millisecond, 7, func(ev *event) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	})
	defer l.close()
	// each object its own name: a relist hands a name taken over by
	// another object on as an update from the old one (TestInformerRelistNameTakenOver)
	obj := func(uid string, v int) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid), ResourceVersion: fmt.Sprint(v)}}
	}
	last := map[types.UID]*metav1.PartialObjectMetadata{} // surviving objects' last versions
	const n = 100
	for i := range n {
		uid := fmt.Sprintf("u%d", i)
		first := obj(uid, 1)
		l.deliver(&event{typ: Added, obj: first, gvr: cms})
		prev := first
		for v := 2; v <= 4; v++ {
			next := obj(uid, v)
			l.deliver(&event{typ: Modified, obj: next, old: prev, gvr: cms})
			prev = next
		}
		if i%2 == 0 {
			l.deliver(&event{typ: Deleted, obj: prev, gvr: cms})
		} else {
			last[prev.UID] = prev
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.pending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if l.pending.Load() != 0 {
		t.Fatalf("%d events still pending", l.pending.Load())
	}
	if l.skipped.Load() == 0 || int(l.skipped.Load())+len(got) != 5*n-n/2 {
		t.Fatalf("%d events skipped and %d handed on of %d", l.skipped.Load(), len(got), 5*n-n/2)
	}
	given := map[types.UID]*metav1.PartialObjectMetadata{}
	gone := map[types.UID]bool{}
	for _, ev := range got {
		uid := ev.obj.UID
		if gone[uid] {
			t.Fatalf("%s: a %s handed on after its delete", uid, ev.typ)
		}
		prev, seen := given[uid]
		switch {
		case ev.typ == Deleted && !seen:
			t.Fatalf("%s: a delete handed on for an object never handed on", uid)
		case ev.typ == Deleted:
			delete(given, uid)
			gone[uid] = true
			continue
		case !seen && (ev.typ != Added || ev.old != nil):
			t.Fatalf("%s: first handed on as a %s (old %v), not an add", uid, ev.typ, ev.old)
		case seen && (ev.typ != Modified || ev.old != prev):
			t.Fatalf("%s: an update from version %v, not from %s, the one handed on last", uid, ev.old, prev.ResourceVersion)
		}
		given[uid] = ev.obj
	}
	for uid, want := range last {
		if given[uid] != want {
			t.Errorf("%s ends at version %v, want %s", uid, given[uid], want.ResourceVersion)
		}
	}
	unseen := 0
	for i := 0; i < n; i += 2 {
		if uid := types.UID(fmt.Sprintf("u%d", i)); !gone[uid] {
			unseen++
		}
	}
	if unseen == 0 {
		t.Error("every deleted object was handed on: no gap held an object's whole life")
	}
	for uid := range given {
		if last[uid] == nil {
			t.Errorf("%s was deleted but the graph builder still has it", uid)
		}
	}
}
