package model

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestGraphBuilderVirtualNode: a dependent observed before its owner makes
// a virtual owner node in the dependent's namespace and queues it for
// verification; observing the owner marks the node observed.
func TestGraphBuilderVirtualNode(t *testing.T) {
	s, _ := run(t, &Model{}, "create secret/owner", "create cm/dep owner=secret/owner", "gc deliver cm/dep")
	owner := s.Lookup(kind(t, "secret"), DefaultNamespace, "owner")
	n := s.GC.Node(owner.UID)
	if n == nil || !n.Virtual || n.Namespace != DefaultNamespace {
		t.Fatalf("want a virtual node for the owner in the dependent's namespace, got %+v", n)
	}
	if len(s.GC.AttemptToDelete) != 1 || s.GC.AttemptToDelete[0].UID != owner.UID {
		t.Fatalf("the virtual node must be queued for verification, queue is %v", s.GC.AttemptToDelete)
	}
	s, _, _ = (&Model{}).Apply(s, mustStep(t, "gc deliver secret/owner"))
	if n := s.GC.Node(owner.UID); n.Virtual {
		t.Fatal("observing the owner must mark its node observed")
	}
}

// TestAttemptToDeleteSplitsGetAndWrite: attemptToDelete decides from live
// GETs and leaves the DELETE in flight, carrying the resourceVersion it
// classified; a change in between makes the DELETE fail with 409.
func TestAttemptToDeleteSplitsGetAndWrite(t *testing.T) {
	m := &Model{}
	s, _ := run(t, m, "create secret/owner", "create cm/dep owner=secret/owner", "gc deliver secret/owner", "gc deliver cm/dep", "delete secret/owner", "gc deliver secret/owner", "gc attemptToDelete cm/dep")
	if len(s.GC.InFlight) != 1 || s.GC.InFlight[0].Writes[0].Op != WriteDelete || s.GC.InFlight[0].Writes[0].RV != 1 {
		t.Fatalf("want one DELETE in flight with resourceVersion 1, got %+v", s.GC.InFlight)
	}
	s, r, err := m.Apply(s, mustStep(t, "label cm/dep touched=yes"))
	if err != nil || !r.OK() {
		t.Fatal(r, err)
	}
	s, r, err = m.Apply(s, mustStep(t, "gc delete cm/dep"))
	if err != nil {
		t.Fatal(err)
	}
	// the ownerReferences did not change, so deleteObject retries with
	// the UID precondition alone and succeeds
	if !r.OK() || s.Lookup(kind(t, "cm"), DefaultNamespace, "dep") != nil {
		t.Fatalf("an unrelated update must not starve the GC: %v", r)
	}
}

// TestStepTextRoundTrip: every step Enabled offers, and every client step
// in the traces' vocabulary, prints in a form ParseStep reads back.
func TestStepTextRoundTrip(t *testing.T) {
	for _, line := range []string{
		"create deploy/web labels=a=1,b=2 selector=app=web replicas=2 finalizers=a.io/x,orphan owner=cm/o,controller,block owner=UnknownKind/u,uid=ghost as=limited",
		"delete cm/ns2/x propagation=Foreground if-uid=cm/x#2 if-rv=3 dry-run",
		"delete rc/x orphan=false",
		"add-finalizer cm/x a.io/b if-rv=2",
		"remove-owner cm/x cm/o",
		"add-owner cm/x pv/disk,block",
		"create cm/x owner=cm/o,controller=unset,block=unset owner=cm/p,controller,block=unset",
		"label cm/x a=b", "unlabel cm/x a", "scale rs/x 3",
		"gc attemptToDelete pv/ns1/disk", "gc unblock cm/a uid=cm/a#2", "gc deliver-virtual UnknownKind/x",
		"controller adopt rs/r by=deploy/d", "apiextensions cleanup crd/widgets.cascade.dev",
	} {
		st := mustStep(t, line)
		if got := st.String(); got != line {
			t.Errorf("ParseStep(%q).String() = %q", line, got)
		}
	}
	// random walks over a small scope: every enabled step round-trips
	m := &Model{Bugs: BugSet(0).With(BugLostFirstUpdate)}
	rng := rand.New(rand.NewPCG(1, 2))
	for walk := 0; walk < 50; walk++ {
		s, _ := run(t, m, "create deploy/d selector=app=a", "create rs/r labels=app=a owner=deploy/d,controller,block", "create pv/p", "create cm/c owner=pv/p owner=rs/r,block")
		for _, c := range []string{"delete deploy/d propagation=Orphan", "delete rs/r propagation=Foreground", "delete pv/p"}[rng.IntN(3):] {
			s, _, _ = m.Apply(s, mustStep(t, c))
		}
		for i := 0; i < 40; i++ {
			steps := m.Enabled(s, Options{Coalesce: true})
			if len(steps) == 0 {
				break
			}
			for _, st := range steps {
				back, err := ParseStep(st.String())
				if err != nil || !reflect.DeepEqual(back, st) {
					t.Fatalf("step %q does not round-trip: %+v vs %+v (%v)", st.String(), back, st, err)
				}
			}
			var err error
			s, _, err = m.Apply(s, steps[rng.IntN(len(steps))])
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestApplyIsPure: Apply and Canonical never change the state they are
// given (states share copy-on-write slices, so a write in place would
// corrupt siblings), and the same step from equal states gives equal
// states. Random walks over a scope that exercises every actor.
func TestApplyIsPure(t *testing.T) {
	m := &Model{}
	rng := rand.New(rand.NewPCG(3, 4))
	clients := []string{"delete rc/o propagation=Foreground", "delete rc/o propagation=Orphan", "delete deploy/d propagation=Orphan",
		"delete pv/v", "remove-finalizer pod/p a.io/h", "label pod/p x=y", "delete crd/widgets.cascade.dev", "create pod/q labels=app=a"}
	for walk := 0; walk < 40; walk++ {
		s, _ := run(t, m, "create crd/widgets.cascade.dev", "create widget/w", "create rc/o", "create deploy/d selector=app=a",
			"create pod/p finalizers=a.io/h labels=app=a owner=rc/o,block", "create pv/v", "create cm/ns1/c owner=pv/v owner=widget/w,uid=widget/w")
		for i := 0; i < 60; i++ {
			steps := m.Enabled(s, Options{Coalesce: true})
			for _, c := range clients {
				steps = append(steps, mustStep(t, c))
			}
			before := string(s.Encode(nil))
			var next *State
			for j, st := range steps {
				a, _, err := m.Apply(s, st)
				if err != nil {
					if j < len(steps)-len(clients) {
						t.Fatalf("enabled step %s: %v", st, err)
					}
					continue
				}
				b, _, _ := m.Apply(s, st)
				_ = a.Canonical()
				if string(s.Encode(nil)) != before {
					t.Fatalf("%s modified its input state", st)
				}
				if !a.Equal(b) {
					t.Fatalf("%s is not deterministic", st)
				}
				if next == nil || rng.IntN(len(steps)) == 0 {
					next = a
				}
			}
			if next == nil {
				break
			}
			s = next
		}
	}
}

// TestSyntaxErrorColumns: parse errors point at the offending token.
func TestSyntaxErrorColumns(t *testing.T) {
	cases := []struct {
		line string
		col  int
	}{
		{"frobnicate cm/x", 1},
		{"create cm/x colour=red", 13},
		{"create nope/x", 8},
		{"delete cm/x propagation=Sideways", 13},
		{"create cm/x owner=cm/o,sideways", 24},
		{"gc attemptToDestroy cm/x", 4},
		{"create pv/ns/x", 8},
	}
	for _, c := range cases {
		_, err := ParseStep(c.line)
		se, ok := err.(*SyntaxError)
		if !ok || se.Col != c.col {
			t.Errorf("ParseStep(%q) = %v, want a syntax error at column %d", c.line, err, c.col)
		}
	}
}

func mustStep(t *testing.T, line string) Step {
	t.Helper()
	st, err := ParseStep(line)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return st
}

func kind(t *testing.T, short string) KindID {
	k, ok := KindByShort(short)
	if !ok {
		t.Fatal(short)
	}
	return k
}

// TestCanonicalMergesCreationOrders: creating the same objects in either
// order gives states that differ only in UIDs, and Canonical makes them
// equal; states that differ otherwise stay apart.
func TestCanonicalMergesCreationOrders(t *testing.T) {
	m := &Model{}
	a, _ := run(t, m, "create cm/a", "create cm/b owner=cm/a,block", "gc deliver cm/a")
	b, _ := run(t, m, "create cm/a", "create cm/b owner=cm/a,block", "gc deliver cm/a")
	if !a.Canonical().Equal(b.Canonical()) {
		t.Fatal("identical histories must canonicalise equally")
	}
	x, _ := run(t, m, "create secret/s", "create cm/c owner=secret/s")
	y, _ := run(t, m, "create cm/c owner=secret/s,uid=later", "create secret/s")
	if x.Equal(y) {
		t.Fatal("test setup: x and y should differ")
	}
	p, _ := run(t, m, "create secret/s", "create cm/c")
	q, _ := run(t, m, "create cm/c", "create secret/s")
	if p.Equal(q) {
		t.Fatal("different creation orders must give different raw states")
	}
	// the GC queues hold the same events per kind in both, so after
	// renaming the states coincide
	if !p.Canonical().Equal(q.Canonical()) {
		t.Fatal("creation order alone must not distinguish canonical states")
	}
	if p.Canonical().Equal(x.Canonical()) {
		t.Fatal("states with different ownerReferences must stay distinct")
	}
}

// TestOrphanThroughRemovedNode: an owner's orphan deletion is withdrawn
// by a Background DELETE and its DELETED event removes its node while the
// orphan work item is queued. As upstream, whose queue holds the *node,
// attemptToOrphan still orphans the dependents the node had then
// (GC.Detached), which the state encodes, decodes and canonicalizes; the
// item leaves nothing behind.
func TestOrphanThroughRemovedNode(t *testing.T) {
	m := &Model{}
	s, _ := run(t, m, "create cm/other", "create cm/owner", "create cm/dep owner=cm/owner", "create cm/dep2 owner=cm/owner")
	s, _, err := m.Settle(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"delete cm/owner propagation=Orphan", "delete cm/owner propagation=Background", "gc deliver cm/owner", "gc deliver cm/owner"} {
		if s, _, err = m.Apply(s, mustStep(t, c)); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	if len(s.GC.Detached) != 1 || len(s.GC.Detached[0].Dependents) != 2 {
		t.Fatalf("detached %+v, want the owner with its two dependents", s.GC.Detached)
	}
	for _, c := range []*State{s, s.Canonical()} {
		back, err := Decode(c.Encode(nil))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(back), normalize(c)) {
			t.Fatalf("decoded state differs:\n%#v\n%#v", back.GC.Detached, c.GC.Detached)
		}
	}
	if s, _, err = m.Apply(s, mustStep(t, "gc attemptToOrphan cm/owner")); err != nil {
		t.Fatal(err)
	}
	if len(s.GC.Detached) != 0 || len(s.GC.AttemptToOrphan) != 0 {
		t.Fatalf("the orphan item left %+v %+v", s.GC.Detached, s.GC.AttemptToOrphan)
	}
	s, _, err = m.Settle(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cm/dep live", "cm/dep2 live", "cm/other live", "cm/owner gone"}
	if got := s.Dump(); !reflect.DeepEqual(got, want) {
		t.Fatalf("settled:\n%v\nwant\n%v", got, want)
	}
}
