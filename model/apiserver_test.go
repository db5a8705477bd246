package model

import (
	"slices"
	"strings"
	"testing"
)

// run applies trace commands to a fresh state, failing on any command
// that cannot be taken, and returns the state and each request's result.
func run(t *testing.T, m *Model, cmds ...string) (*State, []Result) {
	t.Helper()
	s := NewState()
	var rs []Result
	for _, c := range cmds {
		st, err := ParseStep(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var r Result
		s, r, err = m.Apply(s, st)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		rs = append(rs, r)
	}
	return s, rs
}

func obj(t *testing.T, s *State, key string) *Object {
	t.Helper()
	tg, err := parseKey(token{key, 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	return s.Lookup(tg.Kind, tg.Namespace, tg.Name)
}

// TestDeleteFinalizerChoice pins deletionFinalizersForGarbageCollection:
// which GC finalizer a delete leaves, from the request and the object's
// existing finalizers, with the kind default last.
func TestDeleteFinalizerChoice(t *testing.T) {
	cases := []struct {
		name, create, delete string
		want                 []string // nil: removed from storage
	}{
		{"background removes at once", "create cm/x", "delete cm/x propagation=Background", nil},
		{"no policy on a plain kind is background", "create cm/x", "delete cm/x", nil},
		{"foreground adds foregroundDeletion", "create cm/x", "delete cm/x propagation=Foreground", []string{FinalizerForeground}},
		{"orphan adds orphan", "create cm/x", "delete cm/x propagation=Orphan", []string{FinalizerOrphan}},
		{"orphanDependents=true orphans", "create cm/x", "delete cm/x orphan=true", []string{FinalizerOrphan}},
		{"orphanDependents=false is background, never foreground", "create cm/x", "delete cm/x orphan=false", nil},
		{"rc defaults to orphan", "create rc/x", "delete rc/x", []string{FinalizerOrphan}},
		{"job defaults to orphan", "create job/x", "delete job/x", []string{FinalizerOrphan}},
		{"deployment defaults to background", "create deploy/x", "delete deploy/x", nil},
		{"explicit background overrides the rc default", "create rc/x", "delete rc/x propagation=Background", nil},
		{"existing orphan finalizer is honoured without a policy", "create cm/x finalizers=orphan", "delete cm/x", []string{FinalizerOrphan}},
		{"existing foregroundDeletion is honoured without a policy", "create cm/x finalizers=foregroundDeletion", "delete cm/x", []string{FinalizerForeground}},
		{"explicit background removes an existing orphan", "create cm/x finalizers=a.io/b,orphan", "delete cm/x propagation=Background", []string{"a.io/b"}},
		{"explicit orphan replaces foregroundDeletion", "create cm/x finalizers=foregroundDeletion,a.io/b", "delete cm/x propagation=Orphan", []string{"a.io/b", FinalizerOrphan}},
		{"events never get GC finalizers", "create event/e finalizers=a.io/b", "delete event/e propagation=Orphan", []string{"a.io/b"}},
		{"namespace orphanDependents=false is foreground", "create ns/n", "delete ns/n orphan=false", []string{FinalizerForeground, FinalizerNamespace}},
		{"namespace always keeps spec.finalizers", "create ns/n", "delete ns/n", []string{FinalizerNamespace}},
		{"crd keeps its cleanup finalizer", "create crd/widgets.cascade.dev", "delete crd/widgets.cascade.dev", []string{FinalizerCRDCleanup}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, rs := run(t, &Model{}, c.create, c.delete)
			if !rs[1].OK() {
				t.Fatalf("delete failed: %v", rs[1])
			}
			o := obj(t, s, strings.Fields(c.create)[1])
			switch {
			case c.want == nil && o != nil:
				t.Fatalf("object kept with finalizers %v, want it removed", o.Finalizers)
			case c.want != nil && o == nil:
				t.Fatalf("object removed, want finalizers %v", c.want)
			case c.want != nil && (!slices.Equal(o.Finalizers, c.want) || !o.Deleting):
				t.Fatalf("finalizers %v deleting=%v, want %v deleting", o.Finalizers, o.Deleting, c.want)
			}
		})
	}
}

// TestRequestErrors pins the status code of each refused request.
func TestRequestErrors(t *testing.T) {
	cases := []struct {
		name  string
		setup []string
		cmd   string
		code  int
		msg   string
	}{
		{"orphanDependents and propagationPolicy together", []string{"create cm/x"}, "delete cm/x orphan=true propagation=Orphan", 422, "cannot be both set"},
		{"uid precondition", []string{"create cm/x"}, "delete cm/x if-uid=other", 409, "UID in the precondition"},
		{"resourceVersion precondition", []string{"create cm/x"}, "delete cm/x if-rv=9", 409, "ResourceVersion in the precondition"},
		{"delete of a missing object", nil, "delete cm/x", 404, "not found"},
		{"create twice", []string{"create cm/x"}, "create cm/x", 409, "already exists"},
		{"both GC finalizers", nil, "create cm/x finalizers=orphan,foregroundDeletion", 422, "cannot be both set"},
		{"unqualified finalizer on a built-in kind", nil, "create cm/x finalizers=nope", 422, "fully qualified"},
		{"two controllers", []string{"create cm/a", "create cm/b"}, "create cm/x owner=cm/a,controller owner=cm/b,controller", 422, "Only one reference"},
		{"event as owner", nil, "create cm/x owner=event/e,uid=e", 422, "disallowed from being an owner"},
		{"empty owner uid", []string{"create cm/a"}, "create cm/x owner=cm/a,uid=", 422, "uid: must not be empty"},
		{"new finalizer once deleting", []string{"create cm/x finalizers=a.io/b", "delete cm/x"}, "add-finalizer cm/x a.io/c", 422, "no new finalizers"},
		{"blockOwnerDeletion without finalizers permission", []string{"create cm/a"}, "create cm/x owner=cm/a,block as=limited", 403, "can't set finalizers"},
		{"update with a stale resourceVersion", []string{"create cm/x"}, "label cm/x a=b if-rv=5", 409, "modified"},
		{"custom resource without its CRD", nil, "create widget/w", 404, "could not find the requested resource"},
		{"custom resource while its CRD terminates", []string{"create crd/widgets.cascade.dev", "delete crd/widgets.cascade.dev"}, "create widget/w", 403, "create not allowed while custom resource definition is terminating"},
		{"object in a terminating namespace", []string{"create ns/n", "delete ns/n"}, "create cm/n/x", 403, "being terminated"},
		{"protection Always", []string{"create cm/x labels=policy.kruise.io/delete-protection=Always"}, "delete cm/x", 403, "denied the request"},
		{"protection Cascading with replicas", []string{"create rs/x replicas=1 labels=policy.kruise.io/delete-protection=Cascading"}, "delete rs/x", 403, "1 active dependents"},
		{"protection Cascading with owned objects", []string{"create cm/x labels=policy.kruise.io/delete-protection=Cascading", "create cm/y owner=cm/x"}, "delete cm/x", 403, "1 active dependents"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, rs := run(t, &Model{}, append(c.setup, c.cmd)...)
			for i, r := range rs[:len(rs)-1] {
				if !r.OK() {
					t.Fatalf("setup %q failed: %v", c.setup[i], r)
				}
			}
			r := rs[len(rs)-1]
			if r.Code != c.code || !strings.Contains(r.Message, c.msg) {
				t.Fatalf("got %v, want %d containing %q", r, c.code, c.msg)
			}
		})
	}
}

// TestEmptyingFinalizersRemoves: an update that removes the last
// finalizer of a terminating object removes it (ShouldDeleteDuringUpdate);
// on a live object it does not.
func TestEmptyingFinalizersRemoves(t *testing.T) {
	s, _ := run(t, &Model{}, "create cm/x finalizers=a.io/b", "create cm/y finalizers=a.io/b", "delete cm/x", "remove-finalizer cm/x a.io/b", "remove-finalizer cm/y a.io/b")
	if obj(t, s, "cm/x") != nil {
		t.Fatal("terminating cm/x survived losing its last finalizer")
	}
	if y := obj(t, s, "cm/y"); y == nil || y.Deleting {
		t.Fatal("live cm/y must stay live when its finalizers are emptied")
	}
}

// TestDryRunChangesNothing: a dry-run delete answers but leaves the state
// exactly as it was.
func TestDryRunChangesNothing(t *testing.T) {
	m := &Model{}
	s, _ := run(t, m, "create cm/x")
	st, _ := ParseStep("delete cm/x propagation=Foreground dry-run")
	n, r, err := m.Apply(s, st)
	if err != nil || !r.OK() {
		t.Fatalf("dry run: %v %v", r, err)
	}
	if !n.Equal(s) {
		t.Fatal("dry-run delete changed the state")
	}
}

// TestWatchFanOut: each change queues one event per watcher of its kind;
// events are not watched by the GC, and the controller watches only the
// kinds it adopts and adopts for.
func TestWatchFanOut(t *testing.T) {
	s, _ := run(t, &Model{}, "create pod/p", "create cm/c", "create event/e", "label pod/p a=b")
	pod, _ := KindByShort("pod")
	cm, _ := KindByShort("cm")
	ev, _ := KindByShort("event")
	if got := len(s.GC.Watch.queue(pod)); got != 2 {
		t.Errorf("gc pod queue has %d events, want 2 (add, update)", got)
	}
	if got := len(s.GC.Watch.queue(ev)); got != 0 {
		t.Errorf("gc event queue has %d events, want 0: the GC ignores events", got)
	}
	if got := len(s.Controller.Watch.queue(cm)); got != 0 {
		t.Errorf("controller configmap queue has %d events, want 0", got)
	}
	if got := len(s.Controller.Watch.queue(pod)); got != 2 {
		t.Errorf("controller pod queue has %d events, want 2", got)
	}
}

// TestCoalesce: a relist may skip an event that a later one supersedes,
// or the delete of an object this informer never saw, and nothing else.
func TestCoalesce(t *testing.T) {
	s, _ := run(t, &Model{}, "create cm/a", "create cm/b", "label cm/a x=y")
	cm, _ := KindByShort("cm")
	if !s.GC.Watch.canCoalesce(cm) {
		t.Fatal("the add of cm/a is superseded by its update and may be skipped")
	}
	s.coalesce(&s.GC.Watch, cm)
	if s.GC.Watch.canCoalesce(cm) {
		t.Fatal("the add of cm/b is the last word on cm/b and may not be skipped")
	}
}

// TestDeleteWatchEvents pins the watch events a request sequence queues
// for the GC, as kube-apiserver v1.36 emitted them to a pod watch (checked
// against a real server): a Pod's first DELETE goes the graceful way
// (CheckGracefulDelete, then Store.Delete's
// updateForGracefulDeletionAndFinalizers) and stores deletionTimestamp
// before it deletes, even when nothing holds the pod; a pod already being
// deleted, and every non-graceful kind, goes in one DELETED.
func TestDeleteWatchEvents(t *testing.T) {
	cases := []struct {
		name string
		cmds []string
		want []string // type and deletionTimestamp of each queued event
	}{
		{"pod without finalizers", []string{"create pod/a", "delete pod/a"},
			[]string{"added live", "modified deleting", "deleted deleting"}},
		{"pod, background", []string{"create pod/a", "delete pod/a propagation=Background"},
			[]string{"added live", "modified deleting", "deleted deleting"}},
		{"pod, dry run", []string{"create pod/a", "delete pod/a dry-run", "delete pod/a propagation=Foreground dry-run"},
			[]string{"added live"}},
		{"pod whose orphan finalizer a background delete drops", []string{"create pod/a finalizers=orphan", "delete pod/a propagation=Background"},
			[]string{"added live", "modified deleting", "deleted deleting"}},
		{"pod, foreground", []string{"create pod/a", "delete pod/a propagation=Foreground"},
			[]string{"added live", "modified deleting"}},
		{"deleting pod whose last finalizer a delete drops", []string{"create pod/a", "delete pod/a propagation=Orphan", "delete pod/a propagation=Background"},
			[]string{"added live", "modified deleting", "deleted deleting"}},
		{"deleting pod whose last finalizer an update drops", []string{"create pod/a finalizers=a.io/b", "delete pod/a", "remove-finalizer pod/a a.io/b"},
			[]string{"added live", "modified deleting", "deleted deleting"}},
		{"configmap", []string{"create cm/a", "delete cm/a"},
			[]string{"added live", "deleted live"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := run(t, &Model{}, c.cmds...)
			var got []string
			for _, e := range s.GC.Watch.Events() {
				state := "live"
				if e.Obj.Deleting {
					state = "deleting"
				}
				got = append(got, [...]string{"added", "modified", "deleted"}[e.Type]+" "+state)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("events %v, want %v", got, c.want)
			}
		})
	}
}

// A Namespace's finalizers dump sorted: the Namespace registry's Delete
// rebuilds them from a map when it adds or drops a GC finalizer, so a
// real server may answer either order; other kinds keep theirs.
func TestDumpFinalizersNamespaceOrder(t *testing.T) {
	ns, _ := KindByShort("ns")
	cm, _ := KindByShort("cm")
	fs := []string{"z.dev/hold", FinalizerForeground}
	if got, want := DumpFinalizers(ns, fs), " finalizers=[foregroundDeletion z.dev/hold]"; got != want {
		t.Errorf("namespace: %q, want %q", got, want)
	}
	if got, want := DumpFinalizers(cm, fs), " finalizers=[z.dev/hold foregroundDeletion]"; got != want {
		t.Errorf("configmap: %q, want %q", got, want)
	}
	if fs[0] != "z.dev/hold" {
		t.Error("DumpFinalizers reordered its argument")
	}
}
