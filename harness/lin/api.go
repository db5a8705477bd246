package lin

import (
	"fmt"
	"slices"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// The API server's semantics of update, patch, delete and observed
// writes: what a response promises about the state it was applied to,
// and the state it leaves ("checks only what the API promises", see
// DESIGN.md "Checking real targets"). What the API server answers is the
// model's to say (model/answers.go, with the checker's model.Semantics):
// this file finds the states an op may linearize at and asks the model
// whether the answer fits there. What stays here is the history's own
// reasoning: ops whose effect a removal overtook (removedMeanwhile,
// conflictMeanwhile), unknown facts after ambiguous writes, and the
// resourceVersion order of etcd's revisions (rvFollows).

func (c *checker) update(s *store, cur *entry, in *input) ([]outcome, string) {
	op := in.op
	pre := preconditionsOf(op)
	switch {
	case op.Ambiguous():
		outs := []outcome{unchanged}
		if cur != nil && c.answers(model.VerbUpdate, cur, pre, false).Has(model.AnswerOK) {
			obj := *cur.obj
			outs = append(outs, outcome{e: c.vague(s, cur, in, &obj, cur.flags|rvUnknown|contentUnknown), changed: true, applied: true})
			if !cur.known() || cur.obj.Deleting {
				outs = append(outs, outcome{changed: true, applied: true}) // it emptied the finalizers
			}
		}
		return outs, ""
	case op.OK():
		if cur == nil {
			if op.Removed && c.removedMeanwhile(s, in, pre) {
				return []outcome{unchanged}, ""
			}
			return nil, fmt.Sprintf("the %s succeeded while no %s was live", op.Verb, in.key)
		}
		if op.Removed && pre.rvSet {
			// An update that empties the finalizers of an object being
			// deleted checks its preconditions in one storage transaction
			// and removes the object in another, without a resourceVersion
			// precondition (Store.Update's deleteWithoutFinalizers): other
			// writes may land in between, and the removal is the instant
			// the op takes effect. The version checked was live before.
			if cur.flags&rvUnknown == 0 && pre.rv > cur.obj.RV {
				return nil, fmt.Sprintf("the %s removed the object although its rv precondition %d was never live (%s)", op.Verb, pre.rv, liveDesc(cur))
			}
			pre.rvSet = false
		}
		if !c.answers(model.VerbUpdate, cur, pre, noOpAnswer(cur, op)).Has(model.AnswerOK) {
			return nil, fmt.Sprintf("the %s succeeded although its %s precondition failed (%s)", op.Verb, failed(pre.checks(cur)), liveDesc(cur))
		}
		got := op.Got
		if got == nil {
			if op.Removed {
				return []outcome{{changed: true, applied: true, v: c.emptiedRemoval(cur, in)}}, ""
			}
			obj := *cur.obj
			return []outcome{{e: c.vague(s, cur, in, &obj, cur.flags|rvUnknown|contentUnknown), changed: true, applied: true}}, ""
		}
		if cur.flags&uidUnknown == 0 && got.UID != cur.obj.UID {
			return nil, fmt.Sprintf("the %s returned uid %s while %s", op.Verb, short(got.UID), liveDesc(cur))
		}
		if op.Subresource == "scale" {
			// The answer is a Scale: only replicas and the resourceVersion.
			if !cur.known() || !rvAfter(cur, got.RV) && got.RV != cur.obj.RV {
				return c.vagueUpdate(s, cur, in)
			}
			obj := *cur.obj
			obj.RV, obj.Replicas = got.RV, got.Replicas
			return []outcome{{e: c.entryFor(s, cur, in, &obj, objHash(&obj), cur.flags&^(uidUnknown|rvUnknown)), changed: true, applied: true}}, ""
		}
		got, h := adopt(cur, in)
		if why := c.legalUpdate(cur, got, op.Removed); why != "" {
			return nil, why
		}
		if op.Removed {
			return []outcome{{changed: true, applied: true, v: c.emptiedRemoval(cur, in)}}, ""
		}
		return []outcome{{e: c.entryFor(s, cur, in, got, h, 0), changed: true, applied: true}}, ""
	case op.Code == 404 || op.Code == 409:
		return c.refused(s, cur, in, pre, model.VerbUpdate)
	}
	return []outcome{unchanged}, ""
}

// laterFinalizers are the finalizers of cur's object that a write put
// on after the version the resourceVersion precondition of in names, an
// update or patch that removed the object: it emptied the finalizers of
// the version it checked, and Store.Update's deleteWithoutFinalizers
// then removed whatever version was current (see update). Only a
// DELETE's GC finalizer (orphan, foregroundDeletion) can be put on an
// object being deleted, and its provenance names the write: by is the
// latest such write. None without a precondition or a known version.
// Without provenance (the strict pass) every GC finalizer may be one, by
// noMark: the strict pass then fails, and the lenient pass decides.
func (c *checker) laterFinalizers(cur *entry, in *input) (fins []string, by mark) {
	by = noMark
	pre := preconditionsOf(in.op)
	if !in.op.Removed || !pre.rvSet || !cur.known() || cur.flags&rvUnknown != 0 || pre.rv >= cur.obj.RV {
		return nil, by
	}
	if cur.prov == nil {
		return slices.DeleteFunc(slices.Clone(cur.obj.Finalizers), func(f string) bool {
			return f != model.FinalizerOrphan && f != model.FinalizerForeground
		}), by
	}
	for _, f := range cur.obj.Finalizers {
		m := cur.prov.putOn(f)
		if rv, ok := c.writtenVersion(m, cur.obj.UID); ok && rv > pre.rv {
			fins = append(fins, f)
			if by < 0 || c.ins[m].ret > c.ins[by].ret {
				by = m
			}
		}
	}
	return fins, by
}

// emptiedRemoval checks an update or patch that removed the object on
// cur: it may not take finalizers no write removed, but Store.Update
// checks the version its precondition names, finds the finalizers
// emptied, and removes the object in a second storage transaction
// without one, so a GC finalizer a DELETE put on in between goes too.
// That is the known race model.KnownEmptiedFinalizersRemoval, on the
// history's own evidence: the precondition names a version before the
// one the DELETE wrote, and the removal linearizes after that DELETE.
func (c *checker) emptiedRemoval(cur *entry, in *input) *violation {
	fins, by := c.laterFinalizers(cur, in)
	switch {
	case len(fins) == 0:
		return nil
	case by < 0:
		return &violation{model.PropNoRemovalWithFinalizers, fmt.Sprintf("the %s removed the object while finalizers %v remained, which a write may have put on after the rv %d its precondition checked",
			in.op.Verb, fins, preconditionsOf(in.op).rv), "", ""}
	}
	v := &violation{model.PropNoRemovalWithFinalizers, fmt.Sprintf("the %s removed the object while finalizers %v remained, which op %d put on at rv %d, after the rv %d its precondition checked",
		in.op.Verb, fins, by, c.ops[by].Got.RV, preconditionsOf(in.op).rv), "", ""}
	if c.lenient {
		v.known, v.basis = model.Excuse(model.KnownEmptiedFinalizersRemoval), basisOrder
		v.message += "; it emptied the finalizers of the version it checked, and Store.Update's deleteWithoutFinalizers removed the version then current"
	}
	return v
}

// answers is model.PreconditionAnswers of a write of verb with pre on
// cur (nil: no object).
func (c *checker) answers(verb model.WriteVerb, cur *entry, pre preconditions, noOp bool) model.Answers {
	return model.PreconditionAnswers(c.sem, verb, cur != nil, pre.checks(cur), noOp)
}

// refused judges a write of verb answered 404 NotFound or 409 Conflict:
// the answer must be one model.PreconditionAnswers allows on cur, or a
// Conflict on a version a removal superseded (conflictMeanwhile). It
// changes nothing.
func (c *checker) refused(s *store, cur *entry, in *input, pre preconditions, verb model.WriteVerb) ([]outcome, string) {
	op := in.op
	if c.answers(verb, cur, pre, false).Has(model.AnswerOf(op.Code)) || cur == nil && op.Code == 409 && c.conflictMeanwhile(s, in, pre) {
		return []outcome{unchanged}, ""
	}
	status := map[int]string{404: "NotFound", 409: "Conflict"}[op.Code]
	switch {
	case cur == nil:
		return nil, fmt.Sprintf("the %s answered %s while no %s was live", op.Verb, status, in.key)
	case op.Code == 404:
		return nil, fmt.Sprintf("the %s answered NotFound while %s", op.Verb, liveDesc(cur))
	}
	return nil, fmt.Sprintf("the %s answered Conflict although its preconditions held (%s)", op.Verb, liveDesc(cur))
}

// removedMeanwhile reports whether a write answered a removal that
// another op made: the API server removes an object in a storage
// transaction of its own after the write read it, and answers success
// when that transaction finds the object gone already. An update that
// empties the finalizers of an object being deleted
// (Store.deleteWithoutFinalizers: "there could be multiple update
// requests to remove all finalizers from the object, so we ignore the
// NotFound error") does, and so does a DELETE of a kind with graceful
// deletion after it wrote deletionTimestamp (Store.Delete's
// ignoreNotFound, kubernetes#19403), answering the object it last saw.
// So may the write: the object it answers (same UID, a version no newer
// than the last) was removed by an op that may have taken effect after
// the write was sent. A Pod's DELETE writes deletionTimestamp (grace 0)
// in a transaction of its own before it removes the Pod, at a version
// the history does not show (the DELETE answers the Pod as it read it
// first), and a write landing between the two reads that version: an
// answer showing the Pod being deleted may be newer than its last
// version in the history (found by fuzzing: a controller's adoption
// patch between a client's DELETE of the Pod and its removal).
func (c *checker) removedMeanwhile(s *store, in *input, pre preconditions) bool {
	t := s.tombstone(in.key, in.kh)
	got := in.op.Got
	if t == nil || got == nil || t.flags&uidUnknown != 0 || t.obj.UID != got.UID || (pre.uid != "" && pre.uid != got.UID) || t.end <= in.op.Call {
		return false
	}
	return t.flags&rvUnknown != 0 || got.RV <= t.obj.RV || model.GracefulDelete(in.key.Kind) && got.Deleting && !t.obj.Deleting
}

// conflictMeanwhile reports whether a write answered Conflict on a
// version of an object that a removal superseded: the object was removed
// by an op that may have taken effect after the write was sent, and its
// last version fails the write's preconditions. A Pod's DELETE writes
// deletionTimestamp (grace 0) in one transaction and removes the Pod in
// another (model.DeleteResult.TwoWrites), and a write between the two
// meets that version, which the history may not show: the removal's
// answer carries it when the DELETE removed the Pod itself, but when an
// update removed it in between (Store.deleteWithoutFinalizers), the
// DELETE finds it gone and answers the Pod as it first read it
// (updateForGracefulDeletionAndFinalizers' lastExisting), and the
// tombstone keeps that older version. A tombstone of a graceful kind
// not being deleted is such a removal, so any resourceVersion
// precondition fails on the version in between.
func (c *checker) conflictMeanwhile(s *store, in *input, pre preconditions) bool {
	t := s.tombstone(in.key, in.kh)
	if t == nil || t.end <= in.op.Call {
		return false
	}
	twoWrites := t.flags&contentUnknown == 0 && !t.obj.Deleting && model.GracefulDelete(in.key.Kind)
	return pre.uid != "" && t.flags&uidUnknown == 0 && pre.uid != t.obj.UID ||
		pre.rvSet && (t.flags&rvUnknown != 0 || t.obj.RV != pre.rv || twoWrites)
}

func (c *checker) vagueUpdate(s *store, cur *entry, in *input) ([]outcome, string) {
	obj := *cur.obj
	return []outcome{{e: c.vague(s, cur, in, &obj, cur.flags|rvUnknown|contentUnknown), changed: true, applied: true}}, ""
}

// legalUpdate checks a successful update's answer against the live
// entry: the answer must be one the API server may store
// (model.UpdateDenial: deletionTimestamp unchanged, no finalizer added
// to an object being deleted, kubernetes#32339 fixed by #32354, ...),
// removes the object exactly when model.UpdateRemoves says, and yields
// a larger resourceVersion unless it changed nothing.
func (c *checker) legalUpdate(cur *entry, got *history.Object, removed bool) string {
	var old *model.View
	if cur.known() {
		v := viewOf(cur.obj)
		old = &v
	}
	next := viewOf(got)
	if deny := model.UpdateDenial(c.sem, old, &next); deny.Message != "" {
		why := "the update answered an object validation refuses: " + deny.Message
		if deny.Property != "" {
			why += " [" + deny.Property + "]"
		}
		return why
	}
	if removed {
		// The answer is the object as the update left it, at the version
		// the update read; a concurrent write may have superseded it
		// before the removal (see update).
		switch {
		case !model.UpdateRemoves(&next):
			return "an update removed an object it did not leave being deleted without finalizers"
		case cur.flags&rvUnknown == 0 && got.RV > cur.obj.RV:
			return fmt.Sprintf("the update removed the object at rv %d, after the live rv %d", got.RV, cur.obj.RV)
		}
		return ""
	}
	return rvFollows("update", cur, got)
}

// rvFollows checks the resourceVersion a write answered that kept the
// object: larger than the live one, or equal if the write changed
// nothing (etcd3 writes no update that changes nothing).
func rvFollows(verb string, cur *entry, got *history.Object) string {
	switch {
	case cur.flags&rvUnknown != 0:
		if !rvAfter(cur, got.RV) {
			return fmt.Sprintf("the %s returned rv %d, not after rv %d", verb, got.RV, cur.obj.RV)
		}
	case got.RV == cur.obj.RV:
		if cur.known() && !sameContent(cur.obj, got) {
			return fmt.Sprintf("the %s changed the object but kept rv %d", verb, got.RV)
		}
	case got.RV < cur.obj.RV:
		return fmt.Sprintf("the %s returned rv %d, before the live rv %d (resourceVersion went backwards)", verb, got.RV, cur.obj.RV)
	}
	return ""
}

func (c *checker) delete(s *store, cur *entry, in *input) ([]outcome, string) {
	op := in.op
	opts := op.Delete
	if opts == nil {
		opts = &history.DeleteOptions{}
	}
	pre := preconditionsOf(op)
	switch {
	case op.Ambiguous():
		outs := []outcome{unchanged}
		if cur != nil && c.answers(model.VerbDelete, cur, pre, false).Has(model.AnswerOK) && model.DeleteOptionsDenial(history.ModelDeleteOptions(opts)) == "" {
			if !cur.known() {
				obj := *cur.obj
				outs = append(outs, outcome{changed: true, applied: true},
					outcome{e: c.vague(s, cur, in, &obj, cur.flags|rvUnknown), changed: true, applied: true})
				return outs, ""
			}
			res := history.DeleteResult(c.sem, cur.obj, opts)
			if res.LosesRVPrecondition {
				return outs, "" // refused whatever the version (model.DeleteRVConflict)
			}
			if res.Removed {
				outs = append(outs, outcome{changed: true, applied: true})
			}
			if !res.Removed || res.MayKeep {
				obj := *cur.obj
				obj.Deleting, obj.Finalizers = true, res.Finalizers
				outs = append(outs, outcome{e: c.vague(s, cur, in, &obj, cur.flags|rvUnknown), changed: true, applied: true})
			}
		}
		return outs, ""
	case op.OK():
		if cur == nil {
			if op.Removed && model.GracefulDelete(in.key.Kind) && c.removedMeanwhile(s, in, pre) {
				return []outcome{unchanged}, ""
			}
			return nil, fmt.Sprintf("the delete succeeded while no %s was live", in.key)
		}
		if !c.answers(model.VerbDelete, cur, pre, false).Has(model.AnswerOK) {
			return nil, fmt.Sprintf("the delete succeeded although its %s precondition failed (%s)", failed(pre.checks(cur)), liveDesc(cur))
		}
		if deny := model.DeleteOptionsDenial(history.ModelDeleteOptions(opts)); deny != "" {
			return nil, "the delete succeeded although validation refuses its options: " + deny
		}
		if c.protection {
			if deny := c.protectionDenial(s, cur, in); deny != "" {
				return nil, fmt.Sprintf("the delete of %s succeeded although the deletion-protection webhook denies it: %s [%s]",
					in.key, deny, model.PropProtectionHolds)
			}
		}
		if op.Got != nil && op.Got.UID != "" && cur.flags&uidUnknown == 0 && op.Got.UID != cur.obj.UID {
			return nil, fmt.Sprintf("the delete answered uid %s while %s", short(op.Got.UID), liveDesc(cur))
		}
		if op.Removed {
			return []outcome{{changed: true, applied: true, v: c.removal(cur, in, opts, pre)}}, ""
		}
		if op.Got == nil {
			obj := *cur.obj
			obj.Deleting = true
			return []outcome{{e: c.vague(s, cur, in, &obj, cur.flags|rvUnknown|contentUnknown), changed: true, applied: true}}, ""
		}
		got, h := adopt(cur, in)
		var v *violation
		if why := c.legalDelete(cur, got, opts); why != "" {
			if v = c.namespaceDeleteRead(cur, in, got, opts, why); v == nil {
				return nil, why
			}
		}
		outs := []outcome{{e: c.entryFor(s, cur, in, got, h, 0), changed: true, applied: true, v: v}}
		if c.lenient && cur.known() && cur.flags&rvUnknown == 0 && cur.obj.Deleting && got.RV > cur.obj.RV && sameContent(cur.obj, got) {
			// A DELETE that changes nothing on an object already being
			// deleted writes nothing and answers the live
			// resourceVersion; a newer one, on a kind that answers the
			// removed object, may be the revision of a removal that read
			// the object before its finalizers (kubernetes#77988).
			if v := c.removal(cur, in, opts, pre); v != nil && v.known != "" {
				outs = append(outs, outcome{changed: true, applied: true, v: v})
			}
		}
		return outs, ""
	case op.Code == 409 && cur != nil && pre.rvSet && (!cur.known() || history.DeleteResult(c.sem, cur.obj, opts).LosesRVPrecondition):
		// Store.Delete loses a resourceVersion precondition when the
		// DELETE drops the last finalizers (model.DeleteRVConflict)
		return []outcome{unchanged}, ""
	case op.Code == 404 || op.Code == 409:
		return c.refused(s, cur, in, pre, model.VerbDelete)
	case webhookDenial(op):
		if cur == nil {
			return nil, fmt.Sprintf("an admission webhook denied the delete while no %s was live", in.key)
		}
		if v := viewOf(cur.obj); cur.known() && !model.ProtectionMayDeny(&v) {
			return nil, fmt.Sprintf("an admission webhook denied the delete of %s, which is being deleted or lacks %s=Always|Cascading",
				in.key, model.ProtectionLabel)
		}
	}
	return []outcome{unchanged}, ""
}

// removal checks a DELETE that removed the object (model/apiserver.go
// delete): it may only when model.Delete removes it.
//
// kubernetes#77988 breaks that: the generic registry's Delete reads the
// object and, finding no finalizers, no grace period and no GC finalizer
// to add, deletes it at once; etcd3's conditionalDelete retries its
// transaction on whatever version is current by then (running admission
// again, where a webhook makes the window wide) and removes it, a
// finalizer added in between included. (Its fix, kubernetes#129768, was
// reverted by #133979; kube-apiserver v1.36 still has the race, pinned by
// harness/history's TestPVDeleteAndFinalizerRaces.) The race is known
// when the object was bare (no finalizers, not being deleted) until a
// write that may have landed after the DELETE was sent, and nothing else
// would have stopped the immediate deletion: no resourceVersion
// precondition, model.Delete removing a bare object of the kind with
// these options (no GC finalizer the options or the kind's default call
// for, not a Namespace), a kind without graceful deletion.
//
// A graceful kind (a Pod) deleted with no grace period goes the same way
// one step later: the DELETE writes deletionTimestamp first, and then
// removes at once whatever version is current, without a resourceVersion
// precondition unless the request had one. Within that window nothing
// can add a finalizer of its own to the object being deleted (an update
// may not), but another DELETE can still add the GC finalizer its
// options call for (found by fuzzing the kubeconfig target: a DELETE
// with propagation Orphan put orphan on a Pod a graceless DELETE had
// started deleting, and that DELETE removed the Pod). So on a graceful
// kind the race is known when every finalizer left is orphan or
// foregroundDeletion, put on by a DELETE (or a write seen only by watch,
// which on an object being deleted can only be one) that may have landed
// after this DELETE was sent, with the same conditions otherwise.
func (c *checker) removal(cur *entry, in *input, opts *history.DeleteOptions, pre preconditions) *violation {
	if !cur.known() {
		return nil
	}
	res := history.DeleteResult(c.sem, cur.obj, opts)
	if res.Removed {
		return nil
	}
	fins := res.Finalizers
	v := &violation{model.PropNoRemovalWithFinalizers, fmt.Sprintf("the delete removed the object while finalizers %v remained", fins), "", ""}
	if len(fins) == 0 {
		// a Namespace: its spec.finalizers, which the history does not read
		v.message = "the delete removed the object, which the API server keeps being deleted until its spec.finalizers are done"
	}
	k := in.key.Kind
	if !c.lenient || cur.prov == nil || pre.rvSet || !history.DeleteResult(c.sem, &history.Object{Kind: k}, opts).Removed {
		return v
	}
	switch {
	case !model.GracefulDelete(k) && cur.prov.dressed >= 0 && c.ins[cur.prov.dressed].ret > in.op.Call:
		v.known, v.basis = model.Excuse(model.KnownRemovalBeforeFinalizers), basisOrder
		v.message += fmt.Sprintf("; it had read the object before op %d put them on, and deleted it at once", cur.prov.dressed)
	case model.GracefulDelete(k):
		var by []mark
		for _, f := range fins {
			m := cur.prov.putOn(f)
			if m < 0 || c.ins[m].ret <= in.op.Call || c.ins[m].op.Verb != history.Delete && c.ins[m].op.Verb != history.Observed {
				return v
			}
			by = append(by, m)
		}
		v.known, v.basis = model.Excuse(model.KnownRemovalBeforeFinalizers), basisOrder
		v.message += fmt.Sprintf("; it had started a deletion without grace period before op %d put them on, and removed it at once", by[0])
	}
	return v
}

// legalDelete checks a successful DELETE's answer that kept the object
// against the live entry and model.Delete's result: it is being deleted
// with the finalizers the API server leaves (unchanged on a graceful
// kind already being deleted), kept only if finalizers remain or the
// kind may keep it (a grace period, a Namespace's spec.finalizers), its
// owners and labels untouched, at a larger resourceVersion unless
// nothing changed.
func (c *checker) legalDelete(cur *entry, got *history.Object, opts *history.DeleteOptions) string {
	if !cur.known() || got == nil {
		return ""
	}
	res := history.DeleteResult(c.sem, cur.obj, opts)
	if !got.Deleting {
		return "the delete answered an object not being deleted"
	}
	switch {
	case res.Removed && !res.MayKeep:
		return "the delete kept an object that had no finalizers left"
	case !history.SameFinalizers(got.Finalizers, res.Finalizers) && !(res.MayAnswerUnchanged && slices.Equal(got.Finalizers, cur.obj.Finalizers)):
		return fmt.Sprintf("the delete left finalizers %v, the API server's choice is %v", got.Finalizers, res.Finalizers)
	case !slices.Equal(got.Owners, cur.obj.Owners):
		return "the delete changed ownerReferences"
	}
	return rvFollows("delete", cur, got)
}

// namespaceDeleteRead: the Namespace registry's Delete GETs the
// Namespace and takes the first DELETE's branch when that read shows no
// deletionTimestamp; the branch's GuaranteedUpdate then sets the GC
// finalizers its options call for on the current version. A DELETE that
// legalDelete refuses on a Terminating Namespace, but that answers what a
// first DELETE of the current version answers, is the known race
// model.KnownNamespaceDeleteRead when the write that started the
// deletion returned after this DELETE was sent (its read may have come
// first); nil otherwise.
func (c *checker) namespaceDeleteRead(cur *entry, in *input, got *history.Object, opts *history.DeleteOptions, why string) *violation {
	if !c.lenient || cur.prov == nil || in.key.Kind.Info().Kind != "Namespace" || !cur.known() || !cur.obj.Deleting {
		return nil
	}
	start := cur.prov.delStart
	if start < 0 || c.ins[start].ret <= in.op.Call {
		return nil
	}
	first, obj := *cur, *cur.obj
	obj.Deleting = false
	first.obj = &obj
	if c.legalDelete(&first, got, opts) != "" {
		return nil
	}
	return &violation{PropAPISemantics, fmt.Sprintf("%s; it read the Namespace before op %d started its deletion, and chose as the first DELETE", why, start),
		model.Excuse(model.KnownNamespaceDeleteRead), basisOrder}
}

// observed: the watch showed a state no recorded op explains; it must be
// a legal successor of the live entry.
func (c *checker) observed(s *store, cur *entry, in *input) ([]outcome, string) {
	op := in.op
	got := op.Got
	if got == nil {
		return nil, "an observed op without an object"
	}
	if op.Removed {
		switch {
		case cur == nil:
			return nil, fmt.Sprintf("observed the deletion of %s while none was live", in.key)
		case cur.flags&uidUnknown == 0 && got.UID != cur.obj.UID:
			return nil, fmt.Sprintf("observed the deletion of uid %s while %s", short(got.UID), liveDesc(cur))
		case got.RV != 0 && !rvAfter(cur, got.RV):
			return nil, fmt.Sprintf("observed the deletion at rv %d, not after rv %d", got.RV, cur.obj.RV)
		}
		return []outcome{{changed: true, applied: true}}, ""
	}
	if cur == nil {
		return []outcome{{e: c.entryFor(s, nil, in, got, in.gotHash, 0), changed: true, applied: true}}, ""
	}
	switch {
	case cur.flags&uidUnknown == 0 && got.UID != cur.obj.UID:
		return nil, fmt.Sprintf("observed uid %s while %s, with no deletion between", short(got.UID), liveDesc(cur))
	case !rvAfter(cur, got.RV):
		return nil, fmt.Sprintf("observed rv %d, not after the live rv %d (resourceVersion went backwards)", got.RV, cur.obj.RV)
	case cur.known() && model.ClearsDeletion(ptr(viewOf(cur.obj)), ptr(viewOf(got))):
		return nil, "observed deletionTimestamp cleared"
	}
	got, h := adopt(cur, in)
	return []outcome{{e: c.entryFor(s, cur, in, got, h, 0), changed: true, applied: true}}, ""
}

// adopt returns the object an answer leaves and its hash. An answer
// without spec (a metadata client's PartialObjectMetadata, as both GCs
// use) says nothing of a workload's spec.replicas, which then carries
// over from the live entry.
func adopt(cur *entry, in *input) (*history.Object, uint64) {
	got := in.op.Got
	if got.Replicas == -1 && in.key.Kind.Info().Workload && cur != nil && cur.known() && cur.obj.Replicas != -1 {
		cp := *got
		cp.Replicas = cur.obj.Replicas
		return &cp, objHash(&cp)
	}
	return got, in.gotHash
}

// noOpAnswer reports whether a write's answer is the live object itself,
// unchanged and at its resourceVersion. etcd3's GuaranteedUpdate computes
// the update on its cached copy; when the result equals what it then
// reads from etcd, it answers the current object without writing, and
// without checking the resourceVersion precondition against it again
// (k8s.io/apiserver storage/etcd3/store.go). So a patch carrying a
// version that was live before an A->B->A change succeeds as a no-op
// (found by fuzzing v1.36.3).
func noOpAnswer(cur *entry, op *history.Op) bool {
	return cur.known() && op.Got != nil && !op.Removed && op.Got.RV == cur.obj.RV && objEqual(op.Got, cur.obj)
}
