package lin

import (
	"github.com/cascade-k8s/cascade/harness/history"
)

// kube-controller-manager's graph builder log (Options.GraphLog) as
// evidence. The proxy's delivery record says when each watch event was
// handed to the GC's informers, a lower bound on when the graph may hold
// it. It says nothing about the order in which the graph took in the
// events of different informers: each informer hands its events to the
// graph builder's queue from goroutines of its own (reflector, FIFO,
// processLoop, listener), so an event handed to the ReplicaSets informer
// before another was handed to the Deployments informer may still be
// applied after it (kubernetes#26120 item 1; found by fuzzing v1.37.2,
// where an adoption handed on 0.18 ms before its owner's orphan deletion
// was missed by attemptToOrphan). The graph builder's own log line for
// each event it begins to apply, written from its one goroutine, gives
// that order exactly.

// applied is one event of one object the graph builder began to apply,
// paired with the delivery that carried it. When the graph builder logs
// each event k times (one line per event handler its monitors
// registered on the informer: a custom resource whose CRD was deleted
// and created again keeps its stopped monitor's handler, the
// stopped-monitor race), the i-th event's first line, the one that
// changed the graph, is among the object's lines i to k·i: each handler
// hands the events on in order, so at least i lines come before it, and
// only copies of the i earlier events, at most k·i. seq and at are the
// first bound's, seqLate and atLate the second's (equal when k is 1).
type applied struct {
	rv           uint64
	deleted      bool
	seq, seqLate int   // place in the log
	at, atLate   int64 // klog stamp: the graph builder began at or after it
}

// appliedByUID pairs each object's graph builder lines (leaving out the
// virtual ones, which no delivery carried) with its deliveries, in order:
// an informer and the graph builder's queue keep one object's events in
// order, and each of the GC's event handlers queues one graph change per
// event (graph_builder.go controllerFor). An object whose lines are k
// times its deliveries (k handlers, see applied) pairs with bounds; one
// whose lines do not pair (not a multiple, or deletes not k times the
// deleted deliveries, or with k = 1 a delete paired with an update) is
// left out, so that the log proves nothing about it: a relist hands
// objects on in a LIST, which the delivery record does not hold, and a
// restarted kube-controller-manager lists everything again.
func appliedByUID(log []history.Processed, delivered map[string][]history.Delivery) map[string][]applied {
	lines := map[string][]history.Processed{}
	for _, p := range log {
		if !p.Virtual {
			lines[p.UID] = append(lines[p.UID], p)
		}
	}
	out := map[string][]applied{}
	for uid, ls := range lines {
		ds := delivered[uid]
		if len(ds) == 0 || len(ls)%len(ds) != 0 {
			continue
		}
		k := len(ls) / len(ds)
		deletes := 0
		for i := range ls {
			if ls[i].Deleted {
				deletes++
			}
		}
		as := make([]applied, len(ds))
		ok := true
		for i := range ds {
			if ds[i].Deleted {
				deletes -= k
			}
			first, late := ls[i], ls[k*i]
			if k == 1 && first.Deleted != ds[i].Deleted {
				ok = false
				break
			}
			as[i] = applied{rv: ds[i].RV, deleted: ds[i].Deleted, seq: first.Seq, seqLate: late.Seq, at: first.At, atLate: late.At}
		}
		if ok && deletes == 0 {
			out[uid] = as
		}
	}
	return out
}

// firstApplied finds the first event of the object uid at version rv or
// later that the graph builder began to apply; paired is false when the
// log does not pair the object's events (appliedByUID), found false when
// it paired them and none carried rv.
func (c *checker) firstApplied(uid string, rv uint64) (a applied, found, paired bool) {
	as, paired := c.applied[uid]
	if !paired {
		return applied{}, false, false
	}
	for _, x := range as {
		if x.rv >= rv {
			return x, true, true
		}
	}
	return applied{}, false, true
}

// refSeen reports whether the evidence shows the GC's graph held d's
// reference when the GC took the dependents of the owner uid for its
// write, which it did at taken or, when atEvent, possibly as early as
// when it applied the event carrying the owner's write m
// (orphanDependentsTaken). With the graph builder's log pairing both
// objects (byLog): when atEvent, seen exactly when the graph builder
// began to apply the reference before the owner's event (its one
// goroutine finished the first before starting the second); otherwise
// seen when it began before taken (a stamp before taken does not prove
// the reference was in when the worker read, so this errs towards
// reporting). Without it, the delivery record or an in-process GC's
// graph changes: seen when they show the GC had the reference before
// taken (refHad).
func (c *checker) refSeen(d depRef, owner string, m mark, taken int64, atEvent bool) (seen, byLog bool) {
	if d.e.prov != nil {
		if rv, ok := c.writtenVersion(d.e.prov.refs[d.i].by, d.e.obj.UID); ok {
			if ref, found, paired := c.firstApplied(d.e.obj.UID, rv); paired {
				if orv, ok := c.writtenVersion(m, owner); ok && atEvent {
					if ev, evFound, _ := c.firstApplied(owner, orv); evFound {
						switch {
						case !found || ref.seq > ev.seqLate:
							return false, true
						case ref.seqLate < ev.seq:
							return true, true
						}
						// the bounds overlap: the log cannot tell
						return c.refHad(d, taken), false
					}
				}
				switch {
				case !found || ref.at >= taken:
					return false, true
				case ref.atLate < taken:
					return true, true
				}
				return c.refHad(d, taken), false
			}
		}
	}
	return c.refHad(d, taken), false
}

// refHad reports whether the GC may have had d's reference before the
// instant t (hadVersion of the version that wrote it: on an in-process
// GC's graph changes exact, where a delivery is only a lower bound). A
// reference whose write the history does not show counts as had: it
// proves nothing, so the rule reports.
func (c *checker) refHad(d depRef, t int64) bool {
	if d.e.prov == nil {
		return true
	}
	rv, ok := c.writtenVersion(d.e.prov.refs[d.i].by, d.e.obj.UID)
	return !ok || c.hadVersion(d.e.obj.UID, rv, t)
}
