package lin

import (
	"cmp"
	"slices"

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
	m := map[string][]history.Delivery{}
	for _, d := range ds {
		m[d.UID] = append(m[d.UID], d)
	}
	for _, l := range m {
		slices.SortStableFunc(l, func(a, b history.Delivery) int { return cmp.Compare(a.At, b.At) })
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
// (Options.GCRequests) gives that on the delivery record's clock; without
// it the audit log's stamps stand in, which come later (kube-apiserver
// gets a request after the proxy passed it on), so that they refute
// more and admit nothing the proxy's would not.
func (c *checker) gcDecidedBy(key history.Key, uid string, in *input) int64 {
	if w := c.gcRequestOf(in); w != nil {
		var latest *history.GCRequest
		for i := range c.requests[key] {
			r := &c.requests[key][i]
			if r.Verb != "get" || r.Code != 200 || r.UID != uid || r.Answered > w.Received {
				continue
			}
			if latest == nil || r.Answered > latest.Answered {
				latest = r
			}
		}
		if latest != nil {
			return latest.Received
		}
		return w.Received
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
	return bound
}

// gcRequestOf is the proxy's record of the GC's write in: the GC's
// request of in's verb to in's object that the proxy got before
// kube-apiserver stamped in's receipt and answered after it; the latest
// the proxy got when several were in flight (the later bound refutes
// more). Nil when the proxy recorded none.
func (c *checker) gcRequestOf(in *input) *history.GCRequest {
	if in.op.Actor != history.ActorGC {
		return nil
	}
	var w *history.GCRequest
	for i := range c.requests[in.key] {
		r := &c.requests[in.key][i]
		if r.Verb != string(in.op.Verb) || r.Received > in.op.Call || r.Answered < in.op.Call {
			continue
		}
		if w == nil || r.Received > w.Received {
			w = r
		}
	}
	return w
}

// gcRequestsByKey indexes the GC's requests the proxy recorded by key.
func gcRequestsByKey(rs []history.GCRequest) map[history.Key][]history.GCRequest {
	m := map[history.Key][]history.GCRequest{}
	for _, r := range rs {
		m[r.Key()] = append(m[r.Key()], r)
	}
	return m
}
