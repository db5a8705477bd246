package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/impl/step"
)

// Opt sets a field of an object Obj builds.
type Opt func(*unstructured.Unstructured)

// Obj builds an object of a kind named by its trace spelling (pod, cm,
// rc, deploy, rs, sts, pv, widget, gizmo, herd, ...), with the least spec
// the API server accepts. Workloads get replicas 0 unless Replicas says
// otherwise; Pods are never scheduled, so a delete removes them at once.
func Obj(short, ns, name string, opts ...Opt) *unstructured.Unstructured {
	k, ok := step.KindByShort(short)
	if !ok {
		panic("testenv: unknown kind " + short)
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(schema.GroupVersion{Group: k.Group, Version: k.Version}.String())
	u.SetKind(k.Kind)
	u.SetName(name)
	if k.Namespaced {
		u.SetNamespace(ns)
	}
	podSpec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.k8s.io/pause:3.10"}}}
	template := map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}}, "spec": podSpec}
	switch short {
	case "pod":
		u.Object["spec"] = podSpec
	case "rc":
		u.Object["spec"] = map[string]any{"replicas": int64(0), "selector": map[string]any{"app": name}, "template": template}
	case "deploy", "rs", "sts":
		spec := map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": name}}, "template": template}
		if short == "sts" {
			spec["serviceName"] = name
		}
		u.Object["spec"] = spec
	case "pv":
		u.Object["spec"] = map[string]any{"capacity": map[string]any{"storage": "1Gi"}, "accessModes": []any{"ReadWriteOnce"},
			"hostPath": map[string]any{"path": "/tmp/" + name}}
	case "herd":
		u.Object["spec"] = map[string]any{"replicas": int64(0)}
	}
	for _, o := range opts {
		o(u)
	}
	return u
}

// GVR returns an object's resource.
func GVR(u *unstructured.Unstructured) schema.GroupVersionResource {
	k, ok := step.KindByName(u.GetKind())
	if !ok {
		panic("testenv: unknown kind " + u.GetKind())
	}
	return k.GVR()
}

// Owner adds an ownerReference to o (which must have been created).
func Owner(o *unstructured.Unstructured, controller, block bool) Opt {
	return OwnerRef(o.GetAPIVersion(), o.GetKind(), o.GetName(), o.GetUID(), controller, block)
}

// OwnerRef adds an ownerReference with explicit coordinates; a false
// controller or block leaves the field unset.
func OwnerRef(apiVersion, kind, name string, uid types.UID, controller, block bool) Opt {
	return func(u *unstructured.Unstructured) {
		r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
		if controller {
			r.Controller = ptr.To(true)
		}
		if block {
			r.BlockOwnerDeletion = ptr.To(true)
		}
		u.SetOwnerReferences(append(u.GetOwnerReferences(), r))
	}
}

// Finalizers sets finalizers.
func Finalizers(f ...string) Opt { return func(u *unstructured.Unstructured) { u.SetFinalizers(f) } }

// Labels sets labels from key, value pairs.
func Labels(kv ...string) Opt {
	return func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		u.SetLabels(l)
	}
}

// Replicas sets spec.replicas.
func Replicas(n int) Opt {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(n), "spec", "replicas")
	}
}

// Selector sets a Herd's spec.selector.matchLabels.
func Selector(k, v string) Opt {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{k: v}, "spec", "selector", "matchLabels")
	}
}

// Create creates u and returns the stored object.
func (e *Env) Create(t testing.TB, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := e.Dyn.Resource(GVR(u)).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return got
}

// Delete deletes u with a propagation policy ("" for none).
func (e *Env) Delete(u *unstructured.Unstructured, policy string) error {
	opts := metav1.DeleteOptions{}
	if policy != "" {
		opts.PropagationPolicy = ptr.To(metav1.DeletionPropagation(policy))
	}
	return e.Dyn.Resource(GVR(u)).Namespace(u.GetNamespace()).Delete(context.Background(), u.GetName(), opts)
}

// MustDelete is Delete failing the test on error.
func (e *Env) MustDelete(t testing.TB, u *unstructured.Unstructured, policy string) {
	t.Helper()
	if err := e.Delete(u, policy); err != nil {
		t.Fatalf("delete %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// Fetch reads u's current state; the incarnation must be u's.
func (e *Env) Fetch(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got, err := e.Dyn.Resource(GVR(u)).Namespace(u.GetNamespace()).Get(context.Background(), u.GetName(), metav1.GetOptions{})
	if err == nil && u.GetUID() != "" && got.GetUID() != u.GetUID() {
		return nil, apierrors.NewNotFound(GVR(u).GroupResource(), u.GetName())
	}
	return got, err
}

// State renders an object's current state as a trace line does, after
// its key: "gone", or "live"/"deleting" with owners=[...] (short/name
// with controller and block flags) and finalizers=[...].
func (e *Env) State(u *unstructured.Unstructured) string {
	got, err := e.Fetch(u)
	if apierrors.IsNotFound(err) {
		return "gone"
	}
	if err != nil {
		return "error: " + err.Error()
	}
	s := "live"
	if got.GetDeletionTimestamp() != nil {
		s = "deleting"
	}
	if refs := got.GetOwnerReferences(); len(refs) > 0 {
		var rs []string
		for _, r := range refs {
			k := r.Kind
			if kk, ok := step.KindByName(r.Kind); ok {
				k = kk.Short
			}
			x := k + "/" + r.Name
			if ptr.Deref(r.Controller, false) {
				x += " controller"
			}
			if ptr.Deref(r.BlockOwnerDeletion, false) {
				x += " block"
			}
			rs = append(rs, x)
		}
		s += " owners=[" + strings.Join(rs, ", ") + "]"
	}
	if f := got.GetFinalizers(); len(f) > 0 {
		s += " finalizers=[" + strings.Join(f, " ") + "]"
	}
	return s
}

// FinalizersSuffix renders u's current finalizers as State appends them
// (" finalizers=[...]", or "" for none): for finalizers an admission
// plugin may add depending on the API server's flags, such as
// kubernetes.io/pv-protection.
func (e *Env) FinalizersSuffix(u *unstructured.Unstructured) string {
	got, err := e.Fetch(u)
	if err != nil || len(got.GetFinalizers()) == 0 {
		return ""
	}
	return " finalizers=[" + strings.Join(got.GetFinalizers(), " ") + "]"
}

// Want maps objects to their expected State.
type Want map[*unstructured.Unstructured]string

func (e *Env) diff(want Want) []string {
	var bad []string
	for u, w := range want {
		if got := e.State(u); got != w {
			bad = append(bad, fmt.Sprintf("%s/%s: got %q, want %q", u.GetKind(), u.GetName(), got, w))
		}
	}
	sort.Strings(bad)
	return bad
}

// Eventually polls until every object is in its expected state, failing
// the test after Timeout.
func (e *Env) Eventually(t testing.TB, want Want) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		bad := e.diff(want)
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s:\n  %s", Timeout, strings.Join(bad, "\n  "))
		}
		time.Sleep(Poll)
	}
}

// Consistently checks that every object stays in its expected state for d.
func (e *Env) Consistently(t testing.TB, d time.Duration, want Want) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if bad := e.diff(want); len(bad) > 0 {
			t.Fatalf("state changed:\n  %s", strings.Join(bad, "\n  "))
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(Poll)
	}
}

// WaitFor polls cond until it returns nil, failing the test after Timeout.
func WaitFor(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, Timeout, err)
		}
		time.Sleep(Poll)
	}
}
