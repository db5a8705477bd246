package history_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/lin"
)

func createCM(t *testing.T, cs kubernetes.Interface, ns, name string, fins []string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Finalizers: fins, OwnerReferences: refs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return cm
}

func refTo(o *corev1.ConfigMap, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID, BlockOwnerDeletion: ptr.To(block)}
}

func waitGone(t *testing.T, cs kubernetes.Interface, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		err := wait.PollUntilContextTimeout(context.Background(), poll, timeout, true, func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("configmap %s/%s still there after %s", ns, n, timeout)
		}
	}
}

func auditHistory(t *testing.T, s history.Scope) []history.Op {
	t.Helper()
	recs, err := cp.AuditRecords()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := history.FromAudit(recs, s)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// find returns the ops of actor with this verb on the ConfigMap name, in
// record order.
func find(ops []history.Op, actor string, verb history.Verb, name string) []history.Op {
	var out []history.Op
	for _, op := range ops {
		if op.Actor == actor && op.Verb == verb && op.Name == name && op.Kind.Info().Short == "cm" {
			out = append(out, op)
		}
	}
	return out
}

func expectLinearizable(t *testing.T, ops []history.Op) {
	t.Helper()
	r := lin.Check(ops, lin.Options{})
	if r.Verdict != "Ok" || len(r.Known) > 0 {
		for _, op := range ops {
			t.Logf("%s [%d, %d] got %+v", op.String(), op.Call, op.Return, op.Got)
		}
		t.Fatalf("%s", r.Summary)
	}
}

// TestDeleteResponses pins what kube-apiserver v1.36 answers to the
// writes whose effect FromAudit must tell apart (see history's outcome):
// a DELETE that removes the object at once answers 200 and a Status with
// its UID; one that only sets deletionTimestamp answers 200 (202 for
// orphanDependents=false) and the object, at a new resourceVersion, or at
// the same one when it changes nothing; an update or patch that removes
// the last finalizer of an object being deleted answers 200 and the
// object without finalizers at the resourceVersion it had.
func TestDeleteResponses(t *testing.T) {
	controlPlane(t)
	ctx, cs := context.Background(), clientFor(t, driver)
	s, ns := newScope(t, cs)
	cms := cs.CoreV1().ConfigMaps(ns)
	a := createCM(t, cs, ns, "a", nil)
	b := createCM(t, cs, ns, "b", []string{holdFinalizer})
	c := createCM(t, cs, ns, "c", []string{holdFinalizer})
	d := createCM(t, cs, ns, "d", []string{holdFinalizer})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cms.Delete(ctx, "a", metav1.DeleteOptions{}))
	must(cms.Delete(ctx, "b", metav1.DeleteOptions{}))
	must(cms.Delete(ctx, "b", metav1.DeleteOptions{}))
	must(cms.Delete(ctx, "c", metav1.DeleteOptions{OrphanDependents: ptr.To(false)}))
	must(cms.Delete(ctx, "d", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	_, err := cms.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	must(err)
	for range 2 { // the second changes nothing
		_, err = cms.Patch(ctx, "c", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		must(err)
	}
	live, err := cms.Get(ctx, "d", metav1.GetOptions{})
	must(err)
	live.Finalizers = nil
	_, err = cms.Update(ctx, live, metav1.UpdateOptions{})
	must(err)
	// Pods answer a DELETE with the object even when it left storage.
	pods := cs.CoreV1().Pods(ns)
	pod := func(name string, fins []string) *corev1.Pod {
		p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: fins},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}}, metav1.CreateOptions{})
		must(err)
		return p
	}
	pod("p", nil)
	pod("q", []string{holdFinalizer})
	must(pods.Delete(ctx, "p", metav1.DeleteOptions{}))
	must(pods.Delete(ctx, "q", metav1.DeleteOptions{}))
	_, err = pods.Patch(ctx, "q", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	must(err)

	ops := auditHistory(t, s)
	del := func(name string) []history.Op { return find(ops, "client-0", history.Delete, name) }
	if dl := del("a"); len(dl) != 1 || dl[0].Code != 200 || !dl[0].Removed || dl[0].Got.UID != string(a.UID) {
		t.Errorf("immediate delete: want 200, removed, uid %s; got %+v", a.UID, dl)
	}
	bs := del("b")
	if len(bs) != 2 {
		t.Fatalf("want two deletes of b, got %d", len(bs))
	}
	first, again := bs[0], bs[1]
	if first.Code != 200 || first.Removed || !first.Got.Deleting || first.Got.RV <= parseRV(t, b.ResourceVersion) ||
		!slices.Equal(first.Got.Finalizers, []string{holdFinalizer}) {
		t.Errorf("delete that sets deletionTimestamp: %+v got %+v", first, first.Got)
	}
	if again.Code != 200 || again.Removed || again.Got.RV != first.Got.RV {
		t.Errorf("repeated delete: want 200 at rv %d, got %+v got %+v", first.Got.RV, again, again.Got)
	}
	cs0 := del("c")
	if len(cs0) != 1 || cs0[0].Code != 202 || cs0[0].Removed || !cs0[0].Got.Deleting || cs0[0].Got.UID != string(c.UID) {
		t.Errorf("orphanDependents=false delete: want 202 and the object, got %+v", cs0)
	}
	pb := find(ops, "client-0", history.Patch, "b")
	if len(pb) != 1 || pb[0].Code != 200 || !pb[0].Removed || pb[0].Got.RV != first.Got.RV || len(pb[0].Got.Finalizers) != 0 {
		t.Errorf("finalizer-removing patch: want 200, removed, rv %d; got %+v", first.Got.RV, pb)
	}
	pc := find(ops, "client-0", history.Patch, "c")
	if len(pc) != 2 || pc[0].Removed || pc[0].Got.RV <= cs0[0].Got.RV || pc[1].Got.RV != pc[0].Got.RV {
		t.Errorf("patches of a deleting object: want a new rv, then the same; got %+v", pc)
	}
	ud := find(ops, "client-0", history.Update, "d")
	if len(ud) != 1 || ud[0].Code != 200 || !ud[0].Removed || ud[0].Got.UID != string(d.UID) {
		t.Errorf("finalizer-removing update: want 200 and removed, got %+v", ud)
	}
	podOp := func(verb history.Verb, name string) []history.Op {
		var out []history.Op
		for _, op := range ops {
			if op.Verb == verb && op.Name == name && op.Kind.Info().Short == "pod" {
				out = append(out, op)
			}
		}
		return out
	}
	if dp := podOp(history.Delete, "p"); len(dp) != 1 || dp[0].Code != 200 || !dp[0].Removed || dp[0].Got == nil || !dp[0].Got.Deleting {
		t.Errorf("pod delete: want 200 and the object, removed; got %+v", dp)
	}
	if dq := podOp(history.Delete, "q"); len(dq) != 1 || dq[0].Removed || !slices.Equal(dq[0].Got.Finalizers, []string{holdFinalizer}) {
		t.Errorf("delete of a pod with a finalizer: want it kept; got %+v", dq)
	}
	if pq := podOp(history.Patch, "q"); len(pq) != 1 || !pq[0].Removed {
		t.Errorf("finalizer-removing patch of a pod: want it removed; got %+v", pq)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod p: want it gone, got %v", err)
	}
	expectLinearizable(t, ops)
}

func parseRV(t *testing.T, rv string) uint64 {
	t.Helper()
	var n uint64
	for _, c := range rv {
		if c < '0' || c > '9' {
			t.Fatalf("resourceVersion %q", rv)
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// TestAuditHistoryWithUpstreamGC drives a background and a foreground
// cascade against kube-controller-manager's GC and checks the audited
// history: the GC's writes are there, under actor gc, and the whole is
// linearizable with every GC write legal.
func TestAuditHistoryWithUpstreamGC(t *testing.T) {
	controlPlane(t)
	ctx, cs := context.Background(), clientFor(t, driver)
	s, ns := newScope(t, cs)
	cms := cs.CoreV1().ConfigMaps(ns)
	owner := createCM(t, cs, ns, "owner", nil)
	dep := createCM(t, cs, ns, "dep", nil, refTo(owner, false))
	fgOwner := createCM(t, cs, ns, "fg-owner", nil)
	createCM(t, cs, ns, "fg-dep", nil, refTo(fgOwner, true))
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "fg-owner", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cs, ns, "dep", "fg-dep", "fg-owner")

	ops := auditHistory(t, s)
	if n := find(ops, "gc", history.Delete, "dep"); len(n) == 0 || !n[len(n)-1].Removed || n[len(n)-1].Got.UID != string(dep.UID) {
		t.Errorf("want the GC's delete of dep, which removed it; got %+v", n)
	}
	if n := find(ops, "gc", history.Delete, "fg-dep"); len(n) == 0 || !n[len(n)-1].Removed {
		t.Errorf("want the GC's delete of fg-dep; got %+v", n)
	}
	if n := find(ops, "gc", history.Patch, "fg-owner"); len(n) == 0 || !n[len(n)-1].Removed {
		t.Errorf("want the GC's patch removing foregroundDeletion from fg-owner, which removed it; got %+v", n)
	}
	nsOps := 0
	for _, op := range ops {
		if op.Kind.Info().Short == "ns" && op.Name == ns && op.Verb == history.Create && op.OK() {
			nsOps++
		}
	}
	if nsOps != 1 {
		t.Errorf("want the namespace's create in the history, found %d", nsOps)
	}
	expectLinearizable(t, ops)

	// The same history with the GC's delete of dep moved before the
	// owner's deletion is a GC bug, and the checker says so.
	bad := slices.Clone(ops)
	var ownerDel int64
	for _, op := range bad {
		if op.Actor == "client-0" && op.Verb == history.Delete && op.Name == "owner" {
			ownerDel = op.Call
		}
	}
	for i := range bad {
		if op := &bad[i]; op.Actor == "gc" && op.Verb == history.Delete && op.Name == "dep" && op.OK() {
			op.Call, op.Return = ownerDel-2*int64(time.Millisecond), ownerDel-int64(time.Millisecond)
		}
	}
	if r := lin.Check(bad, lin.Options{}); r.Verdict != "Illegal" || !strings.Contains(r.Summary, "gc deleted cm/"+ns+"/dep") {
		t.Errorf("want the early GC delete illegal, got %s: %s", r.Verdict, r.Summary)
	}
}

// TestRecorderAndObserver records a background cascade client side and
// observes the rest: the GC's delete of the dependent shows up as the one
// Observed op, and the merged history is linearizable.
func TestRecorderAndObserver(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	plain := clientFor(t, driver)
	s := history.Scope{Prefix: "obs-" + time.Now().Format("150405")}
	ns := s.Prefix + "-default"
	obs, err := history.NewObserver(cp.Config, s)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := obs.Start(sctx); err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder(s)
	// The driver's clients are told apart by user agent; other clients
	// of the wrapped configuration are the actor Wrap names.
	wrapped := rec.Wrap(driver, "other/setup")
	cs := clientFor(t, wrapped)
	setup := rest.CopyConfig(wrapped)
	setup.UserAgent = "cascade-setup"
	if _, err := clientFor(t, setup).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := createCM(t, cs, ns, "owner", nil)
	dep := createCM(t, cs, ns, "dep", nil, refTo(owner, false))
	third := rest.CopyConfig(wrapped)
	third.UserAgent = history.DriverUserAgentPrefix + "3"
	if _, err := clientFor(t, third).CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}},
		metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("want AlreadyExists, got %v", err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, plain, ns, "dep")
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("want owner gone, got %v", err)
	}
	time.Sleep(200 * time.Millisecond) // let the DELETED event arrive
	if err := obs.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}

	recorded := rec.Ops()
	var verbs []string
	for _, op := range recorded {
		verbs = append(verbs, op.String())
	}
	want := []string{"other/setup create ns/" + ns + " -> 201", "client-0 create cm/" + ns + "/owner -> 201",
		"client-0 create cm/" + ns + "/dep -> 201", "client-3 create cm/" + ns + "/owner -> 409 AlreadyExists",
		"client-0 delete cm/" + ns + "/owner -> 200 (removed)"}
	if !slices.Equal(verbs, want) {
		t.Fatalf("recorded (reads must not be):\n%v\nwant\n%v", verbs, want)
	}
	observed := obs.Ops(recorded)
	if len(observed) != 1 {
		t.Fatalf("want one observed op (the GC's delete of dep), got %d: %+v", len(observed), observed)
	}
	o := observed[0]
	if o.Verb != history.Observed || o.Actor != history.ActorCluster || !o.Removed || o.Got.UID != string(dep.UID) ||
		o.Call < recorded[2].Call || o.Return < o.Call {
		t.Errorf("observed op: %+v (dep's create was called at %d)", o, recorded[2].Call)
	}
	expectLinearizable(t, history.Merge(recorded, observed))
}

// TestAuditHistoryWithControllers runs ReplicaSet cascades with all three
// policies against the upstream replicaset controller and GC: controller
// creates and status updates, the GC's metadata-only answers and its
// retried finalizer removals all land in the history, which must be
// linearizable with every write legal.
func TestAuditHistoryWithControllers(t *testing.T) {
	controlPlane(t)
	ctx, cs := context.Background(), clientFor(t, driver)
	s, ns := newScope(t, cs)
	rss, pods := cs.AppsV1().ReplicaSets(ns), cs.CoreV1().Pods(ns)
	policies := map[string]metav1.DeletionPropagation{
		"bg": metav1.DeletePropagationBackground, "fg": metav1.DeletePropagationForeground, "or": metav1.DeletePropagationOrphan}
	podsOf := func(name string) []corev1.Pod {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	for _, name := range []string{"bg", "fg", "or"} {
		labels := map[string]string{"app": name}
		_, err := rss.Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					// Never pulled: no scheduler or kubelet runs.
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(context.Context) (bool, error) {
			return len(podsOf(name)) == 3, nil
		}); err != nil {
			t.Fatalf("replicaset %s never had 3 pods", name)
		}
		if err := rss.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(policies[name])}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(context.Context) (bool, error) {
		list, err := rss.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0 && len(podsOf("bg")) == 0 && len(podsOf("fg")) == 0, nil
	}); err != nil {
		t.Fatal("the cascades did not finish")
	}
	orphans := podsOf("or")
	if len(orphans) != 3 {
		t.Fatalf("want the 3 orphaned pods, got %d", len(orphans))
	}
	for _, p := range orphans {
		if len(p.OwnerReferences) != 0 || p.DeletionTimestamp != nil {
			t.Errorf("orphaned pod %s: owners %v, deletionTimestamp %v", p.Name, p.OwnerReferences, p.DeletionTimestamp)
		}
	}

	ops := auditHistory(t, s)
	count := func(actor string, verb history.Verb, kind string, removed bool) int {
		n := 0
		for _, op := range ops {
			if op.Actor == actor && op.Verb == verb && op.Kind.Info().Short == kind && op.OK() && op.Removed == removed {
				n++
			}
		}
		return n
	}
	if n := count("controller/replicaset-controller", history.Create, "pod", false); n < 9 {
		t.Errorf("want the controller's 9 pod creates, got %d", n)
	}
	if n := count("gc", history.Delete, "pod", true); n != 6 {
		t.Errorf("want the GC's 6 pod deletes (background and foreground), got %d", n)
	}
	if n := count("gc", history.Patch, "pod", false); n < 3 {
		t.Errorf("want the GC's patches orphaning 3 pods, got %d", n)
	}
	if n := count("gc", history.Patch, "rs", true); n != 2 {
		t.Errorf("want the GC's 2 finalizer removals (foregroundDeletion, orphan) that removed the replicasets, got %d", n)
	}
	expectLinearizable(t, ops)
}
