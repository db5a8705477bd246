package controlplane_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// These smoke tests check the upstream garbage collector of
// kube-controller-manager v1.36.3 on the three propagation policies and on
// a Deployment cascade, each asserting the exact observable states of
// upstream's design (pkg/controller/garbagecollector; see
// shared/reference/upstream-semantics.md §1 and §3).

func TestBackgroundPropagation(t *testing.T) {
	g, ctx, ns := NewWithT(t), context.Background(), newNamespace(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	owner := createConfigMap(t, ns, "owner", nil)
	dep := createConfigMap(t, ns, "dependent", nil, ownerRef(owner, false))

	g.Expect(cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})).To(Succeed())
	// Background: the API server removes the owner at once; no finalizer is added.
	_, err := cms.Get(ctx, owner.Name, metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "owner must be gone as soon as DELETE returns, got %v", err)

	// The GC then sees the owner absent and deletes the dependent.
	eventuallyGone(g, func() error { _, err := cms.Get(ctx, dep.Name, metav1.GetOptions{}); return err })

	del := gcRequest(g, "delete", "configmaps", ns, dep.Name)
	g.Expect(del.Code).To(Equal(200))
	g.Expect(deleteOptions(g, del)).To(And(
		HaveField("PropagationPolicy", HaveValue(Equal(metav1.DeletePropagationBackground))),
		HaveField("Preconditions.UID", HaveValue(Equal(dep.UID))),
		// Since v1.34 (kubernetes PR #132632) the GC also pins the
		// resourceVersion it classified the dependent at.
		HaveField("Preconditions.ResourceVersion", HaveValue(Not(BeEmpty()))),
	))
}

func TestForegroundPropagation(t *testing.T) {
	g, ctx, ns := NewWithT(t), context.Background(), newNamespace(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	owner := createConfigMap(t, ns, "owner", nil)
	dep := createConfigMap(t, ns, "dependent", []string{holdFinalizer}, ownerRef(owner, true))

	// The DELETE response is the owner as stored: deletion started, and the
	// API server added the foregroundDeletion finalizer.
	got := deleteReturning(g, ns, owner.Name, metav1.DeletePropagationForeground)
	g.Expect(got.DeletionTimestamp).NotTo(BeNil())
	g.Expect(got.Finalizers).To(Equal([]string{metav1.FinalizerDeleteDependents}))

	// The GC deletes the blocking dependent (Background: it has no
	// dependents of its own), which stays because of the hold finalizer.
	g.Eventually(func(g Gomega) {
		d, err := cms.Get(ctx, dep.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.DeletionTimestamp).NotTo(BeNil())
		g.Expect(d.Finalizers).To(Equal([]string{holdFinalizer}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// While the blocking dependent exists, the owner waits, unchanged.
	g.Consistently(func(g Gomega) {
		o, err := cms.Get(ctx, owner.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.UID).To(Equal(owner.UID))
		g.Expect(o.DeletionTimestamp).NotTo(BeNil())
		g.Expect(o.Finalizers).To(Equal([]string{metav1.FinalizerDeleteDependents}))
		_, err = cms.Get(ctx, dep.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	// Releasing the dependent lets the API server remove it; the GC then
	// removes foregroundDeletion from the owner, which goes too.
	removeFinalizers(g, ns, dep.Name)
	eventuallyGone(g, func() error { _, err := cms.Get(ctx, dep.Name, metav1.GetOptions{}); return err })
	eventuallyGone(g, func() error { _, err := cms.Get(ctx, owner.Name, metav1.GetOptions{}); return err })

	del := gcRequest(g, "delete", "configmaps", ns, dep.Name)
	g.Expect(del.Code).To(Equal(200))
	g.Expect(deleteOptions(g, del)).To(HaveField("PropagationPolicy", HaveValue(Equal(metav1.DeletePropagationBackground))))
	patch := gcRequest(g, "patch", "configmaps", ns, owner.Name)
	g.Expect(patch.Code).To(Equal(200))
	g.Expect(objectMeta(g, patch.ResponseObject).Finalizers).To(BeEmpty())
}

func TestOrphanPropagation(t *testing.T) {
	g, ctx, ns := NewWithT(t), context.Background(), newNamespace(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	// The hold finalizer keeps the owner after the GC has done its part, so
	// that the orphan finalizer's removal can be observed.
	owner := createConfigMap(t, ns, "owner", []string{holdFinalizer})
	dep := createConfigMap(t, ns, "dependent", nil, ownerRef(owner, true))

	got := deleteReturning(g, ns, owner.Name, metav1.DeletePropagationOrphan)
	g.Expect(got.DeletionTimestamp).NotTo(BeNil())
	g.Expect(got.Finalizers).To(Equal([]string{holdFinalizer, metav1.FinalizerOrphanDependents}))

	// The GC strips the owner's reference from the dependent, then removes
	// the orphan finalizer from the owner.
	g.Eventually(func(g Gomega) {
		o, err := cms.Get(ctx, owner.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.DeletionTimestamp).NotTo(BeNil())
		g.Expect(o.Finalizers).To(Equal([]string{holdFinalizer}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	d, err := cms.Get(ctx, dep.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.UID).To(Equal(dep.UID))
	g.Expect(d.OwnerReferences).To(BeEmpty())
	g.Expect(d.DeletionTimestamp).To(BeNil())

	removeFinalizers(g, ns, owner.Name)
	eventuallyGone(g, func() error { _, err := cms.Get(ctx, owner.Name, metav1.GetOptions{}); return err })
	// The orphaned dependent lives on.
	g.Consistently(func(g Gomega) {
		d, err := cms.Get(ctx, dep.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.DeletionTimestamp).To(BeNil())
		g.Expect(d.OwnerReferences).To(BeEmpty())
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	unref := gcRequest(g, "patch", "configmaps", ns, dep.Name)
	g.Expect(unref.Code).To(Equal(200))
	g.Expect(objectMeta(g, unref.ResponseObject).OwnerReferences).To(BeEmpty())
	unfin := gcRequest(g, "patch", "configmaps", ns, owner.Name)
	g.Expect(unfin.Code).To(Equal(200))
	g.Expect(objectMeta(g, unfin.ResponseObject).Finalizers).To(Equal([]string{holdFinalizer}))
	g.Expect(unref.StageTimestamp).NotTo(BeTemporally(">", unfin.RequestReceived),
		"the GC orphans dependents before it removes the orphan finalizer")
}

func TestDeploymentCascade(t *testing.T) {
	g, ctx, ns := NewWithT(t), context.Background(), newNamespace(t)
	labels := map[string]string{"app": "web"}
	deploy, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// Never pulled: no scheduler or kubelet runs, pods stay Pending.
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}}},
			},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	// The deployment controller creates one ReplicaSet it controls; the
	// replicaset controller creates two Pods it controls.
	var rs appsv1.ReplicaSet
	g.Eventually(func(g Gomega) {
		list, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Items).To(HaveLen(1))
		rs = list.Items[0]
		g.Expect(metav1.GetControllerOf(&rs)).To(HaveValue(HaveField("UID", deploy.UID)))
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			g.Expect(metav1.GetControllerOf(&p)).To(HaveValue(HaveField("UID", rs.UID)))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	g.Expect(cs.AppsV1().Deployments(ns).Delete(ctx, deploy.Name,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})).To(Succeed())
	_, err = cs.AppsV1().Deployments(ns).Get(ctx, deploy.Name, metav1.GetOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "deployment must be gone as soon as DELETE returns, got %v", err)

	g.Eventually(func(g Gomega) {
		rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rss.Items).To(BeEmpty())
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	g.Expect(gcRequest(g, "delete", "replicasets", ns, rs.Name).Code).To(Equal(200))
	// Each pod can be deleted successfully only once, and only the GC deletes them.
	g.Eventually(func(g Gomega) {
		n := 0
		for _, r := range auditRecords(g) {
			if r.IsGarbageCollector() && r.Verb == "delete" && r.Resource == "pods" && r.Namespace == ns && r.Code == 200 {
				n++
			}
		}
		g.Expect(n).To(Equal(2), "GC deletes of pods")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// createConfigMap creates a ConfigMap as the driver.
func createConfigMap(t *testing.T, ns, name string, finalizers []string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Finalizers: finalizers, OwnerReferences: owners,
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return cm
}

func ownerRef(owner *corev1.ConfigMap, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: ptr.To(block)}
}

// deleteReturning deletes a ConfigMap and returns the object in the
// response: the object as stored when finalizers keep it.
func deleteReturning(g Gomega, ns, name string, policy metav1.DeletionPropagation) *corev1.ConfigMap {
	var got corev1.ConfigMap
	err := cs.CoreV1().RESTClient().Delete().Namespace(ns).Resource("configmaps").Name(name).
		Body(&metav1.DeleteOptions{PropagationPolicy: &policy}).Do(context.Background()).Into(&got)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return &got
}

// removeFinalizers clears a ConfigMap's finalizers with a JSON merge patch.
func removeFinalizers(g Gomega, ns, name string) {
	_, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
}

func eventuallyGone(g Gomega, get func() error) {
	g.EventuallyWithOffset(1, func() bool { return apierrors.IsNotFound(get()) }).
		WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "object still present")
}

func auditRecords(g Gomega) []controlplane.AuditRecord {
	recs, err := cp.AuditRecords()
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return recs
}

// gcRequest waits for a successful request of the garbage collector with
// this verb on this object and returns the first one. (Failed attempts,
// say a conflict the GC retries, may come before it.)
func gcRequest(g Gomega, verb, resource, ns, name string) controlplane.AuditRecord {
	var found controlplane.AuditRecord
	g.EventuallyWithOffset(1, func() bool {
		for _, r := range auditRecords(g) {
			if r.IsGarbageCollector() && r.Stage == controlplane.StageResponseComplete && r.Code/100 == 2 &&
				r.Verb == verb && r.Resource == resource && r.Namespace == ns && r.Name == name {
				found = r
				return true
			}
		}
		return false
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "garbage-collector %s of %s %s/%s in the audit log", verb, resource, ns, name)
	return found
}

func deleteOptions(g Gomega, r controlplane.AuditRecord) metav1.DeleteOptions {
	var opts metav1.DeleteOptions
	g.ExpectWithOffset(1, json.Unmarshal(r.RequestObject, &opts)).To(Succeed(), "request body of %s", r)
	return opts
}

func objectMeta(g Gomega, raw json.RawMessage) metav1.ObjectMeta {
	var obj metav1.PartialObjectMetadata
	g.ExpectWithOffset(1, json.Unmarshal(raw, &obj)).To(Succeed(), "object %s", raw)
	return obj.ObjectMeta
}
