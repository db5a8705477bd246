// Package crds holds the CustomResourceDefinitions of cascade's own kinds
// (group cascade.dev, version v1), which the model's kind table names:
// Herd (namespaced, a workload the adopting controller manages), Widget
// (namespaced) and Gizmo (cluster-scoped). Install puts them on a cluster
// and waits until they are served.
//
// The definitions are built as unstructured objects so that impl needs no
// apiextensions client; the schemas preserve unknown fields except for
// the Herd spec the controller reads.
package crds

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Group and Version of cascade's kinds.
const (
	Group   = "cascade.dev"
	Version = "v1"
)

// CRDResource is the resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Def describes one of cascade's custom kinds.
type Def struct {
	Kind       string
	Plural     string
	Singular   string
	Namespaced bool
	// Schema is the openAPIV3Schema of the version.
	Schema map[string]any
}

// Name is the CRD's name, plural.group.
func (d Def) Name() string { return d.Plural + "." + Group }

// GVR is the kind's resource.
func (d Def) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: d.Plural}
}

// GVK is the kind.
func (d Def) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: Version, Kind: d.Kind}
}

func openSchema() map[string]any {
	return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
}

// Herd is a namespaced ReplicaSet-like workload: spec.selector.matchLabels
// picks the Pods the adopting controller adopts; spec.replicas is read by
// deletion protection. Its controller never creates pods.
var Herd = Def{Kind: "Herd", Plural: "herds", Singular: "herd", Namespaced: true, Schema: map[string]any{
	"type": "object",
	"properties": map[string]any{
		"spec": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"replicas": map[string]any{"type": "integer", "minimum": 0},
				"selector": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"matchLabels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
					},
				},
			},
		},
		"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
	},
}}

// Widget is a namespaced kind with no controller.
var Widget = Def{Kind: "Widget", Plural: "widgets", Singular: "widget", Namespaced: true, Schema: openSchema()}

// Gizmo is a cluster-scoped kind with no controller.
var Gizmo = Def{Kind: "Gizmo", Plural: "gizmos", Singular: "gizmo", Schema: openSchema()}

// All lists cascade's kinds.
var All = []Def{Herd, Widget, Gizmo}

// Object returns the CRD as an unstructured object.
func (d Def) Object() *unstructured.Unstructured {
	scope := "Cluster"
	if d.Namespaced {
		scope = "Namespaced"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": d.Name()},
		"spec": map[string]any{
			"group": Group,
			"scope": scope,
			"names": map[string]any{"kind": d.Kind, "listKind": d.Kind + "List", "plural": d.Plural, "singular": d.Singular},
			"versions": []any{map[string]any{
				"name": Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": d.Schema},
			}},
		},
	}}
}

// Install creates the CRDs that do not exist yet and waits until each is
// Established and its resource is in discovery.
func Install(ctx context.Context, cfg *rest.Config, defs ...Def) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for _, d := range defs {
		_, err := dyn.Resource(CRDResource).Create(ctx, d.Object(), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("crds: create %s: %w", d.Name(), err)
		}
	}
	for _, d := range defs {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := dyn.Resource(CRDResource).Get(ctx, d.Name(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if !established(c) {
				return false, nil
			}
			rl, err := dc.ServerResourcesForGroupVersion(Group + "/" + Version)
			if err != nil {
				return false, nil
			}
			for _, r := range rl.APIResources {
				if r.Name == d.Plural {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("crds: %s not served: %w", d.Name(), err)
		}
	}
	return nil
}

func established(c *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == "Established" && strings.EqualFold(fmt.Sprint(m["status"]), "True") {
			return true
		}
	}
	return false
}
