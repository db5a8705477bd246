package model

import (
	"fmt"
	"iter"
	"slices"
)

// This file is the one statement of two rules that both the model and
// harness/lin judge by: what the deletion-protection webhook denies, and
// how the GC's classifyReferences sorts an ownerReference. The model's
// API server, GC and properties call these predicates, and so does
// harness/lin on the objects of a real history, which it reduces to a
// View the same way the model does.

// View is an object as deletion protection and the GC's reference
// classification read it. Object.View gives the model's; harness/lin
// builds one from a history's object.
type View struct {
	Kind      KindID
	Namespace string // "" for cluster-scoped kinds
	Name      string
	// Deleting: deletionTimestamp is set.
	Deleting   bool
	Finalizers []string
	// Protection is the value of ProtectionLabel, "" when unset.
	Protection string
	// Replicas is spec.replicas of a workload.
	Replicas int
}

// View reduces o to what deletion protection and reference
// classification read.
func (o *Object) View() View {
	p, _ := o.Label(ProtectionLabel)
	return View{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Deleting: o.Deleting,
		Finalizers: o.Finalizers, Protection: p, Replicas: o.Replicas}
}

func (v *View) hasFinalizer(f string) bool {
	for _, g := range v.Finalizers {
		if g == f {
			return true
		}
	}
	return false
}

// ProtectionMayDeny reports whether the deletion-protection webhook can
// deny a DELETE of o in some state: o is not being deleted and carries
// ProtectionLabel with a value that denies (Always, or Cascading while it
// has active dependents).
func ProtectionMayDeny(o *View) bool {
	return !o.Deleting && (o.Protection == ProtectAlways || o.Protection == ProtectCascading)
}

// ProtectionDenial is the deletion-protection webhook's verdict on a
// DELETE of o, after OpenKruise's pkg/webhook/util/deletionprotection:
// why it denies, or "" when it allows. active is ActiveDependents of o.
//
//   - An object already being deleted is always allowed.
//   - policy.kruise.io/delete-protection=Always denies every delete.
//   - =Cascading denies while the object has active dependents.
func ProtectionDenial(o *View, active int) string {
	if !ProtectionMayDeny(o) {
		return ""
	}
	if o.Protection == ProtectAlways {
		return fmt.Sprintf("forbidden by deletion protection for %s=%s", ProtectionLabel, o.Protection)
	}
	if active > 0 {
		return fmt.Sprintf("forbidden by deletion protection for %s=%s and %d active dependents", ProtectionLabel, o.Protection, active)
	}
	return ""
}

// ActiveDependents counts what Cascading protection of o waits for among
// objects, each given with whether it has an ownerReference to o's UID:
//
//   - a Namespace: its Pods not being deleted;
//   - a CustomResourceDefinition: the custom resources of its kind not
//     being deleted;
//   - a workload: spec.replicas (objects are not read);
//   - any other object: the objects not being deleted that have an
//     ownerReference to its UID (cascade's extension of Kruise's per-kind
//     list to every kind).
//
// Counting over part of the store gives a lower bound.
func ActiveDependents(o *View, objects iter.Seq2[*View, bool]) int {
	info := o.Kind.Info()
	if info.Workload {
		return o.Replicas
	}
	crd, isCRD := NoKind, false
	if info.Kind == "CustomResourceDefinition" {
		if crd, isCRD = kindForCRD(o.Name); !isCRD {
			return 0
		}
	}
	n := 0
	for d, refers := range objects {
		switch {
		case info.Kind == "Namespace":
			if d.Kind.Info().Kind == "Pod" && d.Namespace == o.Name && !d.Deleting {
				n++
			}
		case isCRD:
			// Kruise's ValidateCRDDeletion counts the custom resources
			// without a deletionTimestamp ("active CRs")
			if d.Kind == crd && !d.Deleting {
				n++
			}
		case refers && !d.Deleting:
			n++
		}
	}
	return n
}

// RefClass is how the GC's classifyReferences (garbagecollector.go) sorts
// one ownerReference of an object it attempts to delete.
type RefClass uint8

const (
	// RefUnresolvable: isDangling fails and the GC never acts on the
	// object through the reference: its kind is not served (a
	// restMappingError, retried forever), or a cluster-scoped dependent
	// names a namespaced owner kind (namespacedOwnerOfClusterScopedObjectErr,
	// forgotten). See OwnerScope.
	RefUnresolvable RefClass = iota
	// RefDangling: isDangling finds no live object with the reference's
	// kind, name and UID where OwnerScope looks.
	RefDangling
	// RefWaiting: the owner has deletionTimestamp and foregroundDeletion
	// (classifyReferences' waitingForDependentsDeletion).
	RefWaiting
	// RefSolid: any other live owner: not being deleted, or being deleted
	// without foregroundDeletion (with orphan, a user finalizer, or a
	// grace period). attemptToDeleteItem deletes an object only when none
	// of its references is solid.
	RefSolid
)

// OwnerScope is where isDangling (garbagecollector.go) looks up an owner
// of kind k for a dependent in namespace depNS: the dependent's namespace
// for a namespaced kind, "" for a cluster-scoped one. ok is false for a
// namespaced owner kind named by a cluster-scoped dependent
// (namespacedOwnerOfClusterScopedObjectErr: RefUnresolvable).
func OwnerScope(k KindID, depNS string) (ns string, ok bool) {
	if !k.Info().Namespaced {
		return "", true
	}
	if depNS == "" {
		return "", false
	}
	return depNS, true
}

// ClassifyOwner is classifyReferences' verdict on a reference whose owner
// isDangling found where OwnerScope looks: owner is that object when its
// UID is the reference's, nil when there is none (RefDangling). An owner
// with deletionTimestamp and foregroundDeletion is waiting
// (hasDeleteDependentsFinalizer); every other owner is solid, one being
// deleted with orphan or a user finalizer included.
func ClassifyOwner(owner *View) RefClass {
	switch {
	case owner == nil:
		return RefDangling
	case owner.Deleting && owner.hasFinalizer(FinalizerForeground):
		return RefWaiting
	}
	return RefSolid
}

// GCDeleteBlocker is the index of the first of an object's
// ownerReferences, as classifyReferences sorted them into classes, that
// forbids attemptToDeleteItem (garbagecollector.go) to delete it, -1 when
// none does: an unresolvable one first (isDangling fails, and the worker
// retries or forgets the item), else a solid one (the solid arm only
// patches references away).
func GCDeleteBlocker(classes []RefClass) int {
	if i := slices.Index(classes, RefUnresolvable); i >= 0 {
		return i
	}
	return slices.Index(classes, RefSolid)
}

// GCMayDelete reports whether attemptToDeleteItem may delete an object
// whose ownerReferences classifyReferences sorted into classes: it has
// some (an object without ownerReferences is left alone), and none
// forbids it (GCDeleteBlocker).
func GCMayDelete(classes []RefClass) bool {
	return len(classes) > 0 && GCDeleteBlocker(classes) < 0
}

// RefRemovable reports whether attemptToDeleteItem's solid arm removes
// a reference of class c from an object that also has a solid owner: a
// dangling or a waiting one (the ownerReferences patch of
// garbagecollector.go, classifyReferences' dangling and
// waitingForDependentsDeletion).
func RefRemovable(c RefClass) bool { return c == RefDangling || c == RefWaiting }

// Orphaning reports whether owner is being deleted with the orphan
// finalizer: attemptToOrphan's orphanDependents then removes every
// reference to its UID that the GC's graph holds, which links
// dependents by UID, through a reference it cannot resolve too.
func Orphaning(owner *View) bool {
	return owner.Deleting && owner.hasFinalizer(FinalizerOrphan)
}

// GCFinalizerDenial is why the GC may not remove finalizer f from o, or
// "": it removes only its own finalizers (removeFinalizer in
// operations.go: orphan after attemptToOrphan, foregroundDeletion in
// processDeletingDependentsItem), and only from an object being
// deleted. Whether o's dependents let it go is GCFinalizerWaits.
func GCFinalizerDenial(o *View, f string) string {
	switch {
	case f != FinalizerOrphan && f != FinalizerForeground:
		return fmt.Sprintf("finalizer %q is not the GC's", f)
	case !o.Deleting:
		return fmt.Sprintf("%s is on an object not being deleted", f)
	}
	return ""
}

// GCFinalizerWaits reports which dependents the GC's finalizer f waits
// for: blockingOnly for foregroundDeletion (processDeletingDependentsItem
// removes it once blockingDependents is empty), every dependent for
// orphan (attemptToOrphan removes it after orphanDependents removed
// every reference).
func GCFinalizerWaits(f string) (blockingOnly bool) { return f == FinalizerForeground }
