package lin

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// builder writes hand-made histories: each call appends one op with the
// interval given, and the objects it answers carry the server's state as
// the builder tracks it (UIDs u1, u2, ...; a global resourceVersion).
type builder struct {
	t    testing.TB
	ops  []history.Op
	live map[history.Key]*history.Object
	uid  int
	rv   uint64
	// reads are the controllers' GETs (get); readsRecorded says they
	// are all of them (Options.ReadsRecorded).
	reads         []history.Read
	readsRecorded bool
	// graph are the GC's applied graph events (applied).
	graph []history.GraphChange
	// deliveries are the events handed to the GC's informers (delivered).
	deliveries []history.Delivery
	// logLines are the graph builder's log lines (processed).
	logLines []history.Processed
	// requests are the GC's requests as the proxy recorded them
	// (requested).
	requests []history.GCRequest
	// release is Options.Release.
	release model.Release
}

func newBuilder(t *testing.T) *builder {
	return &builder{t: t, live: map[history.Key]*history.Object{}, rv: 100}
}

func kind(short string) model.KindID {
	k, ok := model.KindByShort(short)
	if !ok {
		panic("no kind " + short)
	}
	return k
}

// key builds a key: namespaced kinds live in namespace "ns".
func key(short, name string) history.Key {
	k := kind(short)
	if k.Info().Namespaced {
		return history.Key{Kind: k, Namespace: "ns", Name: name}
	}
	return history.Key{Kind: k, Name: name}
}

// ref is an ownerReference to the live object at k.
func (b *builder) ref(k history.Key, block, controller bool) history.Ref {
	o := b.live[k]
	if o == nil {
		b.t.Fatalf("ref to %s, which is not live", k)
	}
	return history.Ref{APIVersion: k.Kind.Info().APIVersion, Kind: k.Kind.Info().Kind, Name: k.Name, UID: o.UID,
		Block: block, Controller: controller}
}

func (b *builder) add(op history.Op) int {
	b.ops = append(b.ops, op)
	return len(b.ops) - 1
}

func (b *builder) nextRV() uint64 { b.rv++; return b.rv }

// create appends a successful create by actor.
func (b *builder) create(actor string, k history.Key, call, ret int64, fins []string, refs ...history.Ref) int {
	b.uid++
	o := &history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: fmt.Sprintf("u%d", b.uid),
		RV: b.nextRV(), Owners: refs, Finalizers: fins, Replicas: -1}
	b.live[k] = o
	sent := *o
	sent.UID, sent.RV = "", 0
	return b.add(history.Op{Actor: actor, Verb: history.Create, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
		Sent: &sent, Code: 201, Got: o, Call: call, Return: ret})
}

// write appends a successful patch by actor that applies change to a
// copy of the live object; the object leaves storage when it is being
// deleted and change empties its finalizers, unless it is a Namespace,
// which its spec.finalizers hold.
func (b *builder) write(actor string, k history.Key, call, ret int64, change func(*history.Object)) int {
	cur := b.live[k]
	if cur == nil {
		b.t.Fatalf("write of %s, which is not live", k)
	}
	o := *cur
	o.Owners, o.Finalizers = slices.Clone(cur.Owners), slices.Clone(cur.Finalizers)
	change(&o)
	op := history.Op{Actor: actor, Verb: history.Patch, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
		Code: 200, Got: &o, Call: call, Return: ret}
	if o.Deleting && len(o.Finalizers) == 0 && k.Kind.Info().Kind != "Namespace" {
		op.Removed = true
		delete(b.live, k)
	} else {
		o.RV = b.nextRV()
		b.live[k] = &o
	}
	return b.add(op)
}

// del appends a successful DELETE by actor with the given propagation;
// the API server's finalizer choice is computed as lin mirrors it.
func (b *builder) del(actor string, k history.Key, call, ret int64, propagation string) int {
	cur := b.live[k]
	if cur == nil {
		b.t.Fatalf("delete of %s, which is not live", k)
	}
	opts := &history.DeleteOptions{Propagation: propagation}
	op := history.Op{Actor: actor, Verb: history.Delete, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
		Delete: opts, Code: 200, Call: call, Return: ret}
	fins := history.DeletionFinalizers(cur, opts)
	if len(fins) == 0 && k.Kind.Info().Kind != "Namespace" {
		op.Removed = true
		op.Got = &history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: cur.UID, Replicas: -1}
		delete(b.live, k)
		return b.add(op)
	}
	o := *cur
	o.Deleting, o.Finalizers = true, fins
	if !cur.Deleting || !history.SameFinalizers(fins, cur.Finalizers) {
		o.RV = b.nextRV() // a DELETE that changes nothing writes nothing
	}
	b.live[k] = &o
	op.Got = &o
	return b.add(op)
}

// get records a GET of k by actor, answered with the live object (404
// when none is live): read evidence, not an op.
func (b *builder) get(actor string, k history.Key, call, ret int64) {
	r := history.Read{Actor: actor, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Code: 404, Call: call, Return: ret}
	if o := b.live[k]; o != nil {
		got := *o
		r.Code, r.Got = 200, &got
	}
	b.reads = append(b.reads, r)
}

// applied records that the GC's graph builder had applied the live
// version of k by at: graph evidence, not an op.
func (b *builder) applied(k history.Key, at int64) {
	o := b.live[k]
	if o == nil {
		b.t.Fatalf("graph change of %s, which is not live", k)
	}
	b.graph = append(b.graph, history.GraphChange{UID: o.UID, RV: o.RV, At: at})
}

// delivered records that the API proxy handed an event carrying the live
// version of k to the GC's informers at at: delivery evidence, not an op.
func (b *builder) delivered(k history.Key, at int64) {
	o := b.live[k]
	if o == nil {
		b.t.Fatalf("delivery of %s, which is not live", k)
	}
	b.deliveries = append(b.deliveries, history.Delivery{UID: o.UID, RV: o.RV, At: at})
}

// processed records that kube-controller-manager's graph builder began
// to apply an event of k's live object at at (its log), after every
// event recorded before: log evidence, not an op.
func (b *builder) processed(k history.Key, at int64) {
	o := b.live[k]
	if o == nil {
		b.t.Fatalf("graph builder line of %s, which is not live", k)
	}
	b.logLines = append(b.logLines, history.Processed{UID: o.UID, Seq: len(b.logLines) + 1, At: at})
}

// requested records that the API proxy got actor's request verb of k
// at received and answered it at answered, on the delivery record's
// clock, with the live object's UID: proxy evidence, not an op.
func (b *builder) requested(actor, verb string, k history.Key, received, answered int64) {
	if actor != history.ActorGC {
		b.t.Fatalf("the proxy records the GC's requests, not %s's", actor)
	}
	r := history.GCRequest{Verb: verb, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Code: 404, Received: received, Answered: answered}
	if o := b.live[k]; o != nil {
		r.Code, r.UID = 200, o.UID
	}
	b.requests = append(b.requests, r)
}

// refused appends an op the server refused with code and reason.
func (b *builder) refused(actor string, verb history.Verb, k history.Key, call, ret int64, code int, reason string) int {
	return b.add(history.Op{Actor: actor, Verb: verb, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
		Code: code, Reason: reason, Call: call, Return: ret})
}

// evidence is one record of when the GC could have had a version, as a
// test lays it down: the proxy's delivery record (upstream) or an
// in-process GC's graph changes (impl), with the basis lin names for an
// excuse resting on it.
type evidence struct {
	record func(b *builder, k history.Key, at int64)
	basis  string
}

var (
	onDeliveries = evidence{(*builder).delivered, basisDeliveries}
	onGraph      = evidence{(*builder).applied, basisGraph}
)

// check assigns lanes and checks the history.
func (b *builder) check() Result {
	history.AssignLanes(b.ops)
	return Check(b.ops, Options{Reads: b.reads, ReadsRecorded: b.readsRecorded, GraphChanges: b.graph, Deliveries: b.deliveries, GraphLog: b.logLines, GCRequests: b.requests, Release: b.release})
}

func withRefs(refs ...history.Ref) func(*history.Object) {
	return func(o *history.Object) { o.Owners = refs }
}

func withoutFinalizer(f string) func(*history.Object) {
	return func(o *history.Object) {
		o.Finalizers = slices.DeleteFunc(o.Finalizers, func(x string) bool { return x == f })
	}
}

func expectOk(t *testing.T, r Result) {
	t.Helper()
	if r.Verdict != "Ok" || len(r.Known) != 0 {
		t.Fatalf("want Ok without known races, got %s: %s (known %v)", r.Verdict, r.Summary, r.Known)
	}
}

func expectIllegal(t *testing.T, r Result, culprit int, words ...string) {
	t.Helper()
	if r.Verdict != "Illegal" {
		t.Fatalf("want Illegal, got %s: %s", r.Verdict, r.Summary)
	}
	if culprit >= 0 && r.Culprit != culprit {
		t.Errorf("want culprit op %d, got %d: %s", culprit, r.Culprit, r.Summary)
	}
	for _, w := range words {
		if !contains(r.Summary, w) {
			t.Errorf("summary lacks %q: %s", w, r.Summary)
		}
	}
}

func expectKnown(t *testing.T, r Result, op int, issue string) {
	t.Helper()
	if r.Verdict != "Ok" {
		t.Fatalf("want Ok with known race %s, got %s: %s", issue, r.Verdict, r.Summary)
	}
	if len(r.Known) != 1 || r.Known[0].Issue != issue || r.Known[0].Op != op {
		t.Fatalf("want one known %s at op %d, got %v", issue, op, r.Known)
	}
	if !contains(r.Summary, issue) {
		t.Errorf("summary lacks %s: %s", issue, r.Summary)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
