package lin

import (
	"cmp"
	"slices"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// The proxy's delivery record (Options.Deliveries) as evidence: on the
// upstream target every watch event reaches the real GC's informers
// through cascade's API proxy, which records the moment it handed each
// one on. The GC cannot have seen a version of an object before the
// event carrying it (or a later one) was handed on, so an excuse that
// says "the GC had not seen the write yet" holds only when no such event
// had been handed on by the latest moment the GC can have decided. With
// the record present the race window is not consulted for those
// excuses; the record can refute an excuse the window admitted, and
// admit one for a write older than the window.

// Bases of an excuse (Known.Basis): the model.Evidence names.
var (
	basisDeliveries = model.EvidenceDeliveryRecord.String()
	basisGraph      = model.EvidenceGraphChanges.String()
	basisReads      = model.EvidenceRecordedReads.String()
	basisOrder      = model.EvidenceAuditOrder.String()
	basisWindow     = model.EvidenceWindow.String()
)

// deliveriesByUID indexes deliveries by UID, each UID's in order.
func deliveriesByUID(ds []history.Delivery) map[string][]history.Delivery {
	return byUID(ds, func(d history.Delivery) (string, int64) { return d.UID, d.At })
}

// byUID indexes xs by the UID key gives, each UID's in the order of the
// instants key gives (stable for equal instants).
func byUID[T any](xs []T, key func(T) (uid string, at int64)) map[string][]T {
	m := map[string][]T{}
	for _, x := range xs {
		uid, _ := key(x)
		m[uid] = append(m[uid], x)
	}
	for _, l := range m {
		slices.SortStableFunc(l, func(a, b T) int {
			_, ta := key(a)
			_, tb := key(b)
			return cmp.Compare(ta, tb)
		})
	}
	return m
}

// deliveredBefore reports whether an event of the object uid at version
// need or later was handed to the GC's informers before the instant t:
// from then on the GC may have seen it.
func (c *checker) deliveredBefore(uid string, need uint64, t int64) bool {
	for _, d := range c.delivered[uid] {
		if d.At >= t {
			return false
		}
		if d.RV >= need {
			return true
		}
	}
	return false
}

// graphEvidence reports whether the history comes with evidence of
// what the GC had seen when: the proxy's delivery record, or an
// in-process GC's recorded graph changes. With either, the excuses that
// say the GC had or had not seen a write rest on it, not on the race
// window.
func (c *checker) graphEvidence() bool { return c.deliveries || len(c.graph) > 0 }

// graphEvidenceBasis names the evidence graphEvidence found.
func (c *checker) graphEvidenceBasis() string {
	return c.byEvidence(basisDeliveries, basisGraph)
}

// byEvidence is delivery with the proxy's delivery record, else graph
// (an in-process GC's graph changes): the wording of a finding that
// rests on graphEvidence.
func (c *checker) byEvidence(delivery, graph string) string {
	if c.deliveries {
		return delivery
	}
	return graph
}

// hadVersion reports whether the GC may have had a version of the object
// uid at least need before the instant t: an event carrying one had been
// handed to its informers (deliveredBefore), or, without the delivery
// record, its graph had applied one (graphApplied). The one question
// every graphEvidence site asks.
func (c *checker) hadVersion(uid string, need uint64, t int64) bool {
	if c.deliveries {
		return c.deliveredBefore(uid, need, t)
	}
	return c.graphApplied(uid, need, t)
}

// hadWrite is hadVersion for the version the write m wrote; a write
// whose version the history does not show counts as not had.
func (c *checker) hadWrite(uid string, m mark, t int64) bool {
	rv, ok := c.writtenVersion(m, uid)
	return ok && c.hadVersion(uid, rv, t)
}

// writtenVersion is the version of the object uid the write m answered,
// false when the history does not show it (no answer, or another
// object's).
func (c *checker) writtenVersion(m mark, uid string) (uint64, bool) {
	if m < 0 {
		return 0, false
	}
	got := c.ops[m].Got
	if got == nil || got.UID != uid || got.RV == 0 {
		return 0, false
	}
	return got.RV, true
}

// seenWrite reports whether the delivery record shows that the GC may
// have seen the write m to the object uid before the instant t; known is
// false when the history does not show the version m wrote, so that the
// record cannot tell.
func (c *checker) seenWrite(uid string, m mark, t int64) (seen, known bool) {
	rv, ok := c.writtenVersion(m, uid)
	if !ok {
		return false, false
	}
	return c.deliveredBefore(uid, rv, t), true
}

// gcDecidedBy is the latest moment the GC can have decided its write in
// to the object at key with this UID on what it had seen: when it sent
// its latest GET of the object that answered this UID before it sent in
// (removeFinalizer and attemptToDeleteItem decide, then GET, then
// write), else when it sent in. The proxy's record of the GC's requests
// (Options.GCRequests) gives that on the delivery record's clock, and
// shows removeFinalizer's retries (decidedBeforeRetries); without it the
// audit log's stamps stand in, which come later (kube-apiserver gets a
// request after the proxy passed it on), so that they refute more and
// admit nothing the proxy's would not.
func (c *checker) gcDecidedBy(key history.Key, uid string, in *input) int64 {
	t, _ := c.gcDecidedByGET(key, uid, in)
	return t
}

// gcDecidedByGET is gcDecidedBy with the index, in the GC's requests of
// key, of the GET whose sending bounds the decision (-1 when no GET of
// the proxy's record does).
func (c *checker) gcDecidedByGET(key history.Key, uid string, in *input) (int64, int) {
	if w := c.gcRequestOf(in); w >= 0 {
		rs := c.requests[key]
		latest := -1
		for i := range rs {
			r := &rs[i]
			if r.Verb != "get" || r.Code != 200 || r.UID != uid || r.Answered > rs[w].Received {
				continue
			}
			if latest < 0 || r.Answered > rs[latest].Answered {
				latest = i
			}
		}
		if latest < 0 {
			return rs[w].Received, -1
		}
		if first, ok := decidedBeforeRetries(rs, w, uid); ok {
			return rs[first].Received, first
		}
		return rs[latest].Received, latest
	}
	bound := in.op.Call
	var latest *history.Read
	for i := range c.reads[key] {
		r := &c.reads[key][i]
		if r.Actor != history.ActorGC || r.Return > in.op.Call || r.Got == nil || r.Got.UID != uid {
			continue
		}
		if latest == nil || r.Return > latest.Return {
			latest = r
		}
	}
	if latest != nil {
		bound = latest.Call
	}
	return bound, -1
}

// foregroundRead bounds from below when processDeletingDependentsItem
// read the owner's blocking dependents from the graph, for a decision
// gcDecidedByGET bounds from above by decided, the sending of the GC's
// request get of key: attemptToDeleteItem GETs the item first and reads
// the graph only after that GET's answer, and removeFinalizer's GET
// comes after the read. So when the GC's GET of the owner just before
// get answered this UID, the read came after that answer: it returns
// the answer's time, else decided. (Found by `cascade fuzz --target
// upstream --informer-relist 300ms --seed 33`, run 63: a Pod handed on
// 1 ms after the first GET's answer and 18 ms before the second GET was
// judged seen.)
func (c *checker) foregroundRead(key history.Key, uid string, get int, decided int64) int64 {
	rs := c.requests[key]
	if get < 1 || rs[get].Verb != "get" {
		return decided
	}
	if p := rs[get-1]; p.Verb == "get" && p.Code == 200 && p.UID == uid && p.Answered <= decided {
		return p.Answered
	}
	return decided
}

// orphanDependentsTaken bounds when attemptToOrphanWorker took the
// dependents of the owner uid at key from its graph, for a decision
// gcDecidedBy bounds by decided: the graph builder queues the owner as it
// processes the event carrying the orphan deletion (the write m), and the
// worker takes the dependents at once, before removeFinalizer's GET,
// while events handed on after the owner's may still wait in the graph
// builder's queue (an informer's list hands a CRD's objects on in name
// order, an owner before its dependent). So when the proxy handed that
// event on at t before decided, and the GC sent no request about the
// owner from t until decided (no earlier try, after whose failure a new
// decision takes the dependents again), the dependents may have been
// taken as early as the graph builder applied that event, handed on at
// t: it returns t and atEvent, else decided. Without the record (an
// in-process GC's graph changes decide), orphanEventApplied.
func (c *checker) orphanDependentsTaken(key history.Key, uid string, m mark, decided int64) (taken int64, atEvent bool) {
	if !c.deliveries {
		return c.orphanEventApplied(uid, m, decided)
	}
	rv, ok := c.writtenVersion(m, uid)
	rs := c.requests[key]
	if !ok || len(rs) == 0 {
		return decided, false
	}
	i := slices.IndexFunc(c.delivered[uid], func(d history.Delivery) bool { return d.RV >= rv })
	if i < 0 {
		return decided, false
	}
	t := c.delivered[uid][i].At
	if t >= decided || slices.ContainsFunc(rs, func(r history.GCRequest) bool { return r.Received >= t && r.Received < decided }) {
		return decided, false
	}
	return t, true
}

// gcRequestOf is the proxy's record of the GC's write in, an index in
// the GC's requests of in's object: the GC's request of in's verb that
// the proxy got before kube-apiserver stamped in's receipt and answered
// after it; the latest the proxy got when several were in flight (the
// later bound refutes more). -1 when the proxy recorded none.
func (c *checker) gcRequestOf(in *input) int {
	if in.op.Actor != history.ActorGC {
		return -1
	}
	w := -1
	for i, r := range c.requests[in.key] {
		if r.Verb != string(in.op.Verb) || r.Received > in.op.Call || r.Answered < in.op.Call {
			continue
		}
		if w < 0 || r.Received > c.requests[in.key][w].Received {
			w = i
		}
	}
	return w
}

// gcSent is the latest moment the GC sent its write in: when the proxy
// got it (gcRequestOf), else kube-apiserver's audit stamp of it, which
// is later.
func (c *checker) gcSent(in *input) int64 {
	if w := c.gcRequestOf(in); w >= 0 {
		return c.requests[in.key][w].Received
	}
	return in.op.Call
}

// removeFinalizerTries is retry.DefaultBackoff.Steps, the tries of
// removeFinalizer's retry.RetryOnConflict.
const removeFinalizerTries = 4

// retryGap bounds the time from a try's Conflict to the next try's GET:
// retry.DefaultBackoff sleeps 10, 50 and 250 ms (±10%) between tries;
// the rest is slack for a loaded machine.
const retryGap = int64(time.Second)

// decidedBeforeRetries finds the first GET of removeFinalizer's retry
// loop that ended with the patch rs[w]: the GC decided on its graph
// (attemptToOrphan's dependents, processDeletingDependentsItem's
// blocking dependents) once, then tried GET and patch until the patch
// was not refused with a Conflict. So the GC's requests of the object
// just before the patch, in the order the proxy got them, alternate
// GET (answering uid) and patch refused with 409, each answered before
// the next was got, the next try's GET within retryGap of the Conflict;
// GETs of other workers (attemptToDelete looking the object up as an
// owner) may come between a Conflict and the next try, and are passed
// over (found by `cascade fuzz --target upstream --write-delay 200ms
// --checks 200 --seed 7741`, run 120: two such GETs of a Namespace, one
// got 63 µs before the proxy handed the Conflict back). A new decision
// begins such a chain only after a loop gave up, after
// removeFinalizerTries conflicts; so a chain of at most
// removeFinalizerTries tries is one decision's, and its first GET bounds
// it. ok is false when rs[w] is not a patch just after a GET, or the
// chain is longer (it may hold two decisions).
func decidedBeforeRetries(rs []history.GCRequest, w int, uid string) (first int, ok bool) {
	if rs[w].Verb != "patch" {
		return 0, false
	}
	get := func(i, next int) bool {
		return i >= 0 && rs[i].Verb == "get" && rs[i].Code == 200 && rs[i].UID == uid && rs[i].Answered <= rs[next].Received
	}
	conflict := func(i, next int) bool {
		return i >= 0 && rs[i].Verb == "patch" && rs[i].Code == 409 && rs[i].Answered <= rs[next].Received &&
			rs[next].Received-rs[i].Answered <= retryGap
	}
	if !get(w-1, w) {
		return 0, false
	}
	first, tries := w-1, 1
	for {
		p := first - 1
		for p >= 0 && rs[p].Verb == "get" {
			p-- // another worker's
		}
		if !conflict(p, first) || !get(p-1, p) {
			break
		}
		first, tries = p-1, tries+1
	}
	return first, tries <= removeFinalizerTries
}

// gcRequestsByKey indexes the GC's requests the proxy recorded by key.
func gcRequestsByKey(rs []history.GCRequest) map[history.Key][]history.GCRequest {
	m := map[history.Key][]history.GCRequest{}
	for _, r := range rs {
		m[r.Key()] = append(m[r.Key()], r)
	}
	for _, l := range m {
		slices.SortStableFunc(l, func(a, b history.GCRequest) int { return cmp.Compare(a.Received, b.Received) })
	}
	return m
}

// orphanEventApplied is orphanDependentsTaken for an in-process GC with
// recorded graph changes: its graph builder queues the owner uid for
// attemptToOrphan as it applies the first event carrying the orphan
// deletion (the write m; processTransitions), and the worker takes the
// dependents after that, so every reference the graph had applied
// before that event was among them (the one goroutine applies the
// events in turn, and stamps each once applied: graphApplied before
// the event's stamp). It returns the event's stamp and atEvent, the
// event taken after the last reset before decided (a restarted GC
// queues the owner anew); decided when the changes do not show it.
// Unlike the delivery record's bound it holds after earlier tries too:
// a later take sees no less.
func (c *checker) orphanEventApplied(uid string, m mark, decided int64) (taken int64, atEvent bool) {
	rv, ok := c.writtenVersion(m, uid)
	if !ok {
		return decided, false
	}
	since := c.resetBefore(decided)
	for _, g := range c.graph[uid] {
		if g.At >= decided {
			break
		}
		if g.At >= since && !g.Deleted && g.RV >= rv {
			return g.At, true
		}
	}
	return decided, false
}
