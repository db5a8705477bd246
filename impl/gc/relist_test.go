package gc

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

func secretEvent(typ EventType, name string, uid types.UID) *event {
	return &event{typ: typ, gvr: secrets, obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}}
}

// steppedWith is a Stepper whose graph builder was given delivered and
// holds pending, for secrets.
func steppedWith(delivered []types.UID, pending ...*event) *Stepper {
	s := newStepper(nil)
	s.pending[secrets] = pending
	s.delivered[secrets] = map[types.UID]*metav1.PartialObjectMetadata{}
	for _, u := range delivered {
		s.delivered[secrets][u] = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: u}}
	}
	return s
}

// A relist that finds the owner's name held by a new object skips the old
// owner's delete and hands the new owner's event on as an update from the
// old one (client-go's stores are keyed by namespace/name;
// kubernetes#133565): the graph builder gets the old object as oldObj and
// its view drops it.
func TestCoalesceNameTakenOver(t *testing.T) {
	s := steppedWith([]types.UID{"a"}, secretEvent(Deleted, "owner", "a"), secretEvent(Added, "owner", "b"))
	if !s.coalesce(secrets) {
		t.Fatal("a relist could not skip the delete of an owner whose name a new owner took")
	}
	if q := s.pending[secrets]; len(q) != 1 || q[0].obj.UID != "b" || q[0].replaces != "a" {
		t.Fatalf("want the new owner's event replacing the old owner, got %+v", q)
	}
	_, old, _ := s.pop(secrets, true)
	if old == nil || old.UID != "a" {
		t.Fatalf("the update's old object should be the old owner, got %v", old)
	}
	if _, kept := s.delivered[secrets]["a"]; kept {
		t.Error("the graph builder's view still holds the old owner")
	}
}

// The replacement never stands in for a delete: the new owner's create,
// replacing the old owner, is not skipped for the new owner's delete, and
// an old owner whose name is next deleted, not taken, keeps its delete.
func TestCoalesceReplacementKeepsDeletes(t *testing.T) {
	s := steppedWith([]types.UID{"a"}, secretEvent(Deleted, "owner", "a"), secretEvent(Added, "owner", "b"), secretEvent(Deleted, "owner", "b"))
	if !s.coalesce(secrets) {
		t.Fatal("the old owner's delete could not be skipped")
	}
	if s.coalesce(secrets) {
		t.Error("the replacing create was skipped for the new owner's delete")
	}
	s = steppedWith([]types.UID{"a"}, secretEvent(Deleted, "owner", "a"), secretEvent(Added, "other", "c"))
	if s.coalesce(secrets) {
		t.Error("an owner's delete was skipped with its name never taken")
	}
}

// The informer-relist fault does what client-go's relist does: an owner
// deleted while a new owner took its name within the gap gets no delete,
// and the new owner reaches the graph builder as an update from it.
func TestInformerRelistNameTakenOver(t *testing.T) {
	l := newInformerLag(0, time.Second, 1, nil)
	s := &lagStream{given: map[types.UID]*metav1.PartialObjectMetadata{}, replaces: map[types.UID]types.UID{}}
	oldOwner := secretEvent(Added, "owner", "a")
	if ev := l.next(s, lagged{ev: oldOwner}); ev == nil || ev.typ != Added {
		t.Fatalf("the old owner's create before the gap: got %+v", ev)
	}
	s.queue = []lagged{{ev: secretEvent(Added, "owner", "b"), gap: 1}, {ev: secretEvent(Modified, "owner", "b"), gap: 1}}
	if ev := l.next(s, lagged{ev: secretEvent(Deleted, "owner", "a"), gap: 1}); ev != nil {
		t.Fatalf("the old owner's delete was handed on: %+v", ev)
	}
	for len(s.queue) > 0 {
		x := s.queue[0]
		s.queue = s.queue[1:]
		ev := l.next(s, x)
		if len(s.queue) > 0 {
			if ev != nil {
				t.Fatalf("a superseded event was handed on: %+v", ev)
			}
			continue
		}
		if ev == nil || ev.typ != Modified || ev.old == nil || ev.old.UID != "a" || ev.obj.UID != "b" {
			t.Fatalf("want the new owner as an update from the old one, got %+v", ev)
		}
	}
	if _, kept := s.given["a"]; kept {
		t.Error("the relist's view still holds the old owner")
	}
}

// A name deleted again before the gap ends is no heir: the old owner's
// delete is handed on.
func TestInformerRelistNameFreedAgain(t *testing.T) {
	l := newInformerLag(0, time.Second, 1, nil)
	s := &lagStream{given: map[types.UID]*metav1.PartialObjectMetadata{}, replaces: map[types.UID]types.UID{}}
	l.next(s, lagged{ev: secretEvent(Added, "owner", "a")})
	s.queue = []lagged{{ev: secretEvent(Added, "owner", "b"), gap: 1}, {ev: secretEvent(Deleted, "owner", "b"), gap: 1}}
	if ev := l.next(s, lagged{ev: secretEvent(Deleted, "owner", "a"), gap: 1}); ev == nil || ev.typ != Deleted {
		t.Fatalf("the old owner's delete was not handed on: %+v", ev)
	}
}
