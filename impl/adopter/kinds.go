package adopter

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cascade-k8s/cascade/impl/crds"
	"github.com/cascade-k8s/cascade/impl/step"
)

// workload is one owner kind the controller can manage: its objects adopt
// and release objects of dep in their namespace.
type workload struct {
	owner, dep step.Kind
	// selector reads the owner's selector; nil or empty selects nothing.
	selector func(*unstructured.Unstructured) labels.Selector
	// activeOnly: the owner's sync claims only active dependents
	// (controller.FilterActivePods, as the ReplicaSet and
	// ReplicationController controllers do before ClaimPods).
	activeOnly bool
}

// Kinds lists the owner kinds (API kind names) a Controller can manage,
// each with the kind it adopts: Herd (cascade's own, Pods), ReplicaSet
// (Pods), ReplicationController (Pods) and Deployment (ReplicaSets). The
// built-in three mirror kube-controller-manager's replicaset,
// replicationcontroller and deployment controllers as far as ownership
// goes (adoption and release); none of them creates or scales anything.
var Kinds = []string{crds.Herd.Kind, "ReplicaSet", "ReplicationController", "Deployment"}

func mustKind(name string) step.Kind {
	k, ok := step.KindByName(name)
	if !ok {
		panic("adopter: unknown kind " + name)
	}
	return k
}

var workloads = map[string]workload{
	crds.Herd.Kind:          {owner: mustKind(crds.Herd.Kind), dep: mustKind("Pod"), selector: labelSelector, activeOnly: true},
	"ReplicaSet":            {owner: mustKind("ReplicaSet"), dep: mustKind("Pod"), selector: labelSelector, activeOnly: true},
	"ReplicationController": {owner: mustKind("ReplicationController"), dep: mustKind("Pod"), selector: mapSelector, activeOnly: true},
	"Deployment":            {owner: mustKind("Deployment"), dep: mustKind("ReplicaSet"), selector: labelSelector},
}

// parseKinds checks owner kind names against Kinds; nil means Herd only.
func parseKinds(names []string) ([]workload, error) {
	if len(names) == 0 {
		names = []string{crds.Herd.Kind}
	}
	var out []workload
	for _, n := range names {
		w, ok := workloads[n]
		if !ok {
			return nil, fmt.Errorf("adopter: cannot manage kind %q (can: %s)", n, strings.Join(Kinds, ", "))
		}
		if !slices.ContainsFunc(out, func(x workload) bool { return x.owner.Kind == n }) {
			out = append(out, w)
		}
	}
	return out, nil
}

// labelSelector reads spec.selector as a metav1.LabelSelector (Herd,
// ReplicaSet, Deployment: metav1.LabelSelectorAsSelector). A missing,
// empty or unreadable selector selects nothing: the API server rejects an
// empty one on ReplicaSets, and the Deployment controller skips a
// Deployment whose selector is empty (syncDeployment).
func labelSelector(o *unstructured.Unstructured) labels.Selector {
	m, found, _ := unstructured.NestedMap(o.Object, "spec", "selector")
	if !found || len(m) == 0 {
		return labels.Nothing()
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls); err != nil {
		return labels.Nothing()
	}
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// mapSelector reads a ReplicationController's spec.selector, a plain
// label map (labels.Set(rc.Spec.Selector).AsSelectorPreValidated()); an
// empty one selects nothing (the API server defaults it from the
// template's labels).
func mapSelector(o *unstructured.Unstructured) labels.Selector {
	m, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
	if len(m) == 0 {
		return labels.Nothing()
	}
	return labels.SelectorFromSet(m)
}

// active is controller.IsPodActive: not Succeeded, not Failed, not being
// deleted.
func active(o *unstructured.Unstructured) bool {
	phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
	return phase != "Succeeded" && phase != "Failed" && o.GetDeletionTimestamp() == nil
}

// action is ClaimObject's decision about one owner and one dependent.
type action int

const (
	none action = iota
	adoptIt
	releaseIt
)

// decide is BaseControllerRefManager.ClaimObject's decision
// (pkg/controller/controller_ref_manager.go) on cached objects, after the
// owner's sync has picked its candidates (same namespace, and for pods
// only active ones):
//   - a dependent controlled by someone else is left alone;
//   - one controlled by owner that still matches is kept; one that no
//     longer matches is released, unless owner is being deleted;
//   - an orphan is adopted when it matches and neither it nor owner is
//     being deleted.
func (w workload) decide(owner, dep *unstructured.Unstructured) action {
	if dep.GetNamespace() != owner.GetNamespace() || (w.activeOnly && !active(dep)) {
		return none
	}
	match := w.selector(owner).Matches(labels.Set(dep.GetLabels()))
	if ref := metav1.GetControllerOfNoCopy(dep); ref != nil {
		if ref.UID != owner.GetUID() || match || owner.GetDeletionTimestamp() != nil {
			return none
		}
		return releaseIt
	}
	if owner.GetDeletionTimestamp() != nil || !match || dep.GetDeletionTimestamp() != nil {
		return none
	}
	return adoptIt
}
