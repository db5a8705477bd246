package lin

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// Names of the rules the checker adds to the model's properties (the
// others it reports under model.Prop* names).
const (
	// PropAPISemantics: every answer is one the API server could give on
	// the state the op linearizes at.
	PropAPISemantics = "the API server's answers are linearizable"
	// PropGCWrites: a GC patch only removes dangling or waiting
	// ownerReferences or those of an owner orphaning, unblocks references
	// only of an object with a waiting owner, removes only its own
	// finalizers from an object being deleted, and adds nothing.
	PropGCWrites = "the GC writes only what it may"
	// PropGCResolvable: the GC never deletes or unreferences an object
	// through a reference it cannot resolve (a kind nobody serves, or a
	// cluster-scoped dependent naming a namespaced owner kind).
	PropGCResolvable = "the GC never acts on an unresolvable reference"
	// PropAdoption: a controller adopts (adds a controller
	// ownerReference) only to an owner that is not being deleted and,
	// where the controllers' reads are recorded, exists
	// (RecheckDeletionTimestamp, kubernetes#42938).
	PropAdoption = "no adoption by an owner being deleted"
	// PropCycleUnblocked: the GC deletes an object in the foreground, as
	// a waiting owner's dependent with dependents of its own, only after
	// the cycle-breaking unblock when one of those dependents is itself
	// deleting its dependents: the object then keeps no blocking
	// ownerReference (attemptToDeleteItem; synchronous GC design,
	// "Handling circular dependencies"). Without it, the two wait for
	// each other for ever (no-cycle-unblock).
	PropCycleUnblocked = "the GC unblocks a foreground cycle before deleting into it"
)

// violation is a broken rule; known names the upstream issue when a
// documented race explains it, and basis what the excuse rests on
// (Known.Basis).
type violation struct {
	property, message, known string
	basis                    string
}

// admit leaves v's excuse to the registry: a race the checked release
// does not carry (model.KnownIn) excuses nothing, whatever the site that
// named it saw.
func (c *checker) admit(v *violation) {
	if k, why := model.KnownIn(v.known, c.release); v.known != "" && k == "" {
		v.known, v.basis, v.message = "", "", v.message+"; "+why
	}
}

func (v *violation) String() string {
	s := v.message + " [" + v.property + "]"
	if v.known != "" {
		s += " (known upstream race " + v.known + ")"
	}
	return s
}

// rules checks an applied op of the GC or a controller on the state s it
// linearizes at: cur is the key's entry before, next after (nil: absent).
// Facts an ambiguous write left uncertain are not judged.
func (c *checker) rules(s *store, cur, next *entry, in *input) *violation {
	op := in.op
	switch {
	case op.Actor == history.ActorGC:
		if op.Verb == history.Create {
			return &violation{PropGCWrites, fmt.Sprintf("gc created %s", in.key), "", ""}
		}
		if cur == nil || !cur.known() || (next != nil && !next.known()) {
			return nil
		}
		if op.Verb == history.Delete {
			return c.gcDelete(s, cur, next, in)
		}
		return c.gcPatch(s, cur, next, in)
	case strings.HasPrefix(op.Actor, "controller/"):
		if (op.Verb == history.Update || op.Verb == history.Patch) && cur != nil && cur.known() && next != nil && next.known() {
			return c.adoption(s, cur, next, in)
		}
	}
	return nil
}

// racy reports whether the write at m may not yet have been seen by the
// component that sent in: it returned less than the race window before
// in was sent (or never returned).
func (c *checker) racy(m mark, in *input) bool {
	return m >= 0 && c.ins[m].ret > in.op.Call-c.window
}

// gcDelete: a GC DELETE lands only on an object with ownerReferences, all
// of which resolve and none to a solid owner (model checkSolidOwner,
// upstream attemptToDeleteItem's default arm), and never puts the orphan
// finalizer on (model checkSilentOrphan).
func (c *checker) gcDelete(s *store, cur, next *entry, in *input) *violation {
	v := c.gcDeleteRules(s, cur, next, in)
	if v != nil {
		c.admit(v) // a race of another release excuses nothing: try the next
	}
	if v != nil && v.known == "" && (v.property == model.PropNoSolidOwnerCollected || v.property == PropGCResolvable) {
		c.ownersChangedBeforeDelete(cur, in, v)
	}
	return v
}

// ownersChangedBeforeDelete classifies v, a GC DELETE that collected an
// object it may not, as kubernetes#114603 on a release that has it
// (lenient mode, reads recorded): the DELETE carried no resourceVersion
// precondition (before kubernetes#132632, v1.34.0), the GC's latest GET
// of the object before it answered other ownerReferences than the
// object had when the DELETE landed, and another write to the object
// came after that GET and before the DELETE returned: a client's, or one
// of the GC's own other workers' (attemptToOrphan's patch of the same
// dependent, seen on v1.31.13), which the deciding worker's GET did not
// see either. A window alone never admits it.
func (c *checker) ownersChangedBeforeDelete(cur *entry, in *input, v *violation) {
	k, _ := model.KnownRaceByID(model.KnownOwnerChangeBeforeDelete)
	if !c.lenient || !c.readsRecorded || !k.PresentIn(c.release) || in.op.Delete == nil || in.op.Delete.PreconditionRV != "" || !cur.known() {
		return
	}
	var get *history.Read
	for i := range c.reads[in.key] {
		r := &c.reads[in.key][i]
		if r.Actor == history.ActorGC && r.Return <= in.op.Call && (get == nil || r.Return > get.Return) {
			get = r
		}
	}
	if get == nil || get.Code != 200 || get.Got == nil || get.Got.UID != cur.obj.UID || slices.Equal(get.Got.Owners, cur.obj.Owners) {
		return
	}
	for _, o := range c.ins {
		op := o.op
		if o == in || o.key != in.key || !op.OK() || op.Verb == history.Delete || op.Call < get.Call || op.Call >= in.op.Return {
			continue
		}
		if v.known, v.basis = model.Excuse(k.ID), basisReads; v.known != "" {
			v.message += fmt.Sprintf("; the GC's GET answered it with ownerReferences %s, op %d (%s) changed them before the DELETE landed, and the DELETE carried no resourceVersion precondition: kubernetes#114603, present in this release (%s; %s fixed it in %s)",
				refNames(get.Got.Owners), o.id, op.Actor, c.release, model.ReleaseChanges[model.ChangeGCDeleteRV].PR, model.ReleaseChanges[model.ChangeGCDeleteRV].Since)
		}
		return
	}
}

// refNames lists references by kind and name.
func refNames(refs []history.Ref) string {
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Kind + "/" + r.Name
	}
	return "[" + strings.Join(names, " ") + "]"
}

func (c *checker) gcDeleteRules(s *store, cur, next *entry, in *input) *violation {
	d := cur.obj
	if len(d.Owners) == 0 {
		return c.retryRace(in, &violation{model.PropNoSolidOwnerCollected, fmt.Sprintf("gc deleted %s, which has no ownerReferences", in.key), "", ""})
	}
	// classifyReferences as far as s is certain of the owners; an
	// uncertain one ends the classification, and the verdict then rests
	// on what came before it.
	classes := make([]refState, 0, len(d.Owners))
	owners := make([]*entry, 0, len(d.Owners))
	uncertain := false
	for i := range d.Owners {
		st, o := resolve(s, d, &d.Owners[i])
		if st == refUncertain {
			uncertain = true
			break
		}
		classes, owners = append(classes, st), append(owners, o)
	}
	if i := model.GCDeleteBlocker(classes); i >= 0 && classes[i] == refUnresolvable {
		r := &d.Owners[i]
		v := &violation{PropGCResolvable, fmt.Sprintf("gc deleted %s through its reference to %s %s", in.key, r.APIVersion+"/"+r.Kind, r.Name), "", ""}
		c.borrowedNamespace(s, cur, i, in, v)
		return v
	}
	if uncertain {
		return nil
	}
	var solid []*entry
	if !model.GCMayDelete(classes) {
		for i, st := range classes {
			if st == refSolid {
				solid = append(solid, owners[i])
			}
		}
	}
	if len(solid) > 0 {
		o := solid[0]
		v := &violation{model.PropNoSolidOwnerCollected, fmt.Sprintf("gc deleted %s while its owner %s (uid %s) was live and not waiting for dependents",
			in.key, o.key, short(o.obj.UID)), "", ""}
		var why string
		// The owner was in foreground deletion, so attemptToDeleteItem
		// decided to delete its dependent, and within the race window
		// before the DELETE was sent a DELETE switched it to orphan
		// (kubernetes#32339, DELETE path) or foregroundDeletion went
		// (processDeletingDependentsItem removes it once no dependent
		// blocks, and a non-blocking one never does). The
		// resourceVersion precondition guards the dependent, not its
		// owner (the model's no solid owner collected finds the same).
		v.known, why, v.basis = c.allStoppedWaiting(solid, in)
		v.message += why
		if v.known == "" {
			v = c.retryRace(in, v)
		}
		return v
	}
	if v := c.cycleUnblocked(s, cur, in); v != nil {
		return v
	}
	if next != nil && next.obj.HasFinalizer(model.FinalizerOrphan) && !d.HasFinalizer(model.FinalizerOrphan) {
		v := &violation{model.PropNeverSilentlyOrphaned, fmt.Sprintf("gc's delete of %s put the orphan finalizer on it", in.key), "", ""}
		// attemptToDeleteItem asks for Orphan only to honour an orphan
		// finalizer its GET saw, the deleting client's choice (model
		// checkSilentOrphan). attemptToOrphan may remove it after that
		// GET and before the DELETE lands on the object, still deleting;
		// the DELETE puts it back and attemptToOrphan runs again.
		// With the GC's GETs recorded, the window is not consulted: its
		// latest GET of the object must have answered it with the orphan
		// finalizer, at a version older than the write that removed it.
		orphanAsked := in.op.Delete != nil && in.op.Delete.Propagation == "Orphan"
		switch {
		case !c.lenient || !orphanAsked || !d.Deleting || cur.prov == nil:
		case c.readsRecorded:
			if g := c.gcSawOrphan(cur, in); g != nil {
				v.known, v.basis = model.Excuse(model.KnownStaleOrphanPolicy), basisReads
				v.message += fmt.Sprintf("; op %d removed it after the GC's GET answered the object with it at resourceVersion %d, and the GC asked for Orphan as its GET had seen", cur.prov.orphanGone, g.Got.RV)
			}
		case c.racy(cur.prov.orphanGone, in):
			v.known, v.basis = model.Excuse(model.KnownStaleOrphanPolicy), basisWindow
			v.message += fmt.Sprintf("; op %d removed it within the race window before, and the GC asked for Orphan as its GET had seen", cur.prov.orphanGone)
		}
		return v
	}
	return nil
}

// gcSawOrphan is the GC's latest GET of cur's object before in was sent
// when it answered the object with the orphan finalizer at a version
// older than the write that removed it (prov.orphanGone), nil otherwise:
// attemptToDeleteItem asks for Orphan only as that GET showed.
func (c *checker) gcSawOrphan(cur *entry, in *input) *history.Read {
	var latest *history.Read
	for i := range c.reads[in.key] {
		if r := &c.reads[in.key][i]; r.Actor == history.ActorGC && r.Return <= in.op.Call && (latest == nil || r.Return > latest.Return) {
			latest = r
		}
	}
	if latest == nil || latest.Got == nil || latest.Got.UID != cur.obj.UID || !latest.Got.HasFinalizer(model.FinalizerOrphan) {
		return nil
	}
	if rv, ok := c.writtenVersion(cur.prov.orphanGone, cur.obj.UID); ok && latest.Got.RV >= rv {
		return nil
	}
	return latest
}

// retryRace classifies v, a GC DELETE that collected an object it may
// not, as upstream's deleteObject retry (lenient mode only): when the
// GC's DELETE fails its resourceVersion precondition, deleteObject GETs
// the object and, if its ownerReferences still equal those the GC
// decided on, deletes again with only the UID precondition
// (operations.go, kubernetes#132632). A client write landing between
// that GET and the DELETE — removing the last ownerReference, or adding
// a live owner — goes unnoticed, and the object is collected. The sign
// in the history is in itself: a GC DELETE without a resourceVersion
// precondition whose latest earlier GC DELETE of the object was refused
// with 409 Conflict while carrying one (found by fuzzing impl, which
// mirrors deleteObject).
func (c *checker) retryRace(in *input, v *violation) *violation {
	if !c.lenient || in.op.Delete == nil || in.op.Delete.PreconditionRV != "" {
		return v
	}
	var prev *history.Op
	for _, o := range c.ins {
		op := o.op
		if o == in || op.Actor != history.ActorGC || op.Verb != history.Delete || o.key != in.key || op.Call >= in.op.Call {
			continue
		}
		if prev == nil || op.Call > prev.Call {
			prev = op
		}
	}
	if prev == nil || prev.Code != 409 || prev.Delete == nil || prev.Delete.PreconditionRV == "" {
		return v
	}
	v.known, v.basis = model.Excuse(model.KnownRetryWithoutRV), basisOrder
	v.message += "; its DELETE had failed its resourceVersion precondition, and deleteObject retried it without one after a GET that showed the same ownerReferences"
	return v
}

// gcPatch: what a GC update or patch may change (upstream
// attemptToDeleteItem's patch arms, unblockOwnerReferences,
// orphanDependents, removeFinalizer).
func (c *checker) gcPatch(s *store, cur, next *entry, in *input) *violation {
	d := cur.obj
	var after []string
	if next != nil {
		nx := next.obj
		after = nx.Finalizers
		for _, r := range nx.Owners {
			prev, had := matchRef(d.Owners, r)
			switch {
			case !had:
				v := &violation{PropGCWrites, fmt.Sprintf("gc added an ownerReference to %s %s on %s", r.Kind, r.Name, in.key), "", ""}
				c.unblockedFromGraph(d, r, in, v)
				return v
			case prev == r:
			case prev.Block && !r.Block && !r.BlockUnset && prev.Controller == r.Controller && prev.ControllerUnset == r.ControllerUnset && prev.Kind == r.Kind && prev.Name == r.Name && prev.APIVersion == r.APIVersion:
				if !hasWaitingOwner(s, d) {
					v := &violation{PropGCWrites, fmt.Sprintf("gc set blockOwnerDeletion=false on %s's reference to %s, and no owner of it was waiting for dependents", in.key, r.Name), "", ""}
					c.waitEnded(s, d, in, v)
					return v
				}
			default:
				return &violation{PropGCWrites, fmt.Sprintf("gc changed %s's ownerReference to %s", in.key, r.Name), "", ""}
			}
		}
		for i := range d.Owners {
			r := &d.Owners[i]
			if _, kept := findRef(nx.Owners, r.UID); kept {
				continue
			}
			st, o := resolve(s, d, r)
			if model.RefRemovable(st) {
				continue
			}
			switch st {
			case refUnresolvable:
				// attemptToOrphanWorker orphans every dependent the graph
				// holds for the owner, and GraphBuilder.addDependentToOwners
				// links dependents by UID even through a reference it
				// reports as invalid (a cluster-scoped dependent of a
				// namespaced owner): removing a reference to an owner that
				// is orphaning is upstream's own orphan path (found by
				// fuzzing v1.36.3).
				if owner := liveByUID(s, r.UID); owner != nil {
					if v := viewOf(owner.obj); model.Orphaning(&v) {
						continue
					}
				}
				v := &violation{PropGCResolvable, fmt.Sprintf("gc removed %s's reference to %s %s", in.key, r.APIVersion+"/"+r.Kind, r.Name), "", ""}
				c.borrowedNamespace(s, cur, i, in, v)
				// kubernetes#32339, the other way: attemptToOrphan began
				// on the owner's orphan finalizer, and a DELETE switched
				// the deletion to Foreground (removing it) before this
				// patch landed
				// With the proxy's delivery record or an in-process
				// GC's graph changes the window is not consulted:
				// attemptToOrphan began only if an event of the owner
				// deleting with the orphan finalizer had been handed to
				// the GC's informers (applied to its graph) before the
				// patch.
				if c.lenient && c.graphEvidence() {
					if m := c.orphanHandedOn(r.UID, in); m >= 0 {
						v.known, v.basis = model.Excuse(model.KnownPolicySwitch), c.graphEvidenceBasis()
						v.message += c.orphanHandedOnWhy(m)
					}
				} else if m := switchedFromOrphan(s, r.UID); c.lenient && c.racy(m, in) {
					v.known, v.basis = model.Excuse(model.KnownPolicySwitch), basisWindow
					v.message += fmt.Sprintf("; op %d switched the owner's orphan deletion to foreground after attemptToOrphan began", m)
				} else if m := c.recentVersion(r.UID, in, orphaning); v.known == "" && c.lenient && m >= 0 && !liveUID(s, r.UID) {
					// the same, the owner then removed (a DELETE with
					// Background took the orphan finalizer off):
					// attemptToOrphan holds the owner's node, removed or not
					v.known, v.basis = model.Excuse(model.KnownPolicySwitch), basisWindow
					v.message += fmt.Sprintf("; op %d answered the owner with the orphan finalizer within the race window before, and it was removed since, as attemptToOrphan orphaned its dependents", m)
				}
				return v
			case refSolid:
				if v := viewOf(o.obj); !model.Orphaning(&v) {
					// attemptToDeleteItem's solid arm removes the
					// references to waiting owners too
					known, why, basis := c.stoppedWaiting(o, in)
					if known == "" && c.lenient && c.graphEvidence() {
						// kubernetes#32339 again: attemptToOrphan began on
						// the orphan finalizer, and a DELETE with
						// Background took it off before this patch landed
						if m := c.orphanHandedOn(r.UID, in); m >= 0 {
							known, why, basis = model.Excuse(model.KnownPolicySwitch), c.orphanHandedOnWhy(m), c.graphEvidenceBasis()
						}
					}
					return &violation{PropGCWrites, fmt.Sprintf("gc removed %s's reference to %s, a solid owner that is not orphaning", in.key, o.key) + why, known, basis}
				}
			}
		}
		if !maps.Equal(d.Labels, nx.Labels) {
			return &violation{PropGCWrites, fmt.Sprintf("gc changed the labels of %s", in.key), "", ""}
		}
	}
	for _, f := range after {
		if !d.HasFinalizer(f) {
			return &violation{PropGCWrites, fmt.Sprintf("gc added finalizer %q to %s", f, in.key), "", ""}
		}
	}
	// finalizers put on after the version the write checked went with
	// the API server's removal, not the GC's write (emptiedRemoval)
	late, _ := c.laterFinalizers(cur, in)
	for _, f := range d.Finalizers {
		if slices.Contains(after, f) || slices.Contains(late, f) {
			continue
		}
		if v := viewOf(d); model.GCFinalizerDenial(&v, f) != "" {
			return &violation{PropGCWrites, fmt.Sprintf("gc removed %s from %s: %s", f, in.key, model.GCFinalizerDenial(&v, f)), "", ""}
		}
		block := model.GCFinalizerWaits(f)
		deps := referrers(s, cur, block)
		if len(deps) == 0 {
			continue
		}
		v := &violation{model.PropOrphanRespected, fmt.Sprintf("gc removed orphan from %s while %s still references it", in.key, deps[0].e.key), "", ""}
		m, late := noMark, lateOrphan
		if cur.prov != nil {
			m = cur.prov.orphan
		}
		if block {
			v = &violation{model.PropForegroundWaits, fmt.Sprintf("gc removed foregroundDeletion from %s while %s, a blocking dependent, exists", in.key, deps[0].e.key), "", ""}
			late = lateForeground
			if cur.prov != nil {
				m = cur.prov.fg
			}
		}
		// kubernetes#26120 (item 1; the synchronous-GC design's
		// "unhandled cases" for foreground): the GC acts on the
		// dependents in its graph, and may not have observed every
		// dependent's reference when it processed the owner's deletion.
		// That is possible only if the reference was written after the
		// owner's finalizer in the linearization, or, through another
		// resource's watch (which nothing orders against the owner's),
		// less than the race window before it.
		// With the proxy's delivery record, it is possible only if no
		// event carrying the reference had been handed to the GC's
		// informers by the time the GC decided, or, with the graph
		// builder's log, if the graph took the reference in after the
		// owner's event or the decision (refSeen); with an in-process
		// GC's recorded graph changes, only if its graph had not applied
		// the reference by then (refHad). The race window is consulted
		// only without either: after an API server restart an informer
		// can lag its watch by far more than the window
		// (fuzz.APIServerRewatch), and only the graph's record tells the
		// race from a GC that ignored a dependent it had.
		if c.graphEvidence() && c.lenient && m >= 0 {
			taken, get := c.gcDecidedByGET(in.key, d.UID, in)
			atEvent := false
			if block {
				taken = c.foregroundRead(in.key, d.UID, get, taken)
			} else {
				taken, atEvent = c.orphanDependentsTaken(in.key, d.UID, m, taken)
			}
			seen, logged, seenByLog := -1, 0, false
			for i, dr := range deps {
				s, byLog := c.refSeen(dr, d.UID, m, taken, atEvent)
				if byLog {
					logged++
				}
				if s {
					seen, seenByLog = i, byLog
					break
				}
			}
			switch {
			case seen < 0 && logged == len(deps):
				v.known, v.basis = model.Excuse(model.KnownUnobservedDependent), basisGraph
				v.message += "; kube-controller-manager's graph builder took the reference in only after the owner's event or the GC's decision (its log)"
			case seen < 0:
				v.known, v.basis = model.Excuse(model.KnownUnobservedDependent), c.graphEvidenceBasis()
				v.message += c.byEvidence("; no event carrying the reference had been handed to the GC's informers when it decided (the proxy's delivery record)",
					"; the GC's graph had not applied the reference when it decided (its recorded graph changes)")
			case seenByLog:
				v.message += fmt.Sprintf("; kube-controller-manager's graph builder had taken %s's reference in before the GC took the owner's dependents (its log)", deps[seen].e.key)
			default:
				v.message += fmt.Sprintf(c.byEvidence("; the proxy's delivery record shows %s's reference had been handed to the GC's informers before it decided",
					"; the GC's recorded graph changes show its graph had %s's reference before it took the owner's dependents"), deps[seen].e.key)
			}
		} else if c.lenient && m >= 0 && all(deps, func(d depRef) bool { return c.unobserved(d, cur, m, late) }) {
			v.known, v.basis = model.Excuse(model.KnownUnobservedDependent), basisOrder
			if !all(deps, func(d depRef) bool { return d.e.prov != nil && d.e.prov.refs[d.i].late&late != 0 }) {
				v.basis = basisWindow
			}
			v.message += "; the GC had not observed it when it processed the deletion"
		}
		return v
	}
	return nil
}

// adoption: a controller's write adding a controller ownerReference to an
// owner being deleted, or, when the controllers' reads are recorded
// (Options.ReadsRecorded), to an owner that is gone: upstream's
// RecheckDeletionTimestamp refuses both, and the second is
// kubernetes#42639's orphan adoption itself, the owner's orphan
// finalizer removed before the adoption lands. Known as
// kubernetes#42938's residual race when the deletion may have happened
// between the controller's recheck GET and its PATCH: with the reads
// recorded, only if the same controller's GET of the owner answered it
// live within the race window before the write (recheck); without them,
// when the owner's deletion started within the race window before the
// write (a history without reads cannot tell a controller that skipped
// its recheck from one that raced, so an adoption to a gone owner is
// not judged at all).
func (c *checker) adoption(s *store, cur, next *entry, in *input) *violation {
	for i := range next.obj.Owners {
		r := &next.obj.Owners[i]
		if !r.Controller {
			continue
		}
		// not an adoption when the object already had a controller
		// reference to this UID (among several to it, say: found by
		// fuzzing, a status update echoing an rc's references)
		if slices.ContainsFunc(cur.obj.Owners, func(p history.Ref) bool { return p.UID == r.UID && p.Controller }) {
			continue
		}
		var v *violation
		var key history.Key
		switch st, o := resolve(s, next.obj, r); {
		case (st == refSolid || st == refWaiting) && o.obj.Deleting:
			v = &violation{PropAdoption, fmt.Sprintf("%s adopted %s to %s, which was being deleted", in.op.Actor, in.key, o.key), "", ""}
			key = o.key
			if c.lenient && !c.readsRecorded && o.prov != nil && c.racy(o.prov.delStart, in) {
				v.known, v.basis = model.Excuse(model.KnownAdoptionRecheck), basisWindow
				v.message += "; the deletion started between the controller's recheck and its write"
			}
		case st == refDangling && c.readsRecorded:
			key, _ = ownerKey(next.obj, r)
			v = &violation{PropAdoption, fmt.Sprintf("%s adopted %s to %s (uid %s), which was gone", in.op.Actor, in.key, key, short(r.UID)), "", ""}
		default:
			continue
		}
		if !c.lenient || !c.readsRecorded {
			return v
		}
		live, why := c.recheck(key, r.UID, in)
		if live != nil {
			v.known, v.basis = model.Excuse(model.KnownAdoptionRecheck), basisReads
			v.message += fmt.Sprintf("; the deletion came between the controller's recheck GET, which answered the owner live %s before the write, and its write",
				time.Duration(in.op.Call-live.Return).Round(time.Millisecond))
			return v
		}
		v.message += "; " + why
		return v
	}
	return nil
}

// recheck finds the adopting controller's recheck of the owner at key
// with this UID before the write in: a GET by the same actor of key that
// answered 200 with the UID and no deletionTimestamp, and returned before
// the write was sent, no longer than the race window before
// (RecheckDeletionTimestamp's canAdoptFunc, an uncached GET, in the
// ReplicaSet controller's claimPods and the Deployment controller's
// getReplicaSetsForDeployment). Without one, why says what the reads
// show: no recheck at all, or a recheck that showed the owner being
// deleted or gone.
func (c *checker) recheck(key history.Key, uid string, in *input) (live *history.Read, why string) {
	call := in.op.Call
	var saw *history.Read // the latest GET in the window that did not show the owner live
	for i := range c.reads[key] {
		r := &c.reads[key][i]
		if r.Actor != in.op.Actor || r.Return >= call || r.Return < call-c.window {
			continue
		}
		if r.Code == 200 && r.Got != nil && r.Got.UID == uid && !r.Got.Deleting {
			if live == nil || r.Return > live.Return {
				live = r
			}
			continue
		}
		if saw == nil || r.Return > saw.Return {
			saw = r
		}
	}
	switch {
	case live != nil:
		return live, ""
	case saw == nil:
		return nil, fmt.Sprintf("the controller adopted without rechecking the owner (no GET of it by %s returned within the race window before the write)", in.op.Actor)
	case saw.Code == 200 && saw.Got != nil && saw.Got.UID == uid:
		return nil, "the controller adopted despite its recheck showing the deletion (its GET answered the owner with a deletionTimestamp)"
	}
	return nil, fmt.Sprintf("the controller adopted despite its recheck finding the owner gone (its GET answered %d)", saw.Code)
}

// readsByKey indexes the reads by the key of the object read.
func readsByKey(reads []history.Read) map[history.Key][]history.Read {
	m := map[history.Key][]history.Read{}
	for _, r := range reads {
		m[r.Key()] = append(m[r.Key()], r)
	}
	return m
}

// depRef is a dependent's reference to an owner: the entry and the index
// of the reference.
type depRef struct {
	e *entry
	i int
}

// referrers lists the live objects (other than owner) with a reference to
// the owner's UID, only blocking ones if block: the dependents the GC's
// graph would hold for it (blockingDependents).
func referrers(s *store, owner *entry, block bool) []depRef {
	var out []depRef
	s.each(func(e *entry) bool {
		if e == owner || !e.known() {
			return true
		}
		for i, r := range e.obj.Owners {
			if r.UID == owner.obj.UID && (r.Block || !block) && resolves(e.obj, r, owner.obj) {
				out = append(out, depRef{e, i})
			}
		}
		return true
	})
	slices.SortFunc(out, func(a, b depRef) int {
		if keyLess(a.e.key, b.e.key) {
			return -1
		}
		return 1
	})
	return out
}

// resolves reports whether dependent d's reference r names owner by its
// coordinates as well as its UID: where the model's OwnerScope looks
// (ownerKey). A reference from another namespace resolves to nothing
// (attemptToDeleteItem finds the owner absent); whether the GC's
// graph, which links by UID, counts it as blocking depends on which of
// the two it observed first, so it obliges the GC to wait for it no more
// than an orphan request protects it (as the model's properties).
func resolves(d *history.Object, r history.Ref, owner *history.Object) bool {
	k, ok := ownerKey(d, &r)
	return ok && k == owner.Key()
}

// unobserved reports whether the GC may not have seen d's reference when
// it processed the owner's write at m (see gcPatch): the reference was
// written when the owner already carried the finalizer (bit late), or,
// for a dependent of another resource, less than the race window before
// m was sent.
func (c *checker) unobserved(d depRef, owner *entry, m mark, late uint8) bool {
	if d.e.prov == nil {
		return false
	}
	rp := d.e.prov.refs[d.i]
	if rp.late&late != 0 {
		return true
	}
	return d.e.key.Kind != owner.key.Kind && rp.by >= 0 && c.ins[rp.by].ret > c.ops[m].Call-c.window
}

// hasWaitingOwner reports whether an owner of d waits for dependents
// (or may: its UID is not known).
func hasWaitingOwner(s *store, d *history.Object) bool {
	for i := range d.Owners {
		if st, _ := resolve(s, d, &d.Owners[i]); st == refWaiting || st == refUncertain {
			return true
		}
	}
	return false
}

// matchRef finds the old reference a new one stands for: an equal one if
// there is (an object may carry several references to one UID that differ
// in a field, which the API server's dedup keeps; found by fuzzing), else
// the first to the same UID.
func matchRef(refs []history.Ref, r history.Ref) (history.Ref, bool) {
	if slices.Contains(refs, r) {
		return r, true
	}
	return findRef(refs, r.UID)
}

func findRef(refs []history.Ref, uid string) (history.Ref, bool) {
	for _, r := range refs {
		if r.UID == uid {
			return r, true
		}
	}
	return history.Ref{}, false
}

func all[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}

// switchedFromOrphan returns the write that removed the orphan finalizer
// from the deletion of the object with this UID, while it is deleting
// without it (prov.orphanGone), or noMark.
func switchedFromOrphan(s *store, uid string) mark {
	m := noMark
	s.each(func(e *entry) bool {
		if e.known() && e.obj.UID == uid && e.obj.Deleting && e.prov != nil {
			m = e.prov.orphanGone
			return false
		}
		return true
	})
	return m
}

// liveUID reports whether an object with this UID is live in s.
func liveUID(s *store, uid string) bool {
	live := false
	s.each(func(e *entry) bool {
		live = e.obj.UID == uid
		return !live
	})
	return live
}

// orphaning reports whether o is being deleted with the orphan finalizer
// (model.Orphaning).
func orphaning(o *history.Object) bool {
	v := viewOf(o)
	return model.Orphaning(&v)
}

// liveByUID returns the live entry of known content with this UID,
// wherever it lives, or nil.
func liveByUID(s *store, uid string) *entry {
	var found *entry
	s.each(func(e *entry) bool {
		if e.known() && e.obj.UID == uid {
			found = e
			return false
		}
		return true
	})
	return found
}

// orphanHandedOn is the latest op, returned before in was sent, that
// answered the owner uid deleting with the orphan finalizer in a version
// whose event had been handed to the GC's informers before in was sent
// (the proxy's delivery record; an in-process GC's graph had applied it,
// hadWrite), else -1: attemptToOrphan then began,
// and it orphans the dependents whatever a later DELETE chose
// (kubernetes#32339). Any such version will do, not only the last
// orphaning one: a later one handed on after the patch (a second
// DELETE's answer, the owner's removal) does not undo the pass the
// earlier began (found by `cascade fuzz --target upstream --write-delay
// 200ms --checks 200 --seed 7741`, run 47).
func (c *checker) orphanHandedOn(uid string, in *input) mark {
	sent := c.gcSent(in)
	m := noMark
	for i := range c.ops {
		got := c.ops[i].Got
		if got == nil || got.UID != uid || got.RV == 0 || c.ins[i].ret >= in.op.Call || !orphaning(got) {
			continue
		}
		if c.hadWrite(uid, mark(i), sent) && (m < 0 || c.ins[i].ret > c.ins[m].ret) {
			m = mark(i)
		}
	}
	return m
}

// orphanHandedOnWhy says why orphanHandedOn admits a patch.
func (c *checker) orphanHandedOnWhy(m mark) string {
	return fmt.Sprintf(c.byEvidence(
		"; op %d answered the owner deleting with the orphan finalizer, its event had been handed to the GC's informers before the patch, and attemptToOrphan orphans its dependents whatever came after (the proxy's delivery record)",
		"; op %d answered the owner deleting with the orphan finalizer, the GC's graph had applied it before the patch, and attemptToOrphan orphans its dependents whatever came after (its recorded graph changes)"), m)
}
