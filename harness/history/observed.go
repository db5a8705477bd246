package history

import (
	"strconv"

	"github.com/cascade-k8s/cascade/model"
)

// ObservedOps returns an Observed op (actor "cluster") for every event
// that no op of recorded explains, of an observer started at start
// (Unix nanoseconds) that received events in order, with the interval described at Observer, and
// marks Removed the recorded DELETEs the watch shows removed the object.
//
// A DELETED event is explained when a successful recorded op removed that
// object (an immediate DELETE answers a Status without a resourceVersion,
// and a removing update answers the resourceVersion before the removal).
//
// Any other event shows the revision some write produced; it is
// explained when that write may be a recorded op: one that answered the
// object at the event's resourceVersion and is not excluded from having
// written it (see mayHaveWritten: its precondition was that revision,
// the revision was seen before it was sent, or it is a DELETE that
// changes nothing on the version before). An answer's resourceVersion alone is
// no proof of a write: a write that changes nothing is not written, and
// the API server answers it with the live object at its current
// revision, which another actor may have produced. Crediting such a
// no-op with the revision drops the other actor's write from the history
// (a controller's status update answered to a client's no-op patch that
// carried the controller's revision as its precondition, found by
// fuzzing the kubeconfig target), and the checker then rightly finds the
// no-op's precondition failed on the version before.
//
// It also completes what the watch tells of recorded ops: a successful
// DELETE whose answer is at the revision of the object's DELETED event
// removed the object, and is marked Removed in recorded. Its answer
// alone may not say so: a DELETE that read the object bare deletes it at
// once, and etcd3's conditionalDelete removes whatever version is
// current by then, answering that version as last stored (finalizers
// and deletionTimestamp included) at the deletion's revision
// (kubernetes#77988, see harness/lin's removal). A revision is one
// write's, and no other answer carries a deletion's revision (a DELETE
// or an update that finds the object gone answers the version it read),
// so the DELETE is the remover. Left unmarked, the removal would stand
// twice in the history, once as the DELETE and once Observed.
//
// Every answer also bounds the intervals of the writes around the
// revision it shows, live at some instant between its Call and Return:
// the write that produced it came before the answer's Return (an
// Observed op's Return is the earlier of that and its receive time), and
// the write that replaced it came after the answer's Call (the lower
// bound the next Observed op of the object starts from).
//
// Last, each Observed op's interval is narrowed by the order of etcd's
// revisions (revisionBounds): after the start of every write of a
// smaller revision, before any larger revision was seen.
func ObservedOps(start int64, events []WatchEvent, recorded []Op) []Op {
	deletedAt := map[string]uint64{} // by UID: the revision of its DELETED event
	for _, ev := range events {
		if ev.Removed && ev.Object.RV != 0 {
			deletedAt[ev.Object.UID] = ev.Object.RV
		}
	}
	for i := range recorded {
		op := &recorded[i]
		if op.Verb == Delete && op.OK() && !op.Removed && op.Got != nil && op.Got.UID != "" {
			if rv, ok := deletedAt[op.Got.UID]; ok && rv == op.Got.RV {
				op.Removed = true
			}
		}
	}

	answered := map[uint64][]*Op{} // successful recorded ops by the resourceVersion they answered
	removedUID := map[string]bool{}
	for i := range recorded {
		op := &recorded[i]
		if !op.OK() || op.Got == nil {
			continue
		}
		if op.Removed {
			removedUID[op.Got.UID] = true
			continue
		}
		answered[op.Got.RV] = append(answered[op.Got.RV], op)
	}
	// seen: the earliest instant each revision is known to have existed
	// at, by an event's receive time or an answer's Return.
	seen := map[uint64]int64{}
	saw := func(rv uint64, at int64) {
		if t, ok := seen[rv]; !ok || at < t {
			seen[rv] = at
		}
	}
	for _, ev := range events {
		if !ev.Removed {
			saw(ev.Object.RV, ev.At)
		}
	}
	for rv, ops := range answered {
		for _, op := range ops {
			saw(rv, op.Return)
		}
	}

	// writtenAfter and existedBy are what is known of each revision for
	// revisionBounds: a lower bound of its write, an instant it existed.
	var writtenAfter, existedBy []revAt
	for rv, at := range seen {
		existedBy = append(existedBy, revAt{rv, at})
	}
	for _, ev := range events {
		if ev.Removed && ev.Object.RV != 0 {
			existedBy = append(existedBy, revAt{ev.Object.RV, ev.At})
		}
	}
	for i := range recorded {
		if op := &recorded[i]; wroteRevision(op, deletedAt) {
			writtenAfter = append(writtenAfter, revAt{op.Got.RV, op.Call})
		}
	}

	// The Observed ops, each with the bounds the watch gives its write
	// (see Observer), narrowed by the order of revisions below.
	type pending struct {
		ev        WatchEvent
		call, ret int64
	}
	var unexplained []pending
	lower := map[string]int64{}  // by UID: a lower bound of the next write after the last event seen
	prev := map[string]*Object{} // by UID: the object as its last event showed it
	for _, ev := range events {
		uid := ev.Object.UID
		low, ok := lower[uid]
		if !ok {
			low = start
		}
		if ev.Object.RV != 0 {
			writtenAfter = append(writtenAfter, revAt{ev.Object.RV, low})
		}
		if ev.Removed {
			if removedUID[uid] {
				continue
			}
			lower[uid] = low
			unexplained = append(unexplained, pending{ev, min(low, ev.At), ev.At})
			continue
		}
		rv := ev.Object.RV
		var before *Object // the version rv replaced, when the watch showed it
		if p := prev[uid]; p != nil && !ev.Listed {
			before = p
		}
		prev[uid] = ev.Object
		var after int64 // the latest Call of an answer at rv
		explained := false
		ret := ev.At
		for _, op := range answered[rv] {
			if op.Got.UID != "" && op.Got.UID != uid {
				continue // a revision is one object's; an answer without a uid (a Scale's may lack one) is taken at its word
			}
			after = max(after, op.Call)
			ret = min(ret, op.Return)
			explained = explained || mayHaveWritten(op, rv, before, seen)
		}
		// The next write came after this one, so after low, and after
		// every answer showed rv live, so after their Calls.
		lower[uid] = max(low, after)
		if explained {
			continue // the write is a recorded op's
		}
		unexplained = append(unexplained, pending{ev, min(low, ret), ret})
	}

	bounds := newRevisionBounds(writtenAfter, existedBy)
	out := make([]Op, 0, len(unexplained))
	for _, p := range unexplained {
		call, ret := p.call, p.ret
		if rv := p.ev.Object.RV; rv != 0 {
			call, ret = max(call, bounds.after(rv)), min(ret, bounds.by(rv))
			if call > ret {
				// The revisions contradict the clock (a cluster whose
				// kinds are not all in one etcd): the watch's bounds
				// alone.
				call, ret = p.call, p.ret
			}
		}
		out = append(out, observedOp(p.ev, call, ret))
	}
	return out
}

// mayHaveWritten reports whether the successful op, which answered the
// object at revision rv, may be the write that produced rv; before is
// the version rv replaced, if the watch showed it (nil otherwise). The
// op is not the write when it provably wrote nothing, or when rv
// provably existed before the op took effect, for a write always yields
// a new revision:
//   - the op's resourceVersion precondition is rv: it was checked against
//     rv as the live version (a no-op patch answers the version it read);
//   - rv was seen, by an event received or another answer returned,
//     before the op was sent;
//   - the op is a DELETE that changes nothing on before: before was being
//     deleted already and the DELETE's options call for no change of its
//     finalizers (DeletionFinalizers leaves them as they are). Such a
//     DELETE writes nothing (the generic registry returns early on a
//     pending graceful deletion, and etcd3 does not write an update that
//     changes nothing; see harness/lin's delete) and is answered the live
//     object, which another actor may have written after before: the GC
//     removing foregroundDeletion from a Pod, answered to a second DELETE
//     without options that was sent before the watch delivered the GC's
//     write (found by fuzzing the kubeconfig target, seed 77). A DELETE
//     may still shorten a Pod's grace period, which the history does not
//     read: such a write changes nothing the checker judges, so taking it
//     for another actor's changes no verdict.
//
// None of these excludes a writer wrongly. The first two rest only on a
// write producing a revision that did not exist before it was sent. The
// third rests on the API server's rule that a DELETE which changes
// nothing writes nothing: had the DELETE written rv, it would have found
// before live, for a watch shows an object's revisions in order, so the
// version rv replaced is before (which is not taken across a relist),
// and on before the DELETE changes nothing. Excluding a writer wrongly
// would matter, as an Observed op would then stand for the recorded
// write, which the checker could take as a no-op answer.
//
// An op none of these excludes is taken for the write. Should it have
// been a no-op all the same (one without preconditions answered a
// revision another actor wrote before the watch delivered it, on an
// object that was not yet being deleted, or a DELETE that changes
// finalizers as its options say), the checker judges it as the write
// from the version before, more strictly than the Observed op it hides:
// a misattribution can raise a false alarm, never hide a fault.
func mayHaveWritten(op *Op, rv uint64, before *Object, seen map[uint64]int64) bool {
	if pre, ok := op.preconditionRV(); ok && pre == rv {
		return false
	}
	if t, ok := seen[rv]; ok && t < op.Call {
		return false
	}
	if op.Verb == Delete && before != nil && before.Deleting &&
		SameFinalizers(DeletionFinalizers(before, op.Delete), before.Finalizers) {
		return false
	}
	return true
}

// SameFinalizers reports whether a and b hold the same finalizers, in any
// order (model.SameFinalizers).
func SameFinalizers(a, b []string) bool { return model.SameFinalizers(a, b) }

// preconditionRV returns the resourceVersion precondition the op sent,
// if any: a DELETE's Preconditions.ResourceVersion, or the
// metadata.resourceVersion of an update or a merge patch.
func (op *Op) preconditionRV() (uint64, bool) {
	switch {
	case op.Verb == Delete:
		if op.Delete == nil || op.Delete.PreconditionRV == "" {
			return 0, false
		}
		rv, err := strconv.ParseUint(op.Delete.PreconditionRV, 10, 64)
		return rv, err == nil
	case (op.Verb == Update || op.Verb == Patch) && op.Sent != nil && op.Sent.RV != 0:
		return op.Sent.RV, true
	}
	return 0, false
}

func observedOp(ev WatchEvent, call, ret int64) Op {
	return Op{Actor: ActorCluster, Verb: Observed, Kind: ev.Object.Kind, Namespace: ev.Object.Namespace,
		Name: ev.Object.Name, Code: 200, Got: ev.Object, Removed: ev.Removed, Call: call, Return: ret}
}
