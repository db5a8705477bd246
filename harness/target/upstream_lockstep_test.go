package target

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/model"
)

// While one item's attemptToDelete step lasts, the proxy lets through
// the GETs of its owners (isDangling) and not another item's first GET:
// a worker retrying on its back-off timer sends that GET whenever the
// timer fires, and it must wait for its own item's step. (The window used
// to admit every GET but the item's own, and a retry that slipped through
// left the model's next attemptToDelete of that item with no GET to
// release.)
func TestAttemptToDeleteAdmitsOnlyOwnerGETs(t *testing.T) {
	d := offlineDriver(t)
	_, s := modelAfter(t, "create deploy/a", "create pv/p", "create deploy/b owner=deploy/a owner=pv/p owner=Frob/x,uid=frob", "create sts/c")
	u := upstreamStepped{d: d}
	st, err := model.ParseStep("gc attemptToDelete deploy/b")
	if err != nil {
		t.Fatal(err)
	}
	o, err := u.object(st)
	if err != nil {
		t.Fatal(err)
	}
	owners := u.owners(st, s)
	if len(owners) != 2 {
		t.Fatalf("owners of deploy/b: want deploy/a and pv/p (Frob is unserved), got %v", owners)
	}
	admits := attemptWindow(o, owners, false, nil)
	get := func(group, resource, ns, name string) proxy.Request {
		return proxy.Request{Call: proxy.Call{Verb: proxy.VerbGet, Group: group, Resource: resource, Namespace: ns, Name: name}, Client: proxy.GarbageCollectorClient}
	}
	for _, c := range []struct {
		r    proxy.Request
		want bool
	}{
		{get("apps", "deployments", "cascade-t1-default", "a"), true},
		{get("", "persistentvolumes", "", "cascade-t1-p"), true},
		{get("apps", "statefulsets", "cascade-t1-default", "c"), false},
		{get("apps", "deployments", "cascade-t1-default", "b"), false},
		{proxy.Request{Call: proxy.Call{Verb: proxy.VerbDelete, Group: "apps", Resource: "deployments", Namespace: "cascade-t1-default", Name: "a"}, Client: proxy.GarbageCollectorClient}, false},
	} {
		if got := admits(c.r); got != c.want {
			t.Errorf("%s: admitted %v, want %v", proxy.DescribeRequest(c.r), got, c.want)
		}
	}
}

// A virtual owner's attemptToDelete step lets no GET through: the real
// worker's GET of the owner's key finds another object (or none), it
// queues a virtual delete event and sends nothing else. When the virtual
// owner names its own dependent's key (an ownerReference to cm/c with
// another UID, on cm/c), that dependent is queued by the virtual delete
// event within the step, and its worker's first GET, of the same key,
// must wait for the dependent's own step. (The window used to admit the
// GETs of the owners of the object of the step's key, here cm/c itself:
// the dependent's pass slipped through and its DELETE was held where the
// model expects no write; `cascade fuzz --target upstream-stepped --seed
// 1`, run 7.)
func TestVirtualOwnerAttemptAdmitsNoGET(t *testing.T) {
	d := offlineDriver(t)
	_, s := modelAfter(t, "create cm/c", "gc deliver cm/c", "add-owner cm/c cm/c,block,uid=ghost-c", "gc deliver cm/c")
	if ghost, ok := s.UIDBySymbol("ghost-c"); !ok || len(s.GC.AttemptToDelete) != 1 || s.GC.AttemptToDelete[0].UID != ghost {
		t.Fatalf("the model's attemptToDelete queue: want the virtual owner ghost-c alone, got %v", s.GC.AttemptToDelete)
	}
	u := upstreamStepped{d: d}
	st, err := model.ParseStep("gc attemptToDelete cm/c")
	if err != nil {
		t.Fatal(err)
	}
	o, err := u.object(st)
	if err != nil {
		t.Fatal(err)
	}
	if owners := u.owners(st, s); len(owners) != 0 {
		t.Fatalf("owners GETs of the virtual owner's pass: want none, got %v", owners)
	}
	dependentGET := proxy.Request{Call: proxy.Call{Verb: proxy.VerbGet, Resource: "configmaps", Namespace: "cascade-t1-default", Name: "c"}, Client: proxy.GarbageCollectorClient}
	if attemptWindow(o, u.owners(st, s), false, nil)(dependentGET) {
		t.Errorf("the virtual owner's pass admits %s, the dependent's first GET", proxy.DescribeRequest(dependentGET))
	}
}

// A `gc unblock|patch|delete` step releases the write its attemptToDelete
// step saw held, not another worker's write of the same object and verb
// held beside it: the orphan worker PATCHes the dependents of an owner
// whose orphan deletion reached the graph builder at once, and the proxy
// holds that PATCH too. (The step used to release the first held PATCH
// of the object, the orphan worker's, and then waited in vain for the
// DELETE that follows the unblock; seed 2 at its final settle.)
func TestSendReleasesTheDecidedWrite(t *testing.T) {
	d := offlineDriver(t)
	st := heldStepper(t, nil)
	ctx := context.Background()
	// the GC's client: each request waits at the Stepper, then is answered
	gc := func(id int64) {
		r := proxy.Request{ID: id, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbPatch, Resource: "pods", Namespace: "cascade-t1-default", Name: "a"}}
		go func() {
			if err := st.Admit(ctx, &r); err == nil {
				r.Code = 200
				st.Answered(r)
			}
		}()
		if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == id }); err != nil || !ok {
			t.Fatalf("request %d not held: %v", id, err)
		}
	}
	gc(1) // the orphan worker's PATCH of pod/a
	gc(2) // the attemptToDelete worker's unblock PATCH of pod/a
	sendStep(t, ctx, upstreamStepped{st: st, d: d, decided: decided{"pods/cascade-t1-default/a": 2}}, "gc unblock pod/a")
	if held := st.HeldIDs(); !slices.Equal(held, []int64{1}) {
		t.Errorf("held after the unblock step: %v, want the orphan worker's PATCH (1) alone", held)
	}
}

// A `gc delete` step lets the GC's GET of the object through only when
// its DELETE is answered 409 (deleteObject's GET before its retry
// without the resourceVersion precondition). A DELETE that succeeds ends
// the worker's pass, and when the item was queued again meanwhile (a
// virtual delete event naming it), the next pass's first GET of the same
// object must wait for the model's next attemptToDelete step. (The step
// used to admit one GET of the object whatever the answer, and that pass
// ran unstepped; seed 2, `gc attemptToDelete sts/ns2/d` then found no GET
// to release.)
func TestDeleteStepHoldsTheNextPassGET(t *testing.T) {
	d := offlineDriver(t)
	st := heldStepper(t, nil)
	ctx := context.Background()
	call := func(verb string) proxy.Call {
		return proxy.Call{Verb: verb, Resource: "pods", Namespace: "cascade-t1-default", Name: "a"}
	}
	del := proxy.Request{ID: 1, Client: proxy.GarbageCollectorClient, Call: call(proxy.VerbDelete)}
	get := proxy.Request{ID: 2, Client: proxy.GarbageCollectorClient, Call: call(proxy.VerbGet)}
	go func() {
		if st.Admit(ctx, &del) != nil {
			return
		}
		// the worker's next pass sends its GET as the DELETE's answer
		// comes back
		admitted := make(chan struct{})
		go func() {
			if st.Admit(ctx, &get) == nil {
				close(admitted)
			}
		}()
		select {
		case <-admitted:
		case <-time.After(time.Second):
		}
		del.Code = 200
		st.Answered(del)
	}()
	if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == 1 }); err != nil || !ok {
		t.Fatalf("the DELETE is not held: %v", err)
	}
	sendStep(t, ctx, upstreamStepped{st: st, d: d, decided: decided{"pods/cascade-t1-default/a": 1}}, "gc delete pod/a")
	if held := st.HeldIDs(); !slices.Equal(held, []int64{2}) {
		t.Errorf("held after the delete step: %v, want the next pass's GET (2)", held)
	}
}

// After a 409 the `gc delete` step lets through deleteObject's GET, which
// comes after the answer, not a GET of the object another worker sent
// before it and the proxy holds: the orphan worker's removeFinalizer GET
// of an object deleted with Orphan meanwhile, identical at the proxy.
// (The step released the first held GET of the object: `--checks 200
// --seed 12`, run 14, let the orphan worker's GET through, whose PATCH
// it then held, while deleteObject's GET waited and its DELETE never
// came.)
func TestDeleteConflictReleasesOnlyTheRetrysGET(t *testing.T) {
	d := offlineDriver(t)
	st := heldStepper(t, nil)
	ctx := context.Background()
	call := func(verb string) proxy.Call {
		return proxy.Call{Verb: verb, Resource: "configmaps", Namespace: "cascade-t1-ns3", Name: "d"}
	}
	req := func(id int64, verb string) *proxy.Request {
		return &proxy.Request{ID: id, Client: proxy.GarbageCollectorClient, Call: call(verb)}
	}
	del, orphanGET, retryGET, retry := req(1, proxy.VerbDelete), req(2, proxy.VerbGet), req(3, proxy.VerbGet), req(4, proxy.VerbDelete)
	go func() {
		if st.Admit(ctx, del) != nil {
			return
		}
		del.Code, del.Answered = 409, time.Now()
		st.Answered(*del)
		for _, r := range []*proxy.Request{retryGET, retry} {
			if st.Admit(ctx, r) != nil {
				return
			}
			r.Code, r.Answered = 200, time.Now()
			st.Answered(*r)
		}
	}()
	if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == 1 }); err != nil || !ok {
		t.Fatalf("the DELETE is not held: %v", err)
	}
	go func() { _ = st.Admit(ctx, orphanGET) }()
	if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == 2 }); err != nil || !ok {
		t.Fatalf("the orphan worker's GET is not held: %v", err)
	}
	sendStep(t, ctx, upstreamStepped{st: st, d: d, decided: decided{"configmaps/cascade-t1-ns3/d": 1}}, "gc delete cm/ns3/d")
	if held := st.HeldIDs(); !slices.Equal(held, []int64{2}) {
		t.Errorf("held after the delete step: %v, want the orphan worker's GET (2)", held)
	}
}

// The window of an attemptToDelete step admits each owner GET the model's
// pass makes, once: isDangling GETs the owners in the order of the
// references, and a reference of a kind nobody serves ends the pass
// (restMappingError, requeued) before the GETs of the references after
// it. An object that names itself as its owner gets its own GET
// admitted once at most, and the first GET of the item's next pass, sent
// after the real GC's back-off of a few milliseconds, waits for its
// step. (The window used to admit every GET of an owner's key while the
// step lasted: with itself and an unserved kind as owners, pod/a's
// retries slipped through, each one doubling its back-off, until the
// model's seventh pass found no GET within 10 s; seeds 1 and 2.)
func TestAttemptWindowAdmitsEachOwnerGETOnce(t *testing.T) {
	d := offlineDriver(t)
	_, s := modelAfter(t, "create pod/a owner=Frob/x,uid=frob", "add-owner pod/a pod/a,block", "create pod/b", "add-owner pod/b pod/b,block", "add-owner pod/b Frob/x,uid=frob")
	u := upstreamStepped{d: d}
	get := func(name string) proxy.Request {
		return proxy.Request{Call: proxy.Call{Verb: proxy.VerbGet, Resource: "pods", Namespace: "cascade-t1-default", Name: name}, Client: proxy.GarbageCollectorClient}
	}
	for _, c := range []struct {
		pod  string
		want []bool // admitted, for two GETs of the pod
	}{
		{"a", []bool{false, false}}, // Frob/x first: the pass ends before its own GET as owner
		{"b", []bool{true, false}},  // itself first: one owner GET, then the next pass's GET waits
	} {
		st, err := model.ParseStep("gc attemptToDelete pod/" + c.pod)
		if err != nil {
			t.Fatal(err)
		}
		o, err := u.object(st)
		if err != nil {
			t.Fatal(err)
		}
		admits := attemptWindow(o, u.owners(st, s), false, nil)
		for i, want := range c.want {
			if got := admits(get(c.pod)); got != want {
				t.Errorf("pod/%s: GET %d of itself admitted %v, want %v", c.pod, i+1, got, want)
			}
		}
	}
}

// The owners of a virtual node of a cluster-scoped object are looked up
// in the namespace it borrowed from the dependent it was made from
// (kubernetes#124378, traces/races/virtual-namespace.trace): pv/a's
// reference to secret/c is GET in default. (Looked up in pv/a's own
// namespace, none, the reference ended the pass and the window admitted
// no GET; the race's replay on upstream-stepped diverged.)
func TestVirtualClusterScopedNodeOwnersInBorrowedNamespace(t *testing.T) {
	d := offlineDriver(t)
	_, s := modelAfter(t, "create secret/c finalizers=cascade.dev/hold", "create pv/a owner=secret/c,block", "add-owner secret/c pv/a,block",
		"delete secret/c propagation=Foreground", "gc deliver secret/c", "gc deliver secret/c", "gc deliver secret/c")
	u := upstreamStepped{d: d}
	st, err := model.ParseStep("gc attemptToDelete pv/default/a")
	if err != nil {
		t.Fatal(err)
	}
	owners := u.owners(st, s)
	if len(owners) != 1 || owners[0].String() != "secrets/cascade-t1-default/c" {
		t.Fatalf("owner GETs of the virtual pv/default/a: %v, want secrets/cascade-t1-default/c", owners)
	}
}

// sendStep takes the send step line (gc delete|patch|unblock) on u, the
// model expecting it answered 200.
func sendStep(t *testing.T, ctx context.Context, u upstreamStepped, line string) {
	t.Helper()
	step, err := model.ParseStep(line)
	if err != nil {
		t.Fatal(err)
	}
	o, err := u.object(step)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.send(ctx, step, o, model.NewState(), model.Result{Code: 200}); err != nil {
		t.Fatal(err)
	}
}

// A pass of a node deleting its dependents (foreground) sends no owner
// GET: processDeletingDependentsItem queues its blocking dependents (or
// removes the finalizer) and looks no owner up. cm/a and cm/b own each
// other: cm/a's pass queues cm/b, whose worker's first GET, of cm/b,
// must wait for cm/b's step. (The window admitted a GET of each owner of
// the item's, and took the first GETs of the dependents the pass queued,
// both owners of the item too, for those: `cascade fuzz --target
// upstream-stepped --checks 200 --seed 4`, run 16, deploy/b's pass took
// rc/a's and rc/b's, and rc/b's step found no GET.)
func TestDeletingDependentsPassAdmitsNoOwnerGET(t *testing.T) {
	d := offlineDriver(t)
	m, s := &model.Model{}, model.NewState()
	for _, line := range []string{"create cm/a", "create cm/b owner=cm/a,block", "add-owner cm/a cm/b,block",
		"gc deliver cm/a", "gc deliver cm/b", "gc deliver cm/a", "delete cm/a propagation=Foreground", "gc deliver cm/a"} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if s, _, err = m.Apply(s, st); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	st, err := model.ParseStep("gc attemptToDelete cm/a")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Enabled(s, model.Options{}), func(e model.Step) bool { return e.String() == st.String() }) {
		t.Fatalf("%s is not enabled: queue %v", st, s.GC.AttemptToDelete)
	}
	u := upstreamStepped{d: d}
	if owners := u.owners(st, s); len(owners) != 0 {
		t.Fatalf("owner GETs of cm/a's pass, deleting its dependents: %v, want none", owners)
	}
}

// An attemptToOrphan step ends with the orphan worker's GET of the owner
// when the owner has no orphan finalizer left: removeFinalizer finds it
// already removed and writes nothing. A delete with Foreground after one
// with Orphan switches the finalizer; the worker, which took the owner
// at the Orphan event, GETs it only when the step lets it. (The step
// waited for a write or a 404 alone and diverged after 10 s; `cascade
// fuzz --target upstream-stepped --checks 200 --seed 4`, run 86.)
func TestOrphanStepEndsOnTheGETWhenTheFinalizerIsGone(t *testing.T) {
	st := heldStepper(t, nil)
	ctx := context.Background()
	get := proxy.Request{ID: 1, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbGet, Resource: "secrets", Namespace: "cascade-t1-ns3", Name: "a"}}
	go func() {
		if st.Admit(ctx, &get) == nil {
			get.Code, get.Answered = 200, time.Now()
			st.Answered(get)
		}
	}()
	if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == 1 }); err != nil || !ok {
		t.Fatalf("the orphan worker's GET is not held: %v", err)
	}
	m, s := &model.Model{}, model.NewState()
	for _, line := range []string{"create secret/ns3/a", "delete secret/ns3/a propagation=Orphan", "delete secret/ns3/a propagation=Foreground"} {
		step, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if s, _, err = m.Apply(s, step); err != nil {
			t.Fatal(err)
		}
	}
	step, err := model.ParseStep("gc attemptToOrphan secret/ns3/a")
	if err != nil {
		t.Fatal(err)
	}
	if orphanFinalizer(s, step) {
		t.Fatalf("secret/ns3/a keeps its orphan finalizer after the Foreground delete: %v", s.Dump())
	}
	u := upstreamStepped{st: st, decided: decided{}}
	o := object{resource: "secrets", ns: "cascade-t1-ns3", name: "a"}
	if err := u.attemptToOrphan(ctx, o, "uid-secret-a", nil, orphanFinalizer(s, step)); err != nil {
		t.Fatal(err)
	}
}

// A step of one owner's orphan worker releases the requests of that
// owner's pass and no other orphan worker's: another owner's PATCH of a
// dependent stays held for that owner's step. The requests are those of
// `cascade fuzz --target upstream-stepped --checks 30 --seed 3`, run 19:
// ns/d's orphan worker, holding its PATCH of ns/d (a reference to
// itself), finished its pass inside the step of deploy/a, which has no
// dependent (traces/scenarios/orphan-pass-is-its-owners.trace on the
// real binary).
func TestOrphanStepReleasesItsOwnersPassAlone(t *testing.T) {
	gc := func(id int64, verb, resource, ns, name string, removed ...string) proxy.Request {
		group := ""
		if resource == "deployments" {
			group = "apps"
		}
		return proxy.Request{ID: id, Client: proxy.GarbageCollectorClient, RemovedOwners: removed,
			Call: proxy.Call{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name}}
	}
	deploy := object{group: "apps", resource: "deployments", ns: "cascade-t1-default", name: "a"}
	const deployUID, nsUID, otherUID = "uid-deploy-a", "uid-ns-d", "uid-cm-b"
	decidedWrite := gc(9, proxy.VerbPatch, "configmaps", "cascade-t1-default", "x", deployUID)
	pod := object{resource: "pods", ns: "cascade-t1-default", name: "p"}
	pass := &orphanPass{o: deploy, ownerUID: deployUID, ordered: []object{pod}, decided: decided{"configmaps/cascade-t1-default/x": 9}.held, other: func(r proxy.Request) bool { return r.ID != 6 }}
	mine := pass.admits
	podPatch := gc(15, proxy.VerbPatch, "pods", "cascade-t1-default", "p", deployUID)
	for _, c := range []struct {
		what string
		r    proxy.Request
		want bool
	}{
		{"ns/d's orphan worker's PATCH of ns/d, removing ns/d's reference", gc(1, proxy.VerbPatch, "namespaces", "", "cascade-t1-d", nsUID), false},
		{"ns/d's removeFinalizer GET", gc(2, proxy.VerbGet, "namespaces", "", "cascade-t1-d"), false},
		{"ns/d's removeFinalizer PATCH", gc(3, proxy.VerbPatch, "namespaces", "", "cascade-t1-d"), false},
		{"deploy/a's removeFinalizer GET", gc(4, proxy.VerbGet, "deployments", "cascade-t1-default", "a"), true},
		{"deploy/a's removeFinalizer PATCH", gc(5, proxy.VerbPatch, "deployments", "cascade-t1-default", "a"), true},
		{"the first GET of a pass of deploy/a's attemptToDelete item", gc(6, proxy.VerbGet, "deployments", "cascade-t1-default", "a"), false},
		{"another orphan worker's PATCH of deploy/a as a dependent", gc(7, proxy.VerbPatch, "deployments", "cascade-t1-default", "a", otherUID), false},
		{"a write an attemptToDelete step decided", decidedWrite, false},
		{"deploy/a's PATCH of a dependent", gc(10, proxy.VerbPatch, "widgets", "cascade-t1-default", "w", deployUID), true},
		{"the GET of that dependent after its 415", gc(11, proxy.VerbGet, "widgets", "cascade-t1-default", "w"), true},
		{"the JSON merge PATCH of that dependent", gc(12, proxy.VerbPatch, "widgets", "cascade-t1-default", "w"), true},
		{"a GET of another object", gc(13, proxy.VerbGet, "widgets", "cascade-t1-default", "v"), false},
		{"a DELETE of deploy/a", gc(14, proxy.VerbDelete, "deployments", "cascade-t1-default", "a"), false},
		{"deploy/a's PATCH of a dependent the step releases in the model's order", podPatch, false},
	} {
		if got := mine(c.r); got != c.want {
			t.Errorf("%s (%s): admitted in deploy/a's orphan pass = %v, want %v", c.what, proxy.DescribeRequest(c.r), got, c.want)
		}
	}
	if !pass.dependentPatch(podPatch, pod) {
		t.Errorf("deploy/a's PATCH of pod/p is not taken for its orphan pass's")
	}
	if pass.dependentPatch(gc(16, proxy.VerbPatch, "pods", "cascade-t1-default", "p", otherUID), pod) {
		t.Errorf("another owner's PATCH of pod/p is taken for deploy/a's orphan pass's")
	}
}

// offlineDriver is a driver of run prefix cascade-t1 whose cluster is
// never reached: the steps under test talk to the proxy's Stepper alone.
func offlineDriver(t *testing.T) *driver.Driver {
	t.Helper()
	d, err := driver.New(&rest.Config{Host: "http://127.0.0.1:1"}, nil, "cascade-t1")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// modelAfter is the model's state after lines, from a fresh state.
func modelAfter(t *testing.T, lines ...string) (*model.Model, *model.State) {
	t.Helper()
	m, s := &model.Model{}, model.NewState()
	for _, line := range lines {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if s, _, err = m.Apply(s, st); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	return m, s
}

// heldStepper is a Stepper holding every object's traffic until the test
// ends, arrivals (if not nil) told of each GC request.
func heldStepper(t *testing.T, arrivals func(proxy.Request)) *proxy.Stepper {
	t.Helper()
	st := proxy.NewStepper()
	st.SetScope(func(string, string) bool { return true })
	if arrivals != nil {
		st.SetArrivals(arrivals)
	}
	st.Hold(true)
	t.Cleanup(func() { st.Hold(false) })
	return st
}
