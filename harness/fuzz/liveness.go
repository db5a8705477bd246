package fuzz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cascade-k8s/cascade/model"
)

// livenessProperties are the model's quiescent properties that read the
// API state alone. (The third, the-graph-agrees-with-the-store, is about
// the GC's private graph, which a real target does not show.)
var livenessProperties = []string{model.PropGarbageCollected, model.PropNoStuckFinalizer}

// realObject is one object of the run as listed once the cluster is
// quiet.
type realObject struct {
	kind model.KindID
	u    unstructured.Unstructured
}

// listRun lists every object of a model kind in the run: in the
// namespaces whose names start with prefix+"-", cluster-scoped objects
// whose names do, and the CRDs of the model's custom kinds (so that owner
// references to custom kinds resolve). It lists what controllers created
// too, which the driver does not know. Events are listed as well: never
// an owner and never collected, an Event with an ownerReference is still
// an active dependent that Cascading deletion protection counts, so
// without it a protected object the webhook rightly keeps reads as
// uncollected garbage (ActiveDependents).
func listRun(ctx context.Context, c dynamic.Interface, prefix string) ([]realObject, error) {
	nsList, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var namespaces []string
	for _, ns := range nsList.Items {
		if strings.HasPrefix(ns.GetName(), prefix+"-") {
			namespaces = append(namespaces, ns.GetName())
		}
	}
	var out []realObject
	for k := range model.KindID(model.NumKinds) { // every kind: KindID 0 is Pod
		info := k.Info()
		gv, _ := schema.ParseGroupVersion(info.APIVersion)
		r := c.Resource(gv.WithResource(info.Resource))
		var lists []*unstructured.UnstructuredList
		if info.Namespaced {
			for _, ns := range namespaces {
				l, err := r.Namespace(ns).List(ctx, metav1.ListOptions{})
				if apierrors.IsNotFound(err) {
					break // a custom kind whose CRD is not installed
				}
				if err != nil {
					return nil, fmt.Errorf("list %s in %s: %w", info.Resource, ns, err)
				}
				lists = append(lists, l)
			}
		} else {
			l, err := r.List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", info.Resource, err)
			}
			lists = append(lists, l)
		}
		for _, l := range lists {
			for _, u := range l.Items {
				name := u.GetName()
				switch {
				case info.Namespaced:
				case info.Short == "ns":
					if !slices.Contains(namespaces, name) {
						continue
					}
				case info.Short == "crd":
					if _, custom := crdKinds()[name]; !custom {
						continue
					}
				case !strings.HasPrefix(name, prefix+"-"):
					continue
				}
				out = append(out, realObject{kind: k, u: u})
			}
		}
	}
	return out, nil
}

// crdKinds maps the CRD names of the model's custom kinds to them.
func crdKinds() map[string]model.KindID {
	m := map[string]model.KindID{}
	for k := range model.KindID(model.NumKinds) {
		if n := k.Info().CRDName; n != "" {
			m[n] = k
		}
	}
	return m
}

// storeState builds a model state whose store is the real objects: UIDs
// are numbered in list order, references to UIDs no listed object has
// get UIDs of their own that name nothing, and names stay the real ones
// (the properties compare names, never interpret them).
//
// Owners in stale (by real UID) that no listed object has are kept in
// the state's GC graph as observed nodes (model.State.KeepStaleNode):
// the evidence shows the GC's graph kept them.
func storeState(objs []realObject, stale staleNodes) *model.State {
	s := model.NewState()
	uids := map[string]model.UID{}
	uidOf := func(real string, info model.UIDInfo) model.UID {
		if u, ok := uids[real]; ok {
			return u
		}
		s.UIDs = append(s.UIDs, info)
		u := model.UID(len(s.UIDs))
		uids[real] = u
		return u
	}
	listed, staleKept := map[string]bool{}, map[model.UID]bool{}
	for _, o := range objs {
		uidOf(string(o.u.GetUID()), model.UIDInfo{Kind: o.kind, Namespace: o.u.GetNamespace(), Name: o.u.GetName(), Nth: 1})
		listed[string(o.u.GetUID())] = true
	}
	for _, o := range objs {
		mo := model.Object{
			UID: uids[string(o.u.GetUID())], Kind: o.kind, Namespace: o.u.GetNamespace(), Name: o.u.GetName(),
			Finalizers: o.u.GetFinalizers(), Deleting: o.u.GetDeletionTimestamp() != nil,
		}
		if o.kind.Info().Kind == "Namespace" {
			// The model keeps a Namespace's spec.finalizers ("kubernetes",
			// the namespace lifecycle's) with its metadata.finalizers
			// (model.FinalizerNamespace); a Terminating Namespace is held
			// by it, outside the GC, until the namespace controller has
			// emptied it (cascade's control planes run none).
			spec, _, _ := unstructured.NestedStringSlice(o.u.Object, "spec", "finalizers")
			mo.Finalizers = append(slices.Clone(mo.Finalizers), spec...)
		}
		for _, r := range o.u.GetOwnerReferences() {
			ref := model.OwnerRef{Kind: r.Kind, Name: r.Name, UID: uidOf(string(r.UID), model.UIDInfo{Kind: model.NoKind, Symbol: "uid:" + string(r.UID)})}
			if stale[string(r.UID)] && !listed[string(r.UID)] && !staleKept[ref.UID] {
				staleKept[ref.UID] = true
				id := model.Identity{Kind: r.Kind, Name: r.Name, UID: ref.UID}
				if k, ok := model.KindByName(r.Kind); ok && k.Info().Namespaced {
					id.Namespace = o.u.GetNamespace()
				}
				s.KeepStaleNode(id)
			}
			ref.Controller = r.Controller != nil && *r.Controller
			ref.Block = r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
			ref.ControllerUnset, ref.BlockUnset = r.Controller == nil, r.BlockOwnerDeletion == nil
			mo.Owners = append(mo.Owners, ref)
		}
		for k, v := range o.u.GetLabels() {
			mo.Labels = append(mo.Labels, model.Label{Key: k, Value: v})
		}
		slices.SortFunc(mo.Labels, func(a, b model.Label) int { return strings.Compare(a.Key, b.Key) })
		if n, found, _ := unstructured.NestedInt64(o.u.Object, "spec", "replicas"); found {
			mo.Replicas = int(n)
		}
		s.Objects = append(s.Objects, mo)
	}
	slices.SortFunc(s.Objects, func(a, b model.Object) int { return int(a.UID) - int(b.UID) })
	return s
}

// checkLiveness evaluates the quiescent properties on the real state of a
// quiet cluster, judged on release r (its control plane's), and returns
// the first violation the known-race registry does not excuse on r, and
// those it does.
//
// stale are the owners the GC's graph keeps for lack of a delete event,
// as evidence shows (staleNodes); nil for none.
func checkLiveness(objs []realObject, stale staleNodes, r model.Release) (v *model.Violation, known []*model.Violation) {
	m := &model.Model{Release: r}
	s := storeState(objs, stale)
	for _, name := range livenessProperties {
		p, err := model.PropertyByName(name)
		if err != nil {
			panic(err) // the list above names model properties
		}
		switch v := m.Admit(p.CheckState(m, s)); {
		case v == nil:
		case v.Known == "":
			return v, known
		default:
			known = append(known, v)
		}
	}
	return nil, known
}
