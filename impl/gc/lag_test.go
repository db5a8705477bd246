package gc

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	l := newInformerLag(20*time.Millisecond, 1, func(ev *event) {
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
