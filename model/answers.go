package model

import (
	"fmt"
	"slices"
	"strings"
)

// This file is the one statement of what the API server answers to a
// write on a stored object: which statuses its preconditions allow, what
// update validation refuses and when an update removes the object, and
// what a DELETE leaves. The model's API server (apiserver.go) decides
// its own requests with these predicates, and harness/lin judges a real
// history's answers with the same ones, on a View of the object.

// Semantics is the API server behaviour the predicates of this file
// depend on that is not the same in every cluster: a release switch
// (what one kube-apiserver release answers differently from another)
// belongs here as a field, set from the release table (Semantics.For,
// release.go). The zero value is the newest release cascade models
// (DefaultRelease).
type Semantics struct {
	// FinalizerAfterDeletion: an update may add a finalizer to an object
	// being deleted, as before kubernetes#32354 fixed kubernetes#32339
	// (the model's BugFinalizerAfterDeletion).
	FinalizerAfterDeletion bool
	// UpdateRemovedConflict: an update carrying a uid precondition of an
	// object that is not stored may answer 409 Conflict, not only 404
	// NotFound. k8s.io/apiserver before v0.34 (ChangeUpdateRemovedNotFound,
	// kubernetes#132470): Store.Update always passed ignoreNotFound, so
	// etcd3's GuaranteedUpdate checked a PUT's uid precondition
	// (rest.DefaultUpdatedObjectInfo.Preconditions) against an empty
	// object and failed it; a PATCH has no storage precondition and still
	// answers 404 from the update func.
	UpdateRemovedConflict bool
}

// For returns s with the switches of release r set (ReleaseChanges).
func (s Semantics) For(r Release) Semantics {
	s.UpdateRemovedConflict = !r.Has(ChangeUpdateRemovedNotFound)
	return s
}

// WriteVerb is the kind of write a precondition answer is for.
type WriteVerb uint8

// Write verbs.
const (
	// VerbUpdate is a PUT or a PATCH (Store.Update).
	VerbUpdate WriteVerb = iota
	// VerbDelete is a DELETE (Store.Delete).
	VerbDelete
)

// Check is how the stored object meets one precondition of a write.
type Check uint8

// Checks.
const (
	// Unset: the write has no such precondition.
	Unset Check = iota
	// Holds: the stored value is the precondition's.
	Holds
	// Fails: the stored value differs.
	Fails
	// Unknown: the caller does not know the stored value (harness/lin
	// after an ambiguous write); an answer is possible when it is for
	// either.
	Unknown
)

// Preconditions are a write's uid and resourceVersion preconditions as
// the stored object meets them (storage.Preconditions.Check). An
// update's uid precondition is the metadata.uid it sends, its
// resourceVersion precondition the metadata.resourceVersion.
type Preconditions struct {
	UID, RV Check
}

// Answers is a set of statuses of a write, as far as its preconditions
// decide them. Other statuses (admission, validation of the content,
// server errors) are decided elsewhere.
type Answers uint8

// Statuses of a write.
const (
	AnswerOK       Answers = 1 << iota // 2xx: the write went ahead
	AnswerNotFound                     // 404 NotFound
	AnswerConflict                     // 409 Conflict
	AnswerInvalid                      // 422 Invalid
)

// Has reports whether a holds every status of b.
func (a Answers) Has(b Answers) bool { return a&b == b }

// Code is the status the model answers from a: 2xx (200) when the write
// may go ahead, else the first of 422, 409 and 404 that a holds, 0 for
// none.
func (a Answers) Code() int {
	switch {
	case a.Has(AnswerOK):
		return 200
	case a.Has(AnswerInvalid):
		return 422
	case a.Has(AnswerConflict):
		return 409
	case a.Has(AnswerNotFound):
		return 404
	}
	return 0
}

// AnswerOf is the Answers status of an HTTP status code, 0 for one the
// preconditions do not decide.
func AnswerOf(code int) Answers {
	switch {
	case code >= 200 && code < 300:
		return AnswerOK
	case code == 404:
		return AnswerNotFound
	case code == 409:
		return AnswerConflict
	case code == 422:
		return AnswerInvalid
	}
	return 0
}

// possible is the range of values c may stand for: Holds to Fails for
// Unknown, else c alone (no allocation: the model's API server asks on
// every write).
func (c Check) possible() (first, last Check) {
	if c == Unknown {
		return Holds, Fails
	}
	return c, c
}

// PreconditionAnswers is the set of statuses the API server may answer
// a write of verb given whether an object is stored under its name and
// how that object meets the write's preconditions (the union over the
// possible values of Unknown ones):
//
//   - No object: 404 NotFound (Store.Update without AllowCreateOnUpdate,
//     Store.Delete's Get). The caller passes a set precondition as Fails
//     then (storage.Preconditions.Check against the empty object
//     GuaranteedUpdate reads); an answer that differs between releases
//     for such a write is a Semantics field's to switch here: before
//     v1.34 a PUT with a uid precondition answers 409 Conflict
//     (Semantics.UpdateRemovedConflict).
//   - A uid precondition failing: 409 Conflict (storage.Preconditions.Check
//     in GuaranteedUpdate and conditionalDelete), or, for an update, 422
//     Invalid (a patch carrying metadata.uid fails
//     ValidateObjectMetaUpdate: metadata.uid is immutable).
//   - A resourceVersion precondition failing: 409 Conflict, and for an
//     update whose result equals the stored object 2xx as well: etcd3's
//     GuaranteedUpdate computes the update on its cached copy and, when
//     the result equals what it then reads, answers the stored object
//     without writing and without checking the precondition against it
//     again (k8s.io/apiserver storage/etcd3/store.go).
//   - A write with a uid precondition that some precondition fails may
//     also be answered 404 NotFound: the object it names is gone.
//   - Preconditions holding: 2xx.
//
// noOp says the write's result equals the stored object (updates only).
func PreconditionAnswers(sem Semantics, verb WriteVerb, stored bool, pre Preconditions, noOp bool) Answers {
	if !stored {
		if sem.UpdateRemovedConflict && verb == VerbUpdate && pre.UID != Unset {
			// a PUT's uid is a storage precondition (409); a PATCH's
			// metadata.uid is not, and its update func answers 404
			return AnswerNotFound | AnswerConflict
		}
		return AnswerNotFound
	}
	var a Answers
	uidFirst, uidLast := pre.UID.possible()
	rvFirst, rvLast := pre.RV.possible()
	for uid := uidFirst; uid <= uidLast; uid++ {
		for rv := rvFirst; rv <= rvLast; rv++ {
			if uid != Fails && (rv != Fails || verb == VerbUpdate && noOp) {
				a |= AnswerOK
			}
			if uid == Fails || rv == Fails {
				a |= AnswerConflict
				if pre.UID != Unset {
					a |= AnswerNotFound
				}
			}
			if uid == Fails && verb == VerbUpdate {
				a |= AnswerInvalid
			}
		}
	}
	return a
}

// Denial is why validation refuses a write (422 Invalid); the zero
// value allows it.
type Denial struct {
	// Message is the API server's message.
	Message string
	// Property is the model's property a write breaking the rule
	// violates, when it is one (PropNoFinalizerAfterDeletion), else "".
	Property string
}

// UpdateDenial is why update validation refuses storing next over old,
// or the zero Denial when it allows it; old is nil for a create. It
// reads only deletionTimestamp and finalizers (ValidateObjectMeta and
// ValidateObjectMetaUpdate in apimachinery/pkg/api/validation/objectmeta.go;
// rest.BeforeUpdate):
//
//   - an update cannot set deletionTimestamp (it is immutable, set only
//     by a DELETE) nor clear it (BeforeUpdate restores it; an answer
//     without it is no answer the API server gives);
//   - no new finalizer on an object being deleted (ValidateNoNewFinalizers,
//     kubernetes#32354), unless sem.FinalizerAfterDeletion;
//   - not both orphan and foregroundDeletion;
//   - a built-in kind's finalizers are standard or fully qualified.
func UpdateDenial(sem Semantics, old, next *View) Denial {
	if old != nil {
		if next.Deleting && !old.Deleting || ClearsDeletion(old, next) {
			return Denial{Message: "metadata.deletionTimestamp: field is immutable; may only be set by a DELETE"}
		}
		if old.Deleting && !sem.FinalizerAfterDeletion {
			for _, f := range next.Finalizers {
				if !old.hasFinalizer(f) {
					return Denial{fmt.Sprintf("metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [%q]", f),
						PropNoFinalizerAfterDeletion}
				}
			}
		}
	}
	if next.hasFinalizer(FinalizerOrphan) && next.hasFinalizer(FinalizerForeground) {
		return Denial{Message: "metadata.finalizers: finalizer orphan and foregroundDeletion cannot be both set"}
	}
	if !next.Kind.Info().Custom {
		for _, f := range next.Finalizers {
			if !strings.Contains(f, "/") && f != FinalizerOrphan && f != FinalizerForeground && f != FinalizerNamespace && f != FinalizerCRDCleanup {
				return Denial{Message: fmt.Sprintf("metadata.finalizers: %q: name is neither a standard finalizer name nor is it fully qualified", f)}
			}
		}
	}
	return Denial{}
}

// ClearsDeletion reports whether a write that stores next over old
// clears its deletionTimestamp, which no write does: an update cannot
// (rest.BeforeUpdate restores it; UpdateDenial), a DELETE only sets it.
func ClearsDeletion(old, next *View) bool { return old.Deleting && !next.Deleting }

// UpdateRemoves reports whether an update that stores next removes the
// object instead: it leaves an object being deleted without finalizers
// (Store.Update's ShouldDeleteDuringUpdate and deleteWithoutFinalizers).
func UpdateRemoves(next *View) bool { return next.Deleting && len(next.Finalizers) == 0 }

// DeleteResult is what a DELETE that passed its preconditions and
// admission does to the stored object (Store.Delete).
type DeleteResult struct {
	// Finalizers are the object's finalizers after it
	// (deletionFinalizersForGarbageCollection); the slice is the
	// object's own when they do not change.
	Finalizers []string
	// Removed: no finalizer remains, and the DELETE removes the object.
	Removed bool
	// TwoWrites: the removal is two writes, deletionTimestamp first: a
	// kind with a graceful strategy not yet being deleted
	// (rest.BeforeDelete finds CheckGracefulDelete true, so Store.Delete
	// runs updateForGracefulDeletionAndFinalizers before Storage.Delete).
	TwoWrites bool
	// MayKeep: a real API server may keep the object being deleted
	// although Removed: a graceful kind's grace period (the model's Pods
	// are never scheduled and go at once), or a Namespace's
	// spec.finalizers, which a View of a real Namespace lacks.
	MayKeep bool
	// MayAnswerUnchanged: a graceful kind already being deleted may be
	// answered as it is, finalizers unchanged (rest.BeforeDelete's
	// pendingGraceful: Store.Delete returns without writing).
	MayAnswerUnchanged bool
	// LosesRVPrecondition: a resourceVersion precondition that holds is
	// refused all the same, 409 Conflict, and nothing is written
	// (DeleteRVConflict).
	LosesRVPrecondition bool
}

// DeleteRVConflict is the message of the 409 Conflict a DELETE whose
// result LosesRVPrecondition answers, on an object stored at rv.
//
// Store.Delete (k8s.io/apiserver registry/generic/registry/store.go, every
// release from v1.29 to v1.37; the code came with kubernetes#85516 in
// v1.18) runs updateForGracefulDeletionAndFinalizers when the object has
// finalizers or the options change them. When the update function finds
// no finalizer left and no graceful deletion under way it returns
// errDeleteNow, so GuaranteedUpdate writes nothing and leaves `out` the
// empty object. Store.Delete then replaces the request's resourceVersion
// precondition with out's resourceVersion ("Update the
// preconditions.ResourceVersion if set since we updated the object"),
// which is "", and Storage.Delete's storage.Preconditions.Check refuses
// it. So a DELETE that drops the object's last finalizers (orphan or
// foregroundDeletion, by Background, Foreground on a dependent-less
// deletion, or orphanDependents=false) with a resourceVersion
// precondition never succeeds, however current the version it names;
// without the precondition, or with only a uid one, it removes the
// object. A graceful kind not yet being deleted (a Pod) is unaffected:
// its update writes deletionTimestamp, and out carries that version. A
// dry run returns out before Storage.Delete and answers 200. No
// upstream issue found; found by cascade fuzz --target upstream-stepped
// --seed 12, run 132 (traces/scenarios/delete-rv-precondition-last-finalizers.trace).
func DeleteRVConflict(rv int) string {
	return fmt.Sprintf("StorageError: invalid object, Code: 4, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ResourceVersion in precondition: , ResourceVersion in object meta: %d", rv)
}

// Delete is the API server's DELETE of stored object o with opts
// (Store.Delete; apiextensions' CRD REST Delete for a
// CustomResourceDefinition not yet being deleted, which only adds the
// cleanup finalizer).
func Delete(sem Semantics, o *View, opts DeleteOptions) DeleteResult {
	if o.Kind == crdKind() && !o.Deleting {
		fins := o.Finalizers
		if !o.hasFinalizer(FinalizerCRDCleanup) {
			fins = append(slices.Clip(fins), FinalizerCRDCleanup)
		}
		return DeleteResult{Finalizers: fins}
	}
	fins := deletionFinalizers(o, opts)
	graceful := GracefulDelete(o.Kind)
	twoWrites := len(fins) == 0 && graceful && !o.Deleting
	return DeleteResult{
		Finalizers:         fins,
		Removed:            len(fins) == 0,
		TwoWrites:          twoWrites,
		MayKeep:            graceful || o.Kind.Info().Kind == "Namespace",
		MayAnswerUnchanged: graceful && o.Deleting,
		// the update path's errDeleteNow: finalizers to drop, all
		// dropped, no deletionTimestamp write first (DeleteRVConflict)
		LosesRVPrecondition: len(fins) == 0 && len(o.Finalizers) > 0 && !twoWrites && opts.PreconditionRV != 0 && !opts.DryRun,
	}
}

// DeleteOptionsDenial is why ValidateDeleteOptions refuses opts (422
// Invalid, before anything is read), or "": orphanDependents and
// propagationPolicy cannot both be set.
func DeleteOptionsDenial(opts DeleteOptions) string {
	if opts.OrphanDependents != nil && opts.Policy != NoPolicy {
		return fmt.Sprintf("DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: %q: orphanDependents and deletionPropagation cannot be both set", opts.Policy.String())
	}
	return ""
}

// check is the Check of a precondition that is set or not and holds or
// not on the stored object.
func check(set, holds bool) Check {
	switch {
	case !set:
		return Unset
	case holds:
		return Holds
	}
	return Fails
}

// CreateAnswers is the set of statuses the API server may answer a
// create given whether an object is stored under its name, as far as
// the store decides them: 409 AlreadyExists for a taken name (etcd3's
// create transaction), else 2xx. The created object is never being
// deleted (rest.BeforeCreate clears deletionTimestamp).
func CreateAnswers(stored bool) Answers {
	if stored {
		return AnswerConflict
	}
	return AnswerOK
}
