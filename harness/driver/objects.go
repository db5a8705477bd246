package driver

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-k8s/cascade/model"
)

// RunLabel marks every object a driver creates with its run id; cleanup
// and dumps only ever look at objects carrying it.
const RunLabel = "cascade.dev/run"

// gvr maps a model kind to its resource.
func gvr(k model.KindID) schema.GroupVersionResource {
	info := k.Info()
	gv, _ := schema.ParseGroupVersion(info.APIVersion)
	return gv.WithResource(info.Resource)
}

// container is the one container of every pod template: nothing runs it
// (the harness has no kubelet and no scheduler).
func container() map[string]any {
	return map[string]any{"name": "c", "image": "registry.invalid/cascade/pause:none"}
}

func template(labels map[string]any) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": labels},
		"spec":     map[string]any{"containers": []any{container()}, "restartPolicy": "Always"},
	}
}

// selectorLabels is the adoption selector of a workload: the trace's
// selector=k=v, or one naming the object.
func selectorLabels(st model.Step) map[string]any {
	if st.Selector.Key != "" {
		return map[string]any{st.Selector.Key: st.Selector.Value}
	}
	return map[string]any{model.DefaultSelectorLabel: st.Target.Name}
}

// body builds a minimal valid object of a model kind. Specs are chosen so
// that real controllers do what the model's controller does and nothing
// more: workloads get their replica count explicitly (the API defaults to
// 1, the model to 0), Deployments are paused (a paused Deployment adopts
// matching ReplicaSets but creates none of its own), Jobs and CronJobs are
// suspended (no pods).
func body(st model.Step, realName, realNS string) (*unstructured.Unstructured, error) {
	k := st.Target.Kind
	info := k.Info()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": info.APIVersion, "kind": info.Kind}}
	u.SetName(realName)
	if info.Namespaced {
		u.SetNamespace(realNS)
	}
	replicas := int64(st.Replicas)
	sel := selectorLabels(st)
	var spec map[string]any
	switch info.Short {
	case "pod":
		spec = map[string]any{"containers": []any{container()}, "terminationGracePeriodSeconds": int64(0)}
	case "cm", "secret", "ns":
	case "rc":
		spec = map[string]any{"replicas": replicas, "selector": sel, "template": template(sel)}
	case "rs", "herd":
		spec = map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": sel}, "template": template(sel)}
	case "deploy":
		spec = map[string]any{"replicas": replicas, "paused": true, "selector": map[string]any{"matchLabels": sel}, "template": template(sel)}
	case "sts":
		spec = map[string]any{"replicas": replicas, "serviceName": realName, "selector": map[string]any{"matchLabels": sel}, "template": template(sel)}
	case "job":
		t := template(sel)
		t["spec"].(map[string]any)["restartPolicy"] = "Never"
		spec = map[string]any{"suspend": true, "template": t}
	case "cronjob":
		t := template(sel)
		t["spec"].(map[string]any)["restartPolicy"] = "Never"
		spec = map[string]any{"suspend": true, "schedule": "0 0 1 1 *", "jobTemplate": map[string]any{"spec": map[string]any{"template": t}}}
	case "event":
		u.Object["involvedObject"] = map[string]any{"kind": "ConfigMap", "namespace": realNS, "name": realName}
		u.Object["reason"] = "Cascade"
		u.Object["message"] = "an event object created by a cascade trace"
		u.Object["type"] = "Normal"
		u.Object["source"] = map[string]any{"component": "cascade"}
	case "pv":
		spec = map[string]any{
			"capacity":                      map[string]any{"storage": "1Mi"},
			"accessModes":                   []any{"ReadWriteOnce"},
			"hostPath":                      map[string]any{"path": "/cascade/" + realName},
			"persistentVolumeReclaimPolicy": "Retain",
		}
	case "crd":
		ck, ok := crdKind(st.Target.Name)
		if !ok {
			return nil, fmt.Errorf("crd/%s: the model serves CRDs for %s only", st.Target.Name, crdNames())
		}
		spec = crdSpec(ck)
	case "widget", "gizmo":
		spec = map[string]any{}
	default:
		return nil, fmt.Errorf("kind %s: no object template", info.Short)
	}
	if info.Short == "herd" {
		// cascade's own CRD keeps replicas and a plain selector
		spec = map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": sel}}
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u, nil
}

func crdKind(name string) (model.KindID, bool) {
	for i, k := range model.Kinds {
		if k.Custom && k.CRDName == name {
			return model.KindID(i), true
		}
	}
	return model.NoKind, false
}

func crdNames() []string {
	var out []string
	for _, k := range model.Kinds {
		if k.Custom {
			out = append(out, k.CRDName)
		}
	}
	return out
}

// crdSpec is a CustomResourceDefinition for one of the model's custom
// kinds, with an open schema.
func crdSpec(k model.KindID) map[string]any {
	info := k.Info()
	scope := "Cluster"
	if info.Namespaced {
		scope = "Namespaced"
	}
	gv, _ := schema.ParseGroupVersion(info.APIVersion)
	return map[string]any{
		"group": gv.Group,
		"scope": scope,
		"names": map[string]any{"plural": info.Resource, "singular": info.Short, "kind": info.Kind, "listKind": info.Kind + "List"},
		"versions": []any{map[string]any{
			"name": gv.Version, "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
		}},
	}
}
