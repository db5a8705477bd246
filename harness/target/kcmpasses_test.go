package target

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/model"
)

// kcmLine is a kube-controller-manager log line of garbagecollector.go
// about item (apiVersion/kind, namespace, name, uid), logged now.
func kcmLine(msg, item string) string {
	return time.Now().Format("I0102 15:04:05.000000") + "   4242 garbagecollector.go:506] \"" + msg + "\" logger=\"garbage-collector-controller\" item=\"" + item + "\" virtual=false\n"
}

// passLog is a kube-controller-manager log the test writes, followed by
// a kcmPasses, and a GC whose GETs the test sends one at a time.
type passLog struct {
	t    *testing.T
	path string
	k    *kcmPasses
	id   int64
}

func newPassLog(t *testing.T) *passLog {
	path := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	appendLog(t, path)
	k := newKCMPasses(newKCMLog(path))
	k.Reset()
	time.Sleep(2 * time.Millisecond) // lines after the Reset
	return &passLog{t: t, path: path, k: k}
}

// log appends a line, a little before what comes next.
func (p *passLog) log(msg, item string) {
	appendLog(p.t, p.path, kcmLine(msg, item))
	time.Sleep(2 * time.Millisecond)
}

// get is the GC's next GET of a ConfigMap of namespace ns (or a
// PersistentVolume, cluster-scoped, when ns is ""), received now.
func (p *passLog) get(ns, name string) proxy.Request {
	p.id++
	c := proxy.Call{Verb: proxy.VerbGet, Resource: "configmaps", Namespace: ns, Name: name}
	if ns == "" {
		c.Resource = "persistentvolumes"
	}
	r := proxy.Request{ID: p.id, Client: proxy.GarbageCollectorClient, Call: c, Received: time.Now()}
	p.k.Arrived(r)
	time.Sleep(2 * time.Millisecond)
	return r
}

// A GET of an object is the first GET of a pass of its work item when a
// pass of it began ("Processing item") before the GET came and has had
// no GET yet; any other GET of it is another worker's (an owner lookup,
// a removeFinalizer GET). The GETs are told apart in the order they
// came, whenever they are asked about.
func TestKCMPassesTellAPassesFirstGETFromAnotherWorkers(t *testing.T) {
	p := newPassLog(t)
	owner := p.get("ns", "y") // x's worker looks its owner y up before y's pass began
	p.log("Processing item", "[v1/ConfigMap, namespace: ns, name: y, uid: uid-y]")
	first := p.get("ns", "y")  // y's own pass
	lookup := p.get("ns", "y") // another owner lookup while y's pass waits
	p.log("Processing item", "[v1/ConfigMap, namespace: ns, name: y, uid: uid-y]")
	next := p.get("ns", "y") // y's next pass
	for _, c := range []struct {
		what string
		r    proxy.Request
		want bool
	}{
		{"the GET of the next pass", next, true},
		{"the owner lookup before the pass began", owner, false},
		{"the pass's GET", first, true},
		{"the owner lookup while the pass waits", lookup, false},
	} {
		if got := p.k.First(c.r); got != c.want {
			t.Errorf("%s (request %d): first %v, want %v", c.what, c.r.ID, got, c.want)
		}
	}
}

// A pass that ends without a GET has none to match: a node being
// deleted without foreground returns at once, a kind without a REST
// mapping fails (both said at level 5), and a namespaced kind without a
// namespace returns before any request. A virtual node of a
// cluster-scoped kind GETs the name alone, whatever namespace it
// borrowed. Lines from before a Reset (a settle) count for nothing.
func TestKCMPassesWithoutAGETMatchNone(t *testing.T) {
	p := newPassLog(t)
	p.log("Processing item", "[v1/ConfigMap, namespace: ns, name: old, uid: uid-old]")
	p.k.Reset()
	time.Sleep(2 * time.Millisecond)
	p.log("Processing item", "[v1/ConfigMap, namespace: ns, name: d, uid: uid-d]")
	p.log("processing item returned at once, because its DeletionTimestamp is non-nil", "[v1/ConfigMap, namespace: ns, name: d, uid: uid-d]")
	p.log("Processing item", "[cascade.dev/v1/Frob, namespace: ns, name: f, uid: uid-f]")
	p.log("Processing item", "[v1/ConfigMap, namespace: , name: c, uid: uid-c]")
	p.log("Processing item", "[v1/PersistentVolume, namespace: ns, name: v, uid: uid-v]")
	for _, c := range []struct {
		what string
		r    proxy.Request
		want bool
	}{
		{"a lookup of the item whose pass returned at once", p.get("ns", "d"), false},
		{"a lookup of the ConfigMap without namespace's name", p.get("", "c"), false},
		{"a lookup of the ConfigMap whose pass was before the Reset", p.get("ns", "old"), false},
		{"the virtual PersistentVolume's GET", p.get("", "v"), true},
	} {
		if got := p.k.First(c.r); got != c.want {
			t.Errorf("%s: first %v, want %v", c.what, got, c.want)
		}
	}
}

// An attemptToDelete step of x, whose owner is y, lets x's owner GET of
// y through and holds y's own pass's first GET, which the real GC sends
// when y is queued, whenever that is: the two are the same request at
// the proxy, and the log says which came first. (The step's window used
// to admit the first GET of y that came, y's pass's when y's worker was
// first: y's pass ran unstepped and x's worker waited on its held owner
// GET; `cascade fuzz --target upstream-stepped --seed 4`, run 16, found
// no GET of rc/b to release at rc/b's step.)
func TestAttemptToDeleteHoldsTheOwnersOwnPassGET(t *testing.T) {
	p := newPassLog(t)
	st := heldStepper(t, p.k.Arrived)
	u := upstreamStepped{st: st, decided: decided{}, passes: p.k}
	ctx := context.Background()
	x := object{resource: "configmaps", ns: "ns", name: "x"}
	y := object{resource: "configmaps", ns: "ns", name: "y"}
	// the GC: x's pass waits on its first GET; once it is released, y
	// is queued and its pass sends its first GET, and x's worker its
	// owner GET of y
	send := func(r proxy.Request) chan struct{} {
		done := make(chan struct{})
		go func() {
			if st.Admit(ctx, &r) == nil {
				r.Code = 200
				st.Answered(r)
			}
			close(done)
		}()
		return done
	}
	get := func(o object) proxy.Request {
		p.id++
		return proxy.Request{ID: p.id, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbGet, Resource: o.resource, Namespace: o.ns, Name: o.name}, Received: time.Now()}
	}
	p.log("Processing item", "[v1/ConfigMap, namespace: ns, name: x, uid: uid-x]")
	xGET := send(get(x))
	go func() {
		<-xGET
		p.log("Processing item", "[v1/ConfigMap, namespace: ns, name: y, uid: uid-y]")
		send(get(y))
		time.Sleep(5 * time.Millisecond)
		send(get(y))
	}()
	if err := u.attemptToDelete(ctx, x, "uid-x", "ns", []object{y}, model.NewState(), model.NewState()); err != nil {
		t.Fatal(err)
	}
	if held := st.HeldIDs(); !slices.Equal(held, []int64{2}) {
		t.Fatalf("held after x's step: %v, want y's pass's first GET (2)", held)
	}
}

// A settle lets everything through: a pass begun then has its GET
// passed unrecorded, and holding again forgets it, so that a later
// owner lookup of its object is not taken for that pass's GET. (Settle
// used to hold again without forgetting: in `cascade conform --target
// upstream-stepped`, race/orphan-adoption-fixed held the orphan
// worker's GET of deploy/web, and race/policy-switch-foreground-to-orphan
// pod/dep's owner GET of rc/owner, each as the GET of a pass begun in
// the trace's settle.)
func TestHoldingAgainForgetsTheSettlesPasses(t *testing.T) {
	p := newPassLog(t)
	st := proxy.NewStepper()
	st.SetScope(func(string, string) bool { return true })
	u := upstreamStepped{st: st, decided: decided{}, passes: p.k}
	u.hold()
	defer st.Hold(false)
	st.Hold(false) // a settle: y's pass and its GET go through unheld
	p.log("Processing item", "[v1/ConfigMap, namespace: ns, name: y, uid: uid-y]")
	u.hold()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lookup := proxy.Request{ID: 1, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbGet, Resource: "configmaps", Namespace: "ns", Name: "y"}, Received: time.Now()}
	go func() { _ = st.Admit(ctx, &lookup) }()
	if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == 1 }); err != nil || !ok {
		t.Fatalf("the lookup is not held: %v", err)
	}
	if p.k.First(lookup) {
		t.Errorf("the owner lookup after the settle is taken for the first GET of y's pass begun in the settle")
	}
}

// An attemptToDelete step releases the first GET of its own item's
// pass when another item of the same key holds one too: a virtual owner
// of those coordinates with another UID, taken by an idle worker before
// the graph replaced it with the observed object elsewhere. The log's
// "Processing item" lines name each pass's UID. (The step released the
// GET that came first, the virtual item's, and waited for the DELETE of
// a pass still held; `cascade fuzz --target upstream-stepped --checks
// 30 --seed 4`, run 12, traces/scenarios/stale-virtual-item-shares-a-key.trace.)
func TestAttemptToDeleteReleasesItsOwnItemsPassGET(t *testing.T) {
	p := newPassLog(t)
	st := heldStepper(t, p.k.Arrived)
	u := upstreamStepped{st: st, decided: decided{}, passes: p.k}
	ctx := context.Background()
	a := object{resource: "configmaps", ns: "ns3", name: "a"}
	get := func() proxy.Request {
		p.id++
		return proxy.Request{ID: p.id, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbGet, Resource: a.resource, Namespace: a.ns, Name: a.name}, Received: time.Now()}
	}
	// the GC's worker sends r and, once r is answered, then()
	send := func(r proxy.Request, then func()) {
		go func() {
			if st.Admit(ctx, &r) == nil {
				r.Code = 200
				st.Answered(r)
				then()
			}
		}()
	}
	held := func(id int64) {
		t.Helper()
		if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == id }); err != nil || !ok {
			t.Fatalf("request %d is not held: %v", id, err)
		}
	}
	p.log("Processing item", "[v1/ConfigMap, namespace: ns3, name: a, uid: uid-other]")
	send(get(), func() {})
	held(1)
	p.log("Processing item", "[v1/ConfigMap, namespace: ns3, name: a, uid: uid-a]")
	// cm/ns3/a's pass: its first GET, then its owner lookup of the same key
	first, lookup := get(), get()
	send(first, func() { send(lookup, func() {}) })
	held(2)
	if err := u.attemptToDelete(ctx, a, "uid-a", "ns3", []object{a}, model.NewState(), model.NewState()); err != nil {
		t.Fatal(err)
	}
	if held := st.HeldIDs(); !slices.Equal(held, []int64{1}) {
		t.Fatalf("held after cm/ns3/a's step: %v, want the virtual item's GET (1) alone", held)
	}
}

// A virtual node of a cluster-scoped kind borrows its dependent's
// namespace, and its GET leaves the namespace out, so its pass and the
// observed node's, of one UID, send the same GET. An idle worker takes
// the virtual item, requeued while it is unobserved, before the graph
// replaces its node with the observed one, and holds the stale *node's
// first GET; the observed node, queued for its foreground deletion,
// holds the same GET. The model's queue keeps one item per UID, and the
// step of the observed item releases the observed node's pass, which
// the log's namespace tells apart. (The step released the stale pass's
// GET, whose owner lookup stayed held, and the observed pass, which
// queues the blocking dependents, never ran: `cascade fuzz --target
// upstream-stepped --checks 200 --seed 13`, run 193.)
func TestAttemptToDeleteReleasesTheObservedPassNotTheStaleVirtuals(t *testing.T) {
	p := newPassLog(t)
	st := heldStepper(t, p.k.Arrived)
	u := upstreamStepped{st: st, decided: decided{}, passes: p.k}
	ctx := context.Background()
	pv := object{resource: "persistentvolumes", name: "a"}
	get := func() proxy.Request {
		p.id++
		return proxy.Request{ID: p.id, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbGet, Resource: pv.resource, Name: pv.name}, Received: time.Now()}
	}
	send := func(r proxy.Request) {
		go func() {
			if st.Admit(ctx, &r) == nil {
				r.Code = 200
				st.Answered(r)
			}
		}()
	}
	held := func(id int64) {
		t.Helper()
		if _, ok, err := st.WaitRequest(ctx, time.Second, func(q proxy.Request) bool { return q.ID == id }); err != nil || !ok {
			t.Fatalf("request %d is not held: %v", id, err)
		}
	}
	p.log("Processing item", "[v1/PersistentVolume, namespace: ns2, name: a, uid: uid-a]")
	send(get())
	held(1)
	p.log("Processing item", "[v1/PersistentVolume, namespace: , name: a, uid: uid-a]")
	send(get())
	held(2)
	if err := u.attemptToDelete(ctx, pv, "uid-a", "", nil, model.NewState(), model.NewState()); err != nil {
		t.Fatal(err)
	}
	if held := st.HeldIDs(); !slices.Equal(held, []int64{1}) {
		t.Fatalf("held after pv/a's step: %v, want the stale virtual pass's GET (1) alone", held)
	}
}

// Two items of one key whose passes both began before the first of
// their GETs came cannot be told apart: their workers' GETs are the
// same request, and either worker may have sent first. Such GETs are
// ambiguous, and no attemptToDelete step releases one (the final settle
// takes both). A pass of the key that began after the GETs came is not.
// (Two virtual owners ConfigMap ns3/c of two UIDs, named by one
// Deployment, were taken at once; the step of one released the other's
// GET: `cascade fuzz --target upstream-stepped --checks 200 --seed 4`,
// run 58.)
func TestKCMPassesOfTwoItemsBegunTogetherAreAmbiguous(t *testing.T) {
	p := newPassLog(t)
	p.log("Processing item", "[v1/ConfigMap, namespace: ns3, name: c, uid: uid-cm-c]")
	p.log("Processing item", "[v1/ConfigMap, namespace: ns3, name: c, uid: uid-ghost-d]")
	one, two := p.get("ns3", "c"), p.get("ns3", "c")
	p.log("Processing item", "[v1/ConfigMap, namespace: ns3, name: c, uid: uid-later]")
	later := p.get("ns3", "c")
	for _, c := range []struct {
		what      string
		r         proxy.Request
		ambiguous bool
	}{
		{"the first of the two GETs", one, true},
		{"the second", two, true},
		{"the GET of the pass begun after them", later, false},
	} {
		if !p.k.First(c.r) {
			t.Errorf("%s is not taken for a pass's first GET", c.what)
		}
		if got := p.k.Ambiguous(c.r); got != c.ambiguous {
			t.Errorf("%s: ambiguous %v, want %v", c.what, got, c.ambiguous)
		}
	}
	if got := p.k.Item(later); got != "uid-later" {
		t.Errorf("the later GET's item: %q, want uid-later", got)
	}
}
