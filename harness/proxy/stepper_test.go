package proxy_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-k8s/cascade/harness/proxy"
)

// withStepper puts a holding Stepper, scoped to namespace ns, on the
// shared proxy for one test.
func withStepper(t *testing.T, ns string) *proxy.Stepper {
	t.Helper()
	s := proxy.NewStepper()
	s.SetScope(func(namespace, _ string) bool { return namespace == ns })
	s.Hold(true)
	sw.set(s)
	t.Cleanup(func() {
		s.Hold(false)
		sw.set(nil)
	})
	return s
}

// The stepped upstream target's mechanism on the real binary: while the
// Stepper holds, kube-controller-manager's GC sees a namespace's events
// only when they are released, each informer's in order, and its GET and
// its DELETE reach kube-apiserver only when they are released; nothing is
// collected before the DELETE is.
func TestStepperHoldsTheGCUntilReleased(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	st := withStepper(t, ns)
	cms := cs.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// the head of the configmaps informer is the owner's ADDED event:
	// releasing the dependent's first is a divergence
	var div *proxy.Divergence
	if err := st.ReleaseEvent(ctx, timeout, "", "configmaps", ns, "dep"); !errors.As(err, &div) {
		t.Fatalf("releasing dep's event ahead of owner's: got %v, want a *proxy.Divergence", err)
	}
	for _, name := range []string{"owner", "dep", "owner"} { // ADDED, ADDED, DELETED
		if err := st.ReleaseEvent(ctx, timeout, "", "configmaps", ns, name); err != nil {
			t.Fatalf("release the event of %s: %v", name, err)
		}
	}

	isGet := func(name string) func(proxy.Request) bool {
		return func(r proxy.Request) bool { return r.Verb == proxy.VerbGet && r.Namespace == ns && r.Name == name }
	}
	get, ok, err := st.WaitRequest(ctx, timeout, isGet("dep"))
	if err != nil || !ok {
		t.Fatalf("the GC worker's GET of dep was not held (%v): held %v", err, st.HeldRequests())
	}
	if _, err := st.Release(ctx, timeout, get.ID); err != nil {
		t.Fatal(err)
	}
	del, ok, err := st.WaitRequest(ctx, timeout, func(r proxy.Request) bool { return r.Verb == proxy.VerbDelete && r.Namespace == ns && r.Name == "dep" })
	if err != nil || !ok {
		t.Fatalf("the GC's DELETE of dep was not held (%v): held %v", err, st.HeldRequests())
	}
	if _, err := cms.Get(ctx, "dep", metav1.GetOptions{}); err != nil {
		t.Fatalf("dep is gone while the GC's DELETE is held: %v", err)
	}
	if a, err := st.Release(ctx, timeout, del.ID); err != nil || a.Code/100 != 2 {
		t.Fatalf("the GC's DELETE of dep: answer %d, %v", a.Code, err)
	}
	if _, err := cms.Get(ctx, "dep", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dep after the GC's DELETE was answered: %v, want NotFound", err)
	}
}
