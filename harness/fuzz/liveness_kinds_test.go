package fuzz

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cascade-k8s/cascade/model"
)

// The liveness check sees every model kind. It once listed from KindID 1,
// and KindID 0 is Pod: every Pod of a run was left out of the state it
// judged, so a Secret owned by a live Pod read as garbage ("secret/…/a is
// garbage (every owner is absent) but was never collected", `cascade fuzz
// --seed 3` on upstream and impl alike), and a foreground owner held by a
// Pod with a user finalizer read as stuck.

const testPrefix = "cascade-t1"

func fakeObject(k model.KindID, ns, name, uid string) *unstructured.Unstructured {
	info := k.Info()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(info.APIVersion)
	u.SetKind(info.Kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	return u
}

// fakeCluster is a fake dynamic client holding objs that lists every
// model kind.
func fakeCluster(t *testing.T, objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{}
	for k := range model.KindID(model.NumKinds) {
		info := k.Info()
		gv, err := schema.ParseGroupVersion(info.APIVersion)
		if err != nil {
			t.Fatal(err)
		}
		listKinds[gv.WithResource(info.Resource)] = info.Kind + "List"
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
}

// TestListRunEveryKind seeds one object of every kind the check reads and
// wants each listed.
func TestListRunEveryKind(t *testing.T) {
	ns := testPrefix + "-default"
	var objs []runtime.Object
	want := map[string]bool{}
	for k := range model.KindID(model.NumKinds) {
		info := k.Info()
		var o *unstructured.Unstructured
		switch {
		case info.Short == "ns":
			o = fakeObject(k, "", ns, "uid-ns")
		case info.Short == "crd":
			continue // below, one per custom kind
		case info.Namespaced:
			o = fakeObject(k, ns, "a", "uid-"+info.Short)
		default:
			o = fakeObject(k, "", testPrefix+"-a", "uid-"+info.Short)
		}
		objs = append(objs, o)
		want[info.Short] = true
	}
	crd, _ := model.KindByShort("crd")
	for name := range crdKinds() {
		objs = append(objs, fakeObject(crd, "", name, "uid-"+name))
		want["crd"] = true
	}
	got, err := listRun(context.Background(), fakeCluster(t, objs...), testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range got {
		seen[o.kind.Info().Short] = true
	}
	for short := range want {
		if !seen[short] {
			t.Errorf("listRun left out every %s", short)
		}
	}
}

func realObj(t *testing.T, short, name, uid string, mutate func(*unstructured.Unstructured)) realObject {
	t.Helper()
	k, ok := model.KindByShort(short)
	if !ok {
		t.Fatalf("no kind %s", short)
	}
	ns := testPrefix + "-default"
	if !k.Info().Namespaced {
		ns = ""
	}
	u := fakeObject(k, ns, name, uid)
	if mutate != nil {
		mutate(u)
	}
	return realObject{kind: k, u: *u}
}

func ownedBy(kind, name, uid string, block bool) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		refs := u.GetOwnerReferences()
		ctrl := true
		refs = append(refs, metav1.OwnerReference{APIVersion: "v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: &ctrl, BlockOwnerDeletion: &block})
		u.SetOwnerReferences(refs)
	}
}

// TestLivenessPodOwner is the fuzz failure's final state: secret/a owned
// by a live pod/b is not garbage; with the pod gone it is.
func TestLivenessPodOwner(t *testing.T) {
	pod := realObj(t, "pod", "b", "uid-pod-b", nil)
	secret := realObj(t, "secret", "a", "uid-secret-a", ownedBy("Pod", "b", "uid-pod-b", true))
	if v, _ := checkLiveness([]realObject{pod, secret}, nil, model.Release{}); v != nil {
		t.Errorf("secret/a owned by live pod/b: %v", v)
	}
	v, _ := checkLiveness([]realObject{secret}, nil, model.Release{})
	if v == nil || v.Property != model.PropGarbageCollected || !strings.Contains(v.Message, "secret/"+testPrefix+"-default/a") {
		t.Errorf("secret/a whose pod/b is gone: want garbage is collected violated, got %v", v)
	}
}

// TestLivenessForegroundHeldByPod: a foreground owner whose blocking
// dependent is a terminating Pod held by a user finalizer waits
// legitimately.
func TestLivenessForegroundHeldByPod(t *testing.T) {
	now := metav1.Now()
	owner := realObj(t, "cm", "o", "uid-cm-o", func(u *unstructured.Unstructured) {
		u.SetFinalizers([]string{model.FinalizerForeground})
		u.SetDeletionTimestamp(&now)
	})
	pod := realObj(t, "pod", "p", "uid-pod-p", func(u *unstructured.Unstructured) {
		ownedBy("ConfigMap", "o", "uid-cm-o", true)(u)
		u.SetFinalizers([]string{"cascade.dev/hold"})
		u.SetDeletionTimestamp(&now)
	})
	if v, _ := checkLiveness([]realObject{owner, pod}, nil, model.Release{}); v != nil {
		t.Errorf("cm/o held by pod/p's finalizer: %v", v)
	}
	if v, _ := checkLiveness([]realObject{owner}, nil, model.Release{}); v == nil || v.Property != model.PropNoStuckFinalizer {
		t.Errorf("cm/o with no dependent left: want no GC finalizer is stuck violated, got %v", v)
	}
}

// TestLivenessForegroundHeldByTerminatingNamespace is the state a fuzz
// run on impl ended in (`--restart-apiserver 3s --seed 2`, and replayed
// without a restart): ns/a waits in the foreground for ns/c, which blocks
// it and is Terminating. A Namespace's "kubernetes" finalizer is in
// spec.finalizers, which metadata.finalizers does not show; the namespace
// lifecycle, not the GC, holds ns/c (and in cascade's control planes,
// which run no namespace controller, for ever), so ns/a waits
// legitimately, as the model, which keeps that finalizer with the others,
// says. Without spec.finalizers nothing would hold ns/c.
func TestLivenessForegroundHeldByTerminatingNamespace(t *testing.T) {
	now := metav1.Now()
	owner := realObj(t, "ns", "a", "uid-ns-a", func(u *unstructured.Unstructured) {
		u.SetFinalizers([]string{model.FinalizerForeground})
		u.SetDeletionTimestamp(&now)
	})
	terminating := func(specFinalizers ...any) realObject {
		return realObj(t, "ns", "c", "uid-ns-c", func(u *unstructured.Unstructured) {
			ownedBy("Namespace", "a", "uid-ns-a", true)(u)
			u.SetDeletionTimestamp(&now)
			if len(specFinalizers) > 0 {
				if err := unstructured.SetNestedSlice(u.Object, specFinalizers, "spec", "finalizers"); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if v, _ := checkLiveness([]realObject{owner, terminating(model.FinalizerNamespace)}, nil, model.Release{}); v != nil {
		t.Errorf("ns/a held by Terminating ns/c: %v", v)
	}
	if v, _ := checkLiveness([]realObject{owner, terminating()}, nil, model.Release{}); v == nil || v.Property != model.PropNoStuckFinalizer {
		t.Errorf("ns/c without spec.finalizers holds nothing: want no GC finalizer is stuck violated, got %v", v)
	}
}

// TestLivenessCascadingHeldByEvent is the quiet state of `cascade fuzz
// --target impl --checks 200 --seed 20261126`, run 87: impl's adopter
// made rc/ns2/c the controller of pod/ns2/a, a client labelled the Pod
// policy.kruise.io/delete-protection=Cascading, rc/ns2/c was deleted,
// and event/c in another namespace names the Pod's UID as its owner.
// The Pod is garbage, but the webhook denies the GC's every DELETE of
// it ("Cascading and 2 active dependents"), since the Event is an active
// dependent, as the model's ActiveDependents counts it. The liveness
// check left Events out of the state it judged, so it reported the Pod
// as uncollected garbage. Without the Event nothing protects the Pod.
func TestLivenessCascadingHeldByEvent(t *testing.T) {
	nsKind, _ := model.KindByShort("ns")
	podKind, _ := model.KindByShort("pod")
	eventKind, _ := model.KindByShort("event")
	ns2, other := testPrefix+"-ns2", testPrefix+"-default"
	pod := fakeObject(podKind, ns2, "a", "uid-pod-a")
	pod.SetLabels(map[string]string{"app": "web", model.ProtectionLabel: model.ProtectCascading})
	ownedBy("ReplicationController", "c", "uid-rc-c-gone", true)(pod)
	event := fakeObject(eventKind, other, "c", "uid-event-c")
	ownedBy("Pod", "a", "uid-pod-a", false)(event)
	namespaces := []runtime.Object{fakeObject(nsKind, "", ns2, "uid-ns2"), fakeObject(nsKind, "", other, "uid-default")}

	judge := func(objs ...runtime.Object) *model.Violation {
		t.Helper()
		got, err := listRun(context.Background(), fakeCluster(t, append(slices.Clone(namespaces), objs...)...), testPrefix)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := checkLiveness(got, nil, model.Release{})
		return v
	}
	if v := judge(pod, event); v != nil {
		t.Errorf("pod/a kept by Cascading protection for event/c: %v", v)
	}
	if v := judge(pod); v == nil || v.Property != model.PropGarbageCollected || !strings.Contains(v.Message, "pod/"+ns2+"/a") {
		t.Errorf("pod/a with no dependent: want garbage is collected violated, got %v", v)
	}
}
