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
// to the object at key with this UID on what it had seen: the Call of
// the GC's latest GET of the object that answered this UID and returned
// before in was sent (removeFinalizer and attemptToDeleteItem decide,
// then GET, then write), else in's own Call.
func (c *checker) gcDecidedBy(key history.Key, uid string, in *input) int64 {
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
