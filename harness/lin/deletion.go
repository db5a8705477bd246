package lin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// This file finds in the store what the model's deletion predicates read:
// how an ownerReference resolves and whether deletion protection denies
// a DELETE. The model decides them (model/spec.go: OwnerScope, ClassifyOwner, ProtectionDenial,
// ActiveDependents; upstream garbagecollector.go classifyReferences and
// isDangling); this file only finds the objects they read in the store.

// refState is how an ownerReference resolves in a state: the model's
// classification (model.RefClass), or refUncertain.
type refState = model.RefClass

const (
	// refUnresolvable: the GC never acts on the reference
	// (model.RefUnresolvable): its kind is not served, or a
	// cluster-scoped dependent names a namespaced owner kind.
	refUnresolvable = model.RefUnresolvable
	// refDangling: no live object with the reference's kind, name and UID
	// where model.OwnerScope looks.
	refDangling = model.RefDangling
	// refWaiting: the owner is being deleted with foregroundDeletion
	// (model.RefWaiting, waitingForDependentsDeletion).
	refWaiting = model.RefWaiting
	// refSolid: any other live owner, one being deleted with orphan or a
	// user finalizer included (model.RefSolid).
	refSolid = model.RefSolid
	// refUncertain: the owner's UID or content is unknown (an ambiguous
	// write); no rule judges on it. Not one of the model's classes, which
	// end at RefSolid.
	refUncertain = model.RefSolid + 1
)

// ownerKey returns the store key an ownerReference of dependent d names,
// and false when the reference is unresolvable.
func ownerKey(d *history.Object, r *history.Ref) (history.Key, bool) {
	k, ok := model.KindByName(r.Kind)
	if !ok || apiGroupOf(r.APIVersion) != apiGroupOf(k.Info().APIVersion) {
		return history.Key{}, false
	}
	ns, ok := model.OwnerScope(k, d.Namespace)
	if !ok {
		return history.Key{}, false
	}
	return history.Key{Kind: k, Namespace: ns, Name: r.Name}, true
}

func apiGroupOf(apiVersion string) string {
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		return g
	}
	return ""
}

// resolve classifies reference r of dependent d in s and returns the
// owner's entry when there is one.
func resolve(s *store, d *history.Object, r *history.Ref) (refState, *entry) {
	k, ok := ownerKey(d, r)
	if !ok {
		return refUnresolvable, nil
	}
	o := s.get(k, keyHash(k))
	switch {
	case o == nil:
		return refDangling, nil
	case o.flags&uidUnknown != 0:
		return refUncertain, o
	case o.obj.UID != r.UID:
		return refDangling, o
	case !o.known():
		return refUncertain, o
	}
	v := viewOf(o.obj)
	return model.ClassifyOwner(&v), o
}

// viewOf reduces a history's object to what the model's deletion
// protection and reference classification read.
func viewOf(o *history.Object) model.View {
	return model.View{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Deleting: o.Deleting,
		Finalizers: o.Finalizers, Protection: o.Labels[model.ProtectionLabel], Replicas: o.Replicas}
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// protectionDenial is model.ProtectionDenial of the DELETE in of cur in
// s: why the deletion-protection webhook denies it, or "". The dependents
// counted are those s knows for certain (entries with known content, and
// cur's UID known for references to it), so the count is a lower bound:
// a denial this returns is one the webhook owes. "" when cur's content is
// unknown.
//
// The webhook reads the dependents when the API server calls it, after
// the DELETE arrived and before the removal (impl/webhook LISTs the API
// server live; etcd3's conditionalDelete runs admission before its
// transaction), not at the removal, where the DELETE linearizes. So a
// dependent counts only when what makes it one was in place before the
// DELETE was sent: the write that last set its reference to cur (a
// Namespace's or a CRD's dependents: the create that made it) returned
// before in's Call. (Found by `cascade fuzz --target upstream
// --write-delay 200ms --seed 32`: a Pod created with a reference to a
// Cascading Job while the Job's DELETE was in flight.) Entries without
// provenance (the strict pass) count whatever their writes' times, a
// stricter rule the lenient pass, which has it, corrects.
func (c *checker) protectionDenial(s *store, cur *entry, in *input) string {
	if !cur.known() {
		return ""
	}
	o := viewOf(cur.obj)
	if !model.ProtectionMayDeny(&o) {
		return ""
	}
	uidKnown := cur.flags&uidUnknown == 0
	k := cur.obj.Kind.Info().Kind
	byCreate := k == "Namespace" || k == "CustomResourceDefinition"
	deps := func(yield func(*model.View, bool) bool) {
		s.each(func(e *entry) bool {
			if e == cur || !e.known() {
				return true
			}
			j := slices.IndexFunc(e.obj.Owners, func(r history.Ref) bool { return r.UID == cur.obj.UID })
			if (j >= 0 || byCreate) && !c.settledBefore(e, j, byCreate, in.op.Call) {
				return true
			}
			v := viewOf(e.obj)
			return yield(&v, j >= 0 && uidKnown)
		})
	}
	return model.ProtectionDenial(&o, model.ActiveDependents(&o, deps))
}

// settledBefore reports whether e was a dependent before the instant t:
// the write that last set its reference j returned before t or, byCreate
// (a Namespace's Pod, a CRD's custom resource), the create that made it
// did. True for an entry without provenance (strict mode); false when
// the history shows no such write.
func (c *checker) settledBefore(e *entry, j int, byCreate bool, t int64) bool {
	if e.prov == nil {
		return true
	}
	m := noMark
	switch {
	case byCreate:
		m = c.createOf(e.obj.UID)
	case j < len(e.prov.refs):
		m = e.prov.refs[j].by
	}
	return m >= 0 && c.ins[m].ret < t
}

// webhookDenial reports a refusal by a validating admission webhook.
func webhookDenial(op *history.Op) bool {
	return (op.Code == 403 || op.Code == 422) && strings.Contains(op.Message, "admission webhook") &&
		strings.Contains(op.Message, "denied the request")
}

// waitEnded marks v, a GC write attemptToDeleteItem decides only while an
// owner of d waits for dependents (the unblock patch of its waiting arm),
// as known when an owner of d waited within the race window before in
// was sent and stopped: it is still being deleted, switched to Orphan or
// without foregroundDeletion now (stoppedWaiting), or it was removed
// (model.KnownForegroundEnded), after the worker's GET of it showed it waiting.
// Found by cascade fuzz --target impl: a client deleted an owner in a
// foreground cycle with Foreground and then with Orphan, or with
// Background, which removed it, while the GC was breaking the cycle.
func (c *checker) waitEnded(s *store, d *history.Object, in *input, v *violation) {
	if !c.lenient {
		return
	}
	for i := range d.Owners {
		r := &d.Owners[i]
		switch st, o := resolve(s, d, r); {
		case st == refSolid && o.obj.Deleting:
			if known, why, basis := c.stoppedWaiting(o, in); known != "" {
				v.known, v.message, v.basis = known, v.message+why, basis
				return
			}
		case st == refDangling && !liveUID(s, r.UID) && c.readsRecorded:
			// removed since: the GC's GET answered it waiting
			if k, ok := ownerKey(d, r); ok {
				if g := c.gcSawWaiting(k, r.UID, 0, in); g != nil {
					v.known, v.basis = model.Excuse(model.KnownForegroundEnded), basisReads
					v.message += fmt.Sprintf("; the GC's GET answered the owner waiting for dependents at resourceVersion %d, and it was removed since", g.Got.RV)
					return
				}
			}
		case st == refDangling && !liveUID(s, r.UID):
			if m := c.recentVersion(r.UID, in, waiting); m >= 0 {
				v.known, v.basis = model.Excuse(model.KnownForegroundEnded), basisWindow
				v.message += fmt.Sprintf("; op %d answered the owner waiting for dependents within the race window before, and it was removed since", m)
				return
			}
		}
	}
}

// waiting reports whether o, as an owner, waits for dependents
// (model.ClassifyOwner: being deleted with foregroundDeletion).
func waiting(o *history.Object) bool {
	v := viewOf(o)
	return model.ClassifyOwner(&v) == model.RefWaiting
}

// allStoppedWaiting is stoppedWaiting of every owner in os: known only if
// each of them is, as kubernetes#32339 if any was switched to Orphan.
func (c *checker) allStoppedWaiting(os []*entry, in *input) (known, why, basis string) {
	for _, o := range os {
		k, w, b := c.stoppedWaiting(o, in)
		if k == "" {
			return "", "", ""
		}
		if known == "" || k == model.KnownPolicySwitch && known != k {
			known, why = k, w
		}
		if basis == "" || b == basisWindow {
			basis = b
		}
	}
	return known, why, basis
}

// stoppedWaiting tells whether owner o, being deleted and not waiting for
// dependents now, waited until within the race window before in was
// sent, so that a GC worker whose GET of o showed it waiting may have
// decided in on it: a DELETE switched the deletion to Orphan
// (kubernetes#32339) or foregroundDeletion went (model.KnownForegroundEnded;
// processDeletingDependentsItem removes it, and so does a DELETE with
// Background). It returns the known race, the words to add and the
// basis, or "" for neither (only in lenient mode). When the GC's GETs are
// recorded (Options.ReadsRecorded) the race window is not consulted: the
// GC decided on o waiting only if one of its GETs answered o waiting at a
// version older than the write that ended the wait (gcSawWaiting).
func (c *checker) stoppedWaiting(o *entry, in *input) (known, why, basis string) {
	ended := func(m mark) (bool, string, string) {
		if !c.readsRecorded {
			return c.racy(m, in), " within the race window before", basisWindow
		}
		if m < 0 {
			return false, "", ""
		}
		rv, _ := c.writtenVersion(m, o.obj.UID)
		if g := c.gcSawWaiting(o.key, o.obj.UID, rv, in); g != nil {
			return true, fmt.Sprintf(" after the GC's GET answered it waiting at resourceVersion %d", g.Got.RV), basisReads
		}
		return false, "", ""
	}
	switch {
	case !c.lenient || o.prov == nil || !o.prov.fgSeen || !o.obj.Deleting || waiting(o.obj):
	default:
		if orphaning(o.obj) {
			if ok, when, basis := ended(o.prov.orphan); ok {
				return model.Excuse(model.KnownPolicySwitch), "; a DELETE switched the owner's foreground deletion to orphan after the GC decided" + when, basis
			}
		}
		if ok, when, basis := ended(o.prov.fgGone); ok {
			return model.Excuse(model.KnownForegroundEnded), fmt.Sprintf("; the owner waited for dependents when the GC decided, and op %d removed foregroundDeletion", o.prov.fgGone) + when, basis
		}
	}
	return "", "", ""
}

// gcSawWaiting finds a GET by the GC of the owner at key with this UID
// that answered it waiting for dependents at a version older than rv,
// the write that ended the wait (0: any version), and returned before in
// was sent; when in is a DELETE with a resourceVersion precondition, the
// GET must also have been sent after the GC's GET of in's object that
// answered that version (attemptToDeleteItem GETs the item, then each
// owner, then deletes with the item's version). nil if the recorded reads
// hold none. Without a precondition (a patch, deleteObject's retry) the
// reads do not show which of the GC's GETs of the owner the decision
// followed, and any that answered it waiting before the wait ended is
// taken.
func (c *checker) gcSawWaiting(key history.Key, uid string, rv uint64, in *input) *history.Read {
	after := int64(0)
	if del := in.op.Delete; del != nil && del.PreconditionRV != "" {
		for i := range c.reads[in.key] {
			r := &c.reads[in.key][i]
			if r.Actor == history.ActorGC && r.Return <= in.op.Call && r.Got != nil && strconv.FormatUint(r.Got.RV, 10) == del.PreconditionRV && r.Call > after {
				after = r.Call
			}
		}
	}
	var found *history.Read
	for i := range c.reads[key] {
		g := &c.reads[key][i]
		if g.Actor != history.ActorGC || g.Return > in.op.Call || g.Call < after || g.Got == nil || g.Got.UID != uid || !waiting(g.Got) || rv != 0 && g.Got.RV >= rv {
			continue
		}
		if found == nil || g.Return > found.Return {
			found = g
		}
	}
	return found
}

// recentVersion is the last op, returned before in was sent and within
// the race window before it, that answered the object uid in a version
// for which is holds; noMark if none. A component acting on that
// version (an informer's graph, a worker's GET) may still act on it
// after a later write: it bounds what a race may excuse.
func (c *checker) recentVersion(uid string, in *input, is func(*history.Object) bool) mark {
	m := noMark
	for i := range c.ops {
		got := c.ops[i].Got
		if got == nil || got.UID != uid || c.ins[i].ret >= in.op.Call || !c.racy(mark(i), in) || !is(got) {
			continue
		}
		if m < 0 || c.ins[i].ret > c.ins[m].ret {
			m = mark(i)
		}
	}
	return m
}
