package fuzz

import (
	"slices"
	"testing"

	"github.com/cascade-k8s/cascade/traces"

	"github.com/cascade-k8s/cascade/model"
)

// On upstream-stepped the generator takes at most MaxRetries passes in a
// row of a work item that requeues (here: an owner of a kind nobody
// serves, a restMappingError retried for ever), since the real GC's
// back-off between them doubles from 5 ms; a pass that does not requeue
// resets the count.
func TestUpstreamSteppedRetriesAreBounded(t *testing.T) {
	r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
	r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
	us := upstreamSystem{r: r, failures: map[string]int{}}
	r.sys = us
	apply := func(line string) (model.Step, *model.State) {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		next, _, err := r.m.Apply(r.s, st)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		r.s = next
		return st, next
	}
	// pod/b names an absent owner (a stale uid) and one of an unserved
	// kind: once the virtual owner's delete event reaches the graph, pod/b
	// is queued, and each pass fails on the unserved kind
	apply("create pod/a")
	apply("create pod/b owner=pod/a,uid=ghost-a owner=Frob/a,uid=frob")
	const pass = "gc attemptToDelete pod/b"
	for range 20 {
		en := r.m.Enabled(r.s, r.opts)
		if slices.ContainsFunc(en, func(st model.Step) bool { return st.String() == pass }) {
			break
		}
		i := slices.IndexFunc(en, func(st model.Step) bool { return st.Internal() })
		if i < 0 {
			t.Fatalf("nothing queues pod/b")
		}
		apply(en[i].String())
	}
	for i := range MaxRetries {
		st, err := model.ParseStep(pass)
		if err != nil {
			t.Fatal(err)
		}
		if !r.steppable(st) {
			t.Fatalf("pass %d of pod/b refused before %d requeues", i+1, MaxRetries)
		}
		st, next := apply(pass)
		us.count(st, next)
	}
	st, _ := model.ParseStep(pass)
	if r.steppable(st) {
		t.Fatalf("after %d requeues in a row pod/b's next pass is still drawn", MaxRetries)
	}
	other, _ := model.ParseStep("gc attemptToDelete pod/c")
	if !r.steppable(other) {
		t.Fatal("another item's pass is refused")
	}
}

// A pass the real GC takes without a request the proxy could hold is not
// drawn on upstream-stepped: that of a namespaced owner named by a
// cluster-scoped object (no namespace to GET it in), that of an object
// being deleted in the background, and that of an item whose node has
// left the graph (seed 2: the real worker had returned at once, without
// a GET, when the item was queued, its node being deleted then).
func TestUpstreamSteppedDrawsNoSilentPass(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []string
		pass  string
	}{
		{"namespaced owner of a cluster-scoped object", []string{"create cronjob/b", "create ns/b owner=cronjob/b", "gc deliver ns/b"}, "gc attemptToDelete cronjob//b"},
		{"an owner of a kind nobody serves", []string{"create pod/b owner=Frob/a,uid=frob", "gc deliver pod/b"}, "gc attemptToDelete Frob/default/a"},
		// the virtual owner's identity carries its dependent's namespace,
		// but its worker GETs the cluster-scoped pv/a, as the orphan
		// worker does (seed 2)
		{"queued for orphaning, its cluster-scoped key also a virtual owner's", []string{"create pv/a", "gc deliver pv/a", "create secret/ns3/b owner=pv/a,uid=ghost-c", "gc deliver secret/ns3/b", "delete pv/a propagation=Orphan", "gc deliver pv/a"}, "gc attemptToOrphan pv/a"},
		{"a virtual owner of a cluster-scoped key also queued for orphaning", []string{"create pv/a", "gc deliver pv/a", "create secret/ns3/b owner=pv/a,uid=ghost-c", "gc deliver secret/ns3/b", "delete pv/a propagation=Orphan", "gc deliver pv/a"}, "gc attemptToDelete pv/ns3/a"},
		{"queued in both work queues", []string{"create job/d owner=rs/c,uid=ghost-c", "create pod/p owner=job/d", "gc deliver job/d", "gc deliver pod/p", "gc attemptToDelete rs/c", "gc deliver-virtual rs/c", "delete job/d propagation=Orphan", "gc deliver job/d"}, "gc attemptToOrphan job/d"},
		{"being deleted in the background", []string{"create cm/a", "create pod/b finalizers=cascade.dev/hold owner=cm/a", "gc deliver cm/a", "gc deliver pod/b", "delete pod/b", "gc deliver pod/b", "delete cm/a", "gc deliver cm/a"}, "gc attemptToDelete pod/b"},
		// the real worker took cm/a when the blocking reference's removal
		// queued it, and returned at once (being deleted); the model's
		// pass finds the node gone from the graph and does nothing
		// secret/ns2/c names cm/a of default: its virtual node ConfigMap
		// ns2/a, queued, goes stale when cm/a's event replaces it; the
		// real worker's GET of ns2/a waits at the proxy (seed 3, run 25)
		{"a virtual node the observed object replaced", []string{"create cm/a", "create secret/ns2/c owner=cm/a", "gc deliver secret/ns2/c", "gc deliver cm/a"}, "gc attemptToDelete cm/ns2/a"},
		{"whose node has left the graph", []string{"create cm/a", "create pod/b owner=cm/a,block", "gc deliver cm/a", "gc deliver pod/b", "delete cm/a propagation=Orphan", "gc deliver cm/a", "gc attemptToOrphan cm/a", "gc deliver pod/b", "gc deliver cm/a"}, "gc attemptToDelete cm/a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
			r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
			r.sys = upstreamSystem{r: r, failures: map[string]int{}}
			for _, line := range c.steps {
				st, err := model.ParseStep(line)
				if err != nil {
					t.Fatal(err)
				}
				if r.s, _, err = r.m.Apply(r.s, st); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
			}
			i := slices.IndexFunc(r.m.Enabled(r.s, r.opts), func(st model.Step) bool { return st.String() == c.pass })
			if i < 0 {
				t.Fatalf("the model does not offer %q", c.pass)
			}
			if r.steppable(r.m.Enabled(r.s, r.opts)[i]) {
				t.Fatalf("%q is drawn on upstream-stepped", c.pass)
			}
		})
	}
}

// The last steps of runs `cascade fuzz --target upstream-stepped`
// diverged on before are not drawn on upstream-stepped (each trace's last
// stanza is the pass):
//   - upstream-stepped-same-key.trace (--seed 2): two work items of one
//     key, a virtual owner named by a UID from another namespace and the
//     object of that name; their workers' first GETs are one request at
//     the proxy
//   - upstream-stepped-stale-virtual.trace (--seed 3, run 25): the
//     virtual rs/ns2/a, which rs/a's event replaced in the graph; the
//     model's pass does nothing, the real worker's GET waits at the proxy
func TestUpstreamSteppedDrawsNoPassOfDivergedRuns(t *testing.T) {
	for _, file := range []string{"testdata/upstream-stepped-same-key.trace", "testdata/upstream-stepped-stale-virtual.trace"} {
		t.Run(file, func(t *testing.T) {
			tr, err := traces.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
			r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
			r.sys = upstreamSystem{r: r, failures: map[string]int{}}
			var last model.Step
			for i, st := range tr.Stanzas {
				for _, c := range st.Commands {
					if i == len(tr.Stanzas)-1 {
						last = c.Step
						continue
					}
					if next, _, err := r.m.Apply(r.s, c.Step); err == nil {
						r.s = next
					}
				}
			}
			if !slices.ContainsFunc(r.m.Enabled(r.s, r.opts), func(st model.Step) bool { return st.String() == last.String() }) {
				t.Fatalf("the model does not offer %q", last)
			}
			if r.steppable(last) {
				t.Fatalf("%q is drawn on upstream-stepped", last)
			}
		})
	}
}

// A pass whose write fails (a DELETE the deletion-protection webhook
// denies) ends in a requeue too, and counts toward MaxRetries: the
// attemptToDelete step that put the DELETE in flight does not end the
// pass, the send does. (The count was reset by every attemptToDelete
// step that decided a write, while the real GC's back-off doubled with
// each denied DELETE until, after 11, the next pass came later than the
// step bound; seed 1.)
func TestUpstreamSteppedRetriesCountFailedWrites(t *testing.T) {
	r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
	r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
	us := upstreamSystem{r: r, failures: map[string]int{}}
	r.sys = us
	take := func(line string) {
		t.Helper()
		i := slices.IndexFunc(r.m.Enabled(r.s, r.opts), func(st model.Step) bool { return st.String() == line })
		if i < 0 {
			t.Fatalf("the model does not offer %q", line)
		}
		st := r.m.Enabled(r.s, r.opts)[i]
		if !r.steppable(st) {
			t.Fatalf("%q is not drawn", line)
		}
		next, _, err := r.m.Apply(r.s, st)
		if err != nil {
			t.Fatal(err)
		}
		r.s = next
		us.count(st, next)
	}
	apply := func(line string) {
		t.Helper()
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.s, _, err = r.m.Apply(r.s, st); err != nil {
			t.Fatal(err)
		}
	}
	apply("create pod/a labels=policy.kruise.io/delete-protection=Always owner=cm/x,uid=ghost-x")
	take("gc deliver pod/a")
	take("gc attemptToDelete cm/x")
	apply("gc deliver-virtual cm/x") // the model's eager step
	for range MaxRetries {
		take("gc attemptToDelete pod/a")
		take("gc delete pod/a")
	}
	st, err := model.ParseStep("gc attemptToDelete pod/a")
	if err != nil {
		t.Fatal(err)
	}
	if r.steppable(st) {
		t.Fatalf("after %d denied DELETEs in a row pod/a's next pass is still drawn", MaxRetries)
	}
}

// A delivery that queues again an item already queued for attemptToDelete
// is not drawn on upstream-stepped: the real GC's idle worker took the
// item from the queue when it was first queued and waits on its GET at
// the proxy, so the workqueue marks the item dirty and hands it out once
// more after the pass, where the model's queue, a set, absorbs the add.
// The run is `cascade fuzz --target upstream-stepped --seed 1`'s run 18
// (testdata/upstream-stepped-readd.trace): pod/ns3/b's deletion event
// queued its dependent pv/a, queued already, and the real GC's second
// pass of pv/a took the GET the model's next step released.
func TestUpstreamSteppedDrawsNoDeliveryThatQueuesAgain(t *testing.T) {
	tr, err := traces.ParseFile("testdata/upstream-stepped-readd.trace")
	if err != nil {
		t.Fatal(err)
	}
	r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
	r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
	r.sys = upstreamSystem{r: r, failures: map[string]int{}}
	delivers := 0
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if c.Text == "gc deliver pod/ns3/b" {
				if delivers++; delivers == 3 {
					if !slices.ContainsFunc(r.s.GC.AttemptToDelete, func(id model.Identity) bool { return id.Kind == "PersistentVolume" && id.Name == "a" }) {
						t.Fatal("pv/a is not queued before pod/ns3/b's deletion event")
					}
					if r.steppable(c.Step) {
						t.Fatalf("%q, which queues pv/a again, is drawn on upstream-stepped", c.Text)
					}
					return
				}
			}
			if next, _, err := r.m.Apply(r.s, c.Step); err == nil {
				r.s = next
			}
		}
	}
	t.Fatal("the trace has no third delivery of pod/ns3/b")
}

// A pass of a virtual owner whose virtual delete event queues again a
// dependent queued already is not drawn either: the model takes that
// event on its own right after the pass, and the real GC's worker of the
// dependent holds it. (`cascade fuzz --target upstream-stepped --seed 3`,
// run 4: cronjob/ns3/b's virtual delete event queued cm/ns3/b again, and
// the real GC's second pass of cm/ns3/b sent a DELETE the model has no
// pass for.) A pass of a virtual owner whose dependent is not queued is
// drawn.
func TestUpstreamSteppedDrawsNoPassWhoseVirtualEventQueuesAgain(t *testing.T) {
	r := &steppedRun{env: SteppedEnv{Steppable: steppable}}
	r.lockstep = lockstep{m: &model.Model{}, s: model.NewState()}
	r.sys = upstreamSystem{r: r, failures: map[string]int{}}
	for _, line := range []string{"create cm/a owner=cronjob/b,uid=ghost-b owner=cronjob/c,uid=ghost-c", "gc deliver cm/a", "gc attemptToDelete cronjob/c", "gc deliver-virtual cronjob/c"} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.s, _, err = r.m.Apply(r.s, st); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	if !slices.ContainsFunc(r.s.GC.AttemptToDelete, func(id model.Identity) bool { return id.Kind == "ConfigMap" && id.Name == "a" }) {
		t.Fatal("cm/a is not queued after cronjob/c's virtual delete event")
	}
	st, err := model.ParseStep("gc attemptToDelete cronjob/b")
	if err != nil {
		t.Fatal(err)
	}
	if r.steppable(st) {
		t.Fatal(`"gc attemptToDelete cronjob/b", whose virtual delete event queues cm/a again, is drawn`)
	}
	r.s = model.NewState()
	for _, line := range []string{"create cm/a owner=cronjob/b,uid=ghost-b", "gc deliver cm/a"} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.s, _, err = r.m.Apply(r.s, st); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	if !r.steppable(st) {
		t.Fatal(`"gc attemptToDelete cronjob/b" is not drawn while cm/a is not queued`)
	}
}
