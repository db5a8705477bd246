package model

import "testing"

// A relist that finds an owner's name held by a new object hands the new
// object on as an update from the old one, never a delete of it, as
// client-go's name-keyed stores do (kubernetes#133565): the GC's graph
// keeps the old owner's node for good.
func TestRelistHandsNameTakenOverAsUpdate(t *testing.T) {
	m := &Model{}
	s, _ := run(t, m, "create secret/owner", "create cm/dep owner=secret/owner",
		"gc deliver secret/owner", "gc deliver cm/dep", "delete secret/owner", "create secret/owner")
	oldOwner, newOwner := UID(1), s.Lookup(kind(t, "secret"), DefaultNamespace, "owner").UID
	s = apply(t, m, s, "gc coalesce secret/owner")
	q := s.GC.Watch.queue(kind(t, "secret"))
	if len(q) != 1 || q[0].Obj.UID != newOwner || q[0].Replaces != oldOwner {
		t.Fatalf("after the relist the queue should hold the new owner's event replacing the old owner, got %+v", q)
	}
	s = apply(t, m, s, "gc deliver secret/owner")
	if s.GC.Watch.cached(oldOwner) != nil || s.GC.Watch.cached(newOwner) == nil {
		t.Errorf("the informer's cache should hold the new owner only")
	}
	if n := s.GC.node(oldOwner); n == nil || n.Virtual {
		t.Errorf("the graph should keep the old owner's observed node, got %+v", n)
	}
	if !replacedByRelist(s, oldOwner) {
		t.Errorf("replacedByRelist should see the old owner's node")
	}
}

// The replacement is no licence to lose a delete: an event that carries
// one is skipped only for a later update of its object, not its delete
// (the relist would have found the name gone and deleted the old owner).
func TestRelistReplacementNotSkippedForDelete(t *testing.T) {
	m := &Model{}
	s, _ := run(t, m, "create secret/owner", "gc deliver secret/owner", "delete secret/owner",
		"create secret/owner", "delete secret/owner", "gc coalesce secret/owner")
	if _, _, err := m.Apply(s, mustStep(t, "gc coalesce secret/owner")); err == nil {
		t.Fatalf("the new owner's create, replacing the old owner, was skipped for its delete")
	}
}

// apply applies one step to s.
func apply(t *testing.T, m *Model, s *State, line string) *State {
	t.Helper()
	s, _, err := m.Apply(s, mustStep(t, line))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return s
}
