// Package webhook is cascade's deletion-protection webhook: a validating
// admission webhook on DELETE, served over TLS by controller-runtime's
// webhook server, that implements OpenKruise's
// policy.kruise.io/delete-protection label
// (pkg/webhook/util/deletionprotection in openkruise/kruise):
//
//   - an object already being deleted is always allowed;
//   - Always denies every delete;
//   - Cascading denies while the object has active dependents: a
//     Namespace with Pods not being deleted; a CustomResourceDefinition
//     with custom resources of it; a workload (Deployment, ReplicaSet,
//     StatefulSet, ReplicationController, Herd) with spec.replicas > 0;
//     any other object with live objects (not being deleted) that have an
//     ownerReference to its UID (cascade's extension of Kruise's per-kind
//     list to every kind, as the model's protection.go).
//
// Denials are HTTP 403 with a message naming the label. Install registers
// the webhook with an objectSelector on the label key, so the API server
// sends it only labelled objects, and failurePolicy Fail. The
// protection-disabled bug (openkruise/kruise#1526) allows everything.
package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cascade-k8s/cascade/impl/bugs"
)

// Label is the protection label; its values are Always and Cascading.
const (
	Label     = "policy.kruise.io/delete-protection"
	Always    = "Always"
	Cascading = "Cascading"
)

// workloads are the kinds whose Cascading protection reads spec.replicas.
var workloads = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:        true,
	{Group: "apps", Kind: "ReplicaSet"}:        true,
	{Group: "apps", Kind: "StatefulSet"}:       true,
	{Group: "", Kind: "ReplicationController"}: true,
	{Group: "cascade.dev", Kind: "Herd"}:       true,
}

// protection is the admission handler.
type protection struct {
	bugs      bugs.Set
	dyn       dynamic.Interface
	meta      metadata.Interface
	discovery discovery.DiscoveryInterface
}

// Handle decides one admission request.
func (p *protection) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	if p.bugs.Has(bugs.ProtectionDisabled) {
		return admission.Allowed("deletion protection disabled")
	}
	// unstructured's decoder keeps integers int64 (spec.replicas)
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.OldObject.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("deletion protection: cannot read the object being deleted: %v", err))
	}
	if obj.GetDeletionTimestamp() != nil {
		return admission.Allowed("already being deleted")
	}
	v, set := obj.GetLabels()[Label]
	if !set {
		return admission.Allowed("")
	}
	switch v {
	case Always:
		return admission.Denied(fmt.Sprintf("forbidden by deletion protection for %s=%s", Label, v))
	case Cascading:
		gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
		n, err := p.activeDependents(ctx, gk, obj)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("deletion protection: counting dependents: %w", err))
		}
		if n > 0 {
			return admission.Denied(fmt.Sprintf("forbidden by deletion protection for %s=%s and %d active dependents", Label, v, n))
		}
	}
	return admission.Allowed("")
}

// activeDependents counts what Cascading protection waits for, reading
// the API server live (the object's state is the one being deleted).
func (p *protection) activeDependents(ctx context.Context, gk schema.GroupKind, obj *unstructured.Unstructured) (int, error) {
	switch {
	case gk == schema.GroupKind{Kind: "Namespace"}:
		pods, err := p.meta.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(obj.GetName()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp == nil {
				n++
			}
		}
		return n, nil
	case gk == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return p.customResources(ctx, obj)
	case workloads[gk]:
		r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		return int(r), nil
	}
	return p.ownedObjects(ctx, obj)
}

// customResources counts the custom resources a CRD serves, in every
// namespace, that are not being deleted: Kruise's ValidateCRDDeletion
// counts those without a deletionTimestamp ("active CRs").
func (p *protection) customResources(ctx context.Context, crd *unstructured.Unstructured) (int, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, x := range versions {
		m, _ := x.(map[string]any)
		if served, _ := m["served"].(bool); served {
			version, _ = m["name"].(string)
			if storage, _ := m["storage"].(bool); storage {
				break
			}
		}
	}
	if version == "" {
		return 0, nil // nothing served, nothing to count
	}
	list, err := p.meta.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural}).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, cr := range list.Items {
		if cr.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// ownedObjects counts live objects, in any namespace and of any listable
// resource, that have an ownerReference to obj's UID, each once: a kind
// served by two groups (Events: core v1 and events.k8s.io/v1) lists the
// same objects from both.
func (p *protection) ownedObjects(ctx context.Context, obj *unstructured.Unstructured) (int, error) {
	lists, err := p.discovery.ServerPreferredResources()
	if lists == nil {
		return 0, err
	}
	var resources []schema.GroupVersionResource
	for _, rl := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list"}}, lists) {
		gv, perr := schema.ParseGroupVersion(rl.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range rl.APIResources {
			resources = append(resources, gv.WithResource(r.Name))
		}
	}
	var (
		mu    sync.Mutex
		seen  = map[types.UID]bool{}
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
	)
	for _, r := range resources {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			list, err := p.meta.Resource(r).List(ctx, metav1.ListOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
				return // went away since discovery
			case err != nil:
				errs = append(errs, fmt.Errorf("list %s: %w", r, err))
				return
			}
			for _, d := range list.Items {
				if d.DeletionTimestamp != nil {
					continue
				}
				for _, ref := range d.OwnerReferences {
					if ref.UID == obj.GetUID() {
						seen[d.UID] = true
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return 0, errs[0]
	}
	return len(seen), nil
}
