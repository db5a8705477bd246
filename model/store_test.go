package model

import (
	"reflect"
	"slices"
	"testing"
)

// TestMemoriesAgree: every copy-on-write operation of store.go gives the
// same state whether it takes its memory from the heap or from a
// workspace (the checker's arenas), leaves the state it started from as
// it was, and returns slices whose capacity is their length, so that a
// later append copies instead of writing into memory another state
// shares.
func TestMemoriesAgree(t *testing.T) {
	m := &Model{}
	base, _ := run(t, m, "create cm/a", "create cm/b owner=cm/a,block", "create cm/c owner=cm/a", "delete cm/a propagation=Foreground")
	base = apply(t, m, base, "gc deliver cm/a")
	base = apply(t, m, base, "gc deliver cm/b")
	cm := kind(t, "cm")
	before := base.Encode(nil)
	a, b := base.GC.Nodes[0].Identity, base.GC.Nodes[1].Identity
	ops := []struct {
		name string
		do   func(s *State)
	}{
		{"put (replace)", func(s *State) { o := s.Objects[0]; o.RV++; s.put(o) }},
		{"put (insert)", func(s *State) { s.put(Object{UID: 99, Kind: cm, Namespace: DefaultNamespace, Name: "z"}) }},
		{"remove", func(s *State) { s.remove(s.Objects[1].UID) }},
		{"newUID", func(s *State) { s.newUID(UIDInfo{Kind: cm, Namespace: DefaultNamespace, Name: "a"}) }},
		{"ownNodes, putNode", func(s *State) {
			s.ownNodes()
			s.putNode(Node{Identity: Identity{Kind: "ConfigMap", Name: "v", UID: 98}, Virtual: true})
		}},
		{"enqueue", func(s *State) { s.GC.AttemptToDelete = s.enqueue(s.GC.AttemptToDelete, b.UID) }},
		{"enqueue twice, dequeue", func(s *State) {
			s.GC.AttemptToDelete = s.enqueue(s.enqueue(s.GC.AttemptToDelete, a.UID), b.UID)
			s.GC.AttemptToDelete = s.dequeue(s.GC.AttemptToDelete, a.UID)
		}},
		{"insertIdentity", func(s *State) { s.GC.AttemptToOrphan = s.insertIdentity(s.GC.AttemptToOrphan, 0, a) }},
		{"enqueueVirtualDeleteEvent", func(s *State) { s.enqueueVirtualDeleteEvent(b) }},
		{"addInFlight, ownInFlight", func(s *State) {
			s.addInFlight(InFlight{UID: b.UID, Writes: s.oneWrite(Write{Op: WriteDelete, Item: b})})
			s.ownInFlight()
		}},
		{"addUID, removeUID", func(s *State) {
			s.GC.Nodes[0].Dependents = s.addUID(s.GC.Nodes[0].Dependents, 97)
			s.GC.Nodes[0].Dependents = s.removeUID(s.GC.Nodes[0].Dependents, b.UID)
		}},
		{"push, setQueue", func(s *State) {
			s.push(&s.Controller.Watch, Added, &s.Objects[0])
			s.setQueue(&s.GC.Watch, cm, nil)
		}},
		{"cache, recache, uncache", func(s *State) {
			w := &s.GC.Watch
			s.cache(w, 0, Object{UID: 0, Kind: cm, Name: "first"})
			s.recache(w, 1, s.Objects[0])
			s.uncache(w, len(w.Cache)-1)
		}},
		{"uncacheKind", func(s *State) { s.uncacheKind(&s.GC.Watch, cm) }},
		{"absentOwnerCacheAdd", func(s *State) { s.absentOwnerCacheAdd(b); s.absentOwnerCacheAdd(a); s.absentOwnerCacheAdd(b) }},
	}
	for _, op := range ops {
		var got [2]*State
		for i, mem := range []memory{nil, &workspace{}} {
			s := base.Clone()
			s.mem = mem
			s.GC.Nodes = slices.Clone(s.GC.Nodes) // ops that write nodes in place own them
			pre := storeSlices(s)
			op.do(s)
			if string(base.Encode(nil)) != string(before) {
				t.Fatalf("%s changed the state it started from", op.name)
			}
			for j, sl := range storeSlices(s) {
				if built := sl.Len() > 0 && (pre[j].Len() == 0 || sl.Pointer() != pre[j].Pointer()); built && sl.Cap() != sl.Len() {
					t.Errorf("%s (memory %T): a new %s has capacity %d for length %d", op.name, mem, sl.Type(), sl.Cap(), sl.Len())
				}
			}
			s.mem = nil
			got[i] = s
		}
		if !reflect.DeepEqual(normalize(got[0]), normalize(got[1])) {
			t.Errorf("%s: the heap and the workspace give different states:\n%#v\n%#v", op.name, got[0], got[1])
		}
		if string(got[0].Encode(nil)) == string(before) {
			t.Errorf("%s changed nothing", op.name)
		}
	}
}

// storeSlices lists the slices of s that store.go builds.
func storeSlices(s *State) []reflect.Value {
	out := []reflect.Value{reflect.ValueOf(s.Objects), reflect.ValueOf(s.UIDs), reflect.ValueOf(s.GC.Nodes),
		reflect.ValueOf(s.GC.AttemptToDelete), reflect.ValueOf(s.GC.AttemptToOrphan), reflect.ValueOf(s.GC.VirtualEvents),
		reflect.ValueOf(s.GC.InFlight), reflect.ValueOf(s.GC.Absent), reflect.ValueOf(s.GC.Watch.Cache), reflect.ValueOf(s.Controller.Watch.Cache)}
	for _, w := range []*Watcher{&s.GC.Watch, &s.Controller.Watch} {
		for _, q := range w.queues() {
			out = append(out, reflect.ValueOf(q))
		}
	}
	for i := range s.GC.Nodes {
		out = append(out, reflect.ValueOf(s.GC.Nodes[i].Dependents))
	}
	return out
}
