package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/cascade-k8s/cascade/impl/bugs"
)

// errEnqueuedVirtualDelete is enqueuedVirtualDeleteEventErr: the item was
// found absent and a virtual delete event now tells the graph builder;
// the worker forgets the item.
var errEnqueuedVirtualDelete = errors.New("enqueued virtual delete event")

// errNamespacedOwnerOfClusterScoped is
// namespacedOwnerOfClusterScopedObjectErr: a cluster-scoped object names a
// namespaced owner kind. Retrying cannot help, so the item is forgotten
// and the object is never collected.
var errNamespacedOwnerOfClusterScoped = errors.New("cluster-scoped objects cannot refer to namespaced owners")

// restMappingError: a reference names a kind discovery does not serve (not
// yet, or never). The item is retried, rate-limited, forever.
type restMappingError struct{ kind, version string }

// Error says which kind has no mapping.
func (e *restMappingError) Error() string {
	return fmt.Sprintf("unable to get REST mapping for %s/%s", e.kind, e.version)
}

// resourceDefaultNamespace clears the namespace for cluster-scoped kinds.
func resourceDefaultNamespace(namespaced bool, ns string) string {
	if namespaced {
		return ns
	}
	return ""
}

// apiResource maps apiVersion and kind to a resource and its scope.
func (gc *GarbageCollector) apiResource(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	m, err := gc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, &restMappingError{kind: kind, version: apiVersion}
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// getObject is the live GET of an item (operations.go getObject). The
// lookup-ignores-scope bug keeps a cluster-scoped kind's inherited
// namespace, as before kubernetes#57211, so the GET misses.
func (gc *GarbageCollector) getObject(ctx context.Context, id Identity) (*metav1.PartialObjectMetadata, error) {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return nil, err
	}
	ns := resourceDefaultNamespace(namespaced, id.Namespace)
	if gc.bugs.Has(bugs.LookupIgnoresScope) {
		ns = id.Namespace
	}
	if namespaced && ns == "" {
		// only a cluster-scoped dependent can give a namespaced kind no namespace
		return nil, errNamespacedOwnerOfClusterScoped
	}
	return gc.metadata.Resource(r).Namespace(ns).Get(ctx, id.Name, metav1.GetOptions{})
}

// deleteObject deletes an item with UID and resourceVersion preconditions
// (kubernetes#132632). On a conflict it re-reads the object: gone returns
// NotFound; same UID at another resourceVersion with unchanged
// ownerReferences retries with the UID precondition alone, so that
// updates unrelated to ownership do not starve the GC. The
// delete-without-rv-precondition bug sends the UID precondition only.
// A nil policy sends no propagationPolicy.
func (gc *GarbageCollector) deleteObject(ctx context.Context, id Identity, rv string, owners []metav1.OwnerReference, policy *metav1.DeletionPropagation) error {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return err
	}
	if gc.bugs.Has(bugs.DeleteWithoutRVPrecondition) {
		rv = ""
	}
	uid := id.UID
	pre := metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	client := gc.metadata.Resource(r).Namespace(resourceDefaultNamespace(namespaced, id.Namespace))
	gc.writeDelay(ctx)
	err = client.Delete(ctx, id.Name, metav1.DeleteOptions{Preconditions: &pre, PropagationPolicy: policy})
	if err == nil {
		gc.writesOK.Add(1)
	}
	if apierrors.IsConflict(err) && rv != "" {
		live, liveErr := client.Get(ctx, id.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(liveErr) {
			return liveErr
		}
		if liveErr == nil && live.UID == id.UID && live.ResourceVersion != rv && refsEqual(live.OwnerReferences, owners) {
			return gc.deleteObject(ctx, id, "", nil, policy)
		}
	}
	return err
}

func (gc *GarbageCollector) patchObject(ctx context.Context, id Identity, pt types.PatchType, data []byte) error {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return err
	}
	gc.writeDelay(ctx)
	_, err = gc.metadata.Resource(r).Namespace(resourceDefaultNamespace(namespaced, id.Namespace)).Patch(ctx, id.Name, pt, data, metav1.PatchOptions{})
	if err == nil {
		gc.writesOK.Add(1)
	}
	return err
}

// patch sends a strategic merge patch and, when the resource does not
// support one (415: custom resources), the JSON merge patch jmp builds.
func (gc *GarbageCollector) patch(ctx context.Context, id Identity, smp []byte, jmp func() ([]byte, error)) error {
	err := gc.patchObject(ctx, id, types.StrategicMergePatchType, smp)
	if err == nil || !apierrors.IsUnsupportedMediaType(err) {
		return err
	}
	data, err := jmp()
	if err != nil {
		return err
	}
	return gc.patchObject(ctx, id, types.MergePatchType, data)
}

// smpPatch is the metadata of a GC strategic merge patch. UID makes it
// fail (422, immutable field) on another incarnation of the object: a
// precondition. An empty reference list is left out: a null would delete
// every reference (upstream's field is omitempty).
type smpPatch struct {
	Metadata struct {
		UID             types.UID `json:"uid"`
		OwnerReferences any       `json:"ownerReferences,omitempty"`
	} `json:"metadata"`
}

// jmpPatch is the metadata of a GC JSON merge patch (ObjectMetaForPatch):
// the whole reference list, null when empty, at the resourceVersion it was
// computed from, so that a concurrent change fails it with 409.
type jmpPatch struct {
	Metadata struct {
		ResourceVersion string                  `json:"resourceVersion"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
}

func smp(uid types.UID, refs any) []byte {
	var p smpPatch
	p.Metadata.UID, p.Metadata.OwnerReferences = uid, refs
	b, _ := json.Marshal(p)
	return b
}

func jmp(rv string, refs []metav1.OwnerReference) ([]byte, error) {
	var p jmpPatch
	p.Metadata.ResourceVersion, p.Metadata.OwnerReferences = rv, refs
	return json.Marshal(p)
}

// deleteOwnerRefsSMP is GenerateDeleteOwnerRefStrategicMergeBytes: a
// $patch=delete directive per owner UID (a reference already gone is no
// error) with the dependent's UID as precondition.
func deleteOwnerRefsSMP(dependent types.UID, owners []types.UID) []byte {
	dirs := make([]map[string]string, 0, len(owners))
	for _, u := range owners {
		dirs = append(dirs, map[string]string{"$patch": "delete", "uid": string(u)})
	}
	return smp(dependent, dirs)
}

// deleteOwnerRefsJMP is deleteOwnerRefJSONMergePatch: the whole reference
// list without the owners, at the resourceVersion of the GC's cached copy.
func (gc *GarbageCollector) deleteOwnerRefsJMP(ctx context.Context, id Identity, owners []types.UID) ([]byte, error) {
	o, err := gc.cachedMetadata(ctx, id)
	if err != nil {
		return nil, err
	}
	var keep []metav1.OwnerReference
	for _, r := range o.GetOwnerReferences() {
		if !slices.Contains(owners, r.UID) {
			keep = append(keep, r)
		}
	}
	return jmp(o.GetResourceVersion(), keep)
}

// unblockSMP is unblockOwnerReferencesStrategicMergePatch: the item's
// blocking references (as the graph has them) with blockOwnerDeletion=false.
func unblockSMP(item Identity, graphOwners []metav1.OwnerReference) []byte {
	f := false
	var refs []metav1.OwnerReference
	for _, r := range graphOwners {
		if blocks(r) {
			r.BlockOwnerDeletion = &f
			refs = append(refs, r)
		}
	}
	if len(refs) == 0 {
		return smp(item.UID, nil) // nothing to unblock: a no-op patch
	}
	return smp(item.UID, refs)
}

// unblockJMP is unblockOwnerReferencesJSONMergePatch: every graph
// reference with blockOwnerDeletion=false, at the cached resourceVersion.
func (gc *GarbageCollector) unblockJMP(ctx context.Context, id Identity, graphOwners []metav1.OwnerReference) ([]byte, error) {
	o, err := gc.cachedMetadata(ctx, id)
	if err != nil {
		return nil, err
	}
	f := false
	var refs []metav1.OwnerReference
	for _, r := range graphOwners {
		r.BlockOwnerDeletion = &f
		refs = append(refs, r)
	}
	return jmp(o.GetResourceVersion(), refs)
}

// finalizersPatch is objectForFinalizersPatch.
type finalizersPatch struct {
	Metadata struct {
		ResourceVersion string   `json:"resourceVersion"`
		Finalizers      []string `json:"finalizers"`
	} `json:"metadata"`
}

// removeFinalizer (operations.go) drops finalizer f from the owner with a
// JSON merge patch at the resourceVersion just read, retrying on conflict
// (retry.DefaultBackoff). An owner already gone or without f is done. As
// upstream, the GET is by name and no UID is compared: a stale
// attemptToOrphan item takes the orphan finalizer off a new owner of the
// same name (the known race stale-orphan-item,
// traces/races/stale-orphan-item.trace). processDeletingDependentsItem's
// call for foregroundDeletion comes after attemptToDeleteItem's GET and
// UID check, but as upstream's it GETs again, and an object replaced in
// between loses foregroundDeletion; the model takes both GETs in one
// step and does not have that window.
func (gc *GarbageCollector) removeFinalizer(ctx context.Context, owner Identity, f string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		o, err := gc.getObject(ctx, owner)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("cannot finalize owner %s, because cannot get it: %w. The garbage collector will retry later", owner, err)
		}
		var p finalizersPatch
		found := false
		for _, x := range o.Finalizers {
			if x == f {
				found = true
				continue
			}
			p.Metadata.Finalizers = append(p.Metadata.Finalizers, x)
		}
		if !found {
			return nil
		}
		p.Metadata.ResourceVersion = o.ResourceVersion
		data, err := json.Marshal(p)
		if err != nil {
			return err
		}
		return gc.patchObject(ctx, owner, types.MergePatchType, data)
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("updateMaxRetries(%d) has reached. The garbage collector will retry later for owner %v", retry.DefaultBackoff.Steps, owner)
	}
	return err
}
