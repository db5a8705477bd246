package model

import (
	"slices"
	"strings"
	"testing"
)

// gcDelivery: the steps whose order SettlesTo varies here.
func gcDelivery(st Step) bool { return st.Actor == ActorGC && st.Op == OpDeliver }

// applyAll applies lines to s on m, failing the test on a refusal.
func applyAll(t *testing.T, m *Model, s *State, lines ...string) *State {
	t.Helper()
	for _, line := range lines {
		var err error
		if s, _, err = m.Apply(s, mustStep(t, line)); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	return s
}

// Two watch events of two resources are pending: cm/ns3/a's deletion and
// the creation of pod/d in default, which names cm/ns3/a's UID. The order
// the GC's graph builder takes them in decides an Event: pod/d first
// finds its owner observed in another namespace (addDependentToOwners
// reports OwnerRefInvalidNamespace); cm/ns3/a's deletion first leaves
// pod/d a virtual owner and no such report. Settle takes one order;
// SettlesTo finds the other's end, and no end that no order reaches.
func TestSettlesToFindsAnOrderOfTheModels(t *testing.T) {
	m := &Model{}
	s := applyAll(t, m, NewState(), "create cm/ns3/a", "gc deliver cm/ns3/a",
		"delete cm/ns3/a", "create pod/d owner=cm/ns3/a")
	ends := map[string][]string{}
	for _, first := range []string{"gc deliver pod/d", "gc deliver cm/ns3/a"} {
		end, _, err := m.Settle(applyAll(t, m, s, first))
		if err != nil {
			t.Fatal(err)
		}
		ends[first] = end.Dump()
	}
	if !slices.ContainsFunc(ends["gc deliver pod/d"], func(l string) bool { return strings.HasPrefix(l, "event OwnerRefInvalidNamespace pod/d") }) ||
		slices.Equal(ends["gc deliver pod/d"], ends["gc deliver cm/ns3/a"]) {
		t.Fatalf("both orders end alike, the test shows nothing: %v", ends["gc deliver pod/d"])
	}
	canonical, _, err := m.Settle(s)
	if err != nil {
		t.Fatal(err)
	}
	for first, want := range ends {
		path, found, err := m.SettlesTo(s, want, gcDelivery)
		if err != nil || !found {
			t.Fatalf("the end of the order %q first (%v) is not found: found=%v err=%v", first, want, found, err)
		}
		if len(path) == 0 {
			t.Fatalf("the end of the order %q first is s itself", first)
		}
		if got := path[len(path)-1].State.Dump(); !slices.Equal(got, want) {
			t.Errorf("the path found ends in %v, want %v", got, want)
		}
		if !slices.Equal(want, canonical.Dump()) && path[0].Step.String() != first {
			t.Errorf("the other order's path begins with %q, want %q", path[0].Step, first)
		}
	}
	never := append(slices.Clone(ends["gc deliver pod/d"]), "event Made up")
	if _, found, err := m.SettlesTo(s, never, gcDelivery); found || err != nil {
		t.Errorf("an end no order reaches was found (found=%v, err=%v)", found, err)
	}
}
