package history_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/lin"
)

// TestUpstreamRechecksAreAudited: kube-controller-manager's ReplicaSet,
// ReplicationController and Deployment controllers recheck an owner with
// an uncached GET before adopting (RecheckDeletionTimestamp in the
// canAdoptFunc of claimPods and getReplicaSetsForDeployment), and the
// audit log records that GET, by the controller's own client, with the
// object it answered. harness/lin relies on it (Options.ReadsRecorded):
// every adoption here must have its recheck in the reads, returned before
// the adoption was sent and within the race window.
func TestUpstreamRechecksAreAudited(t *testing.T) {
	controlPlane(t)
	ctx, cs := context.Background(), clientFor(t, driver)
	s, ns := newScope(t, cs)
	pod := func(name, app string) {
		t.Helper()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c"}}}}
	}
	// Pods first, then the workloads that adopt them, as a trace for
	// upstream does; replica counts equal the pods, so nothing is created.
	pod("rs-1", "rs")
	pod("rs-2", "rs")
	pod("rc-1", "rc")
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Labels: map[string]string{"app": "dep"}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: sel("rs"), Template: template("rs")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ReplicationControllers(ns).Create(ctx, &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1), Selector: map[string]string{"app": "rc"}, Template: ptr.To(template("rc"))}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A paused Deployment adopts the ReplicaSet its selector matches.
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "dep"},
		Spec: appsv1.DeploymentSpec{Paused: true, Replicas: ptr.To[int32](2), Selector: sel("dep"), Template: template("dep")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controlled := func(get func() (metav1.Object, error)) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			o, err := get()
			return err == nil && metav1.GetControllerOf(o) != nil, nil
		}
	}
	waits := map[string]func(context.Context) (bool, error){
		"pod rs-1": controlled(func() (metav1.Object, error) { return cs.CoreV1().Pods(ns).Get(ctx, "rs-1", metav1.GetOptions{}) }),
		"pod rs-2": controlled(func() (metav1.Object, error) { return cs.CoreV1().Pods(ns).Get(ctx, "rs-2", metav1.GetOptions{}) }),
		"pod rc-1": controlled(func() (metav1.Object, error) { return cs.CoreV1().Pods(ns).Get(ctx, "rc-1", metav1.GetOptions{}) }),
		"rs rs":    controlled(func() (metav1.Object, error) { return cs.AppsV1().ReplicaSets(ns).Get(ctx, "rs", metav1.GetOptions{}) }),
	}
	for what, f := range waits {
		if err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, f); err != nil {
			t.Fatalf("%s was never adopted", what)
		}
	}
	time.Sleep(time.Second) // the audit log is written before the answer; this only lets stragglers land

	recs, err := cp.AuditRecords()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := history.FromAudit(recs, s)
	if err != nil {
		t.Fatal(err)
	}
	reads, err := history.ReadsFromAudit(recs, s)
	if err != nil {
		t.Fatal(err)
	}
	adoptions := map[string]int{}
	for _, op := range ops {
		// an adoption is a patch sending a controller reference
		// (AdoptPod, AdoptReplicaSet); status updates send the whole
		// object, references included
		if !op.OK() || op.Verb != history.Patch || op.Subresource != "" || op.Sent == nil {
			continue
		}
		ref := metav1.GetControllerOf(refsMeta(op.Sent))
		if ref == nil || !strings.HasPrefix(op.Actor, "controller/") {
			continue
		}
		adoptions[op.Actor]++
		found := false
		for _, r := range reads {
			if r.Actor == op.Actor && r.Name == ref.Name && r.Kind.Info().Kind == ref.Kind && r.Code == 200 && r.Got != nil &&
				r.Got.UID == string(ref.UID) && !r.Got.Deleting && r.Return < op.Call && r.Return >= op.Call-int64(lin.DefaultRaceWindow) {
				found = true
				t.Logf("%s adopted %s/%s %s after its GET of %s %s returned", op.Actor, op.Kind.Info().Short, op.Name,
					time.Duration(op.Call-r.Return), ref.Kind, ref.Name)
				break
			}
		}
		if !found {
			t.Errorf("%s's adoption of %s/%s to %s %s has no recheck GET in the audit log; its reads: %v", op.Actor, op.Kind.Info().Short, op.Name, ref.Kind, ref.Name, reads)
		}
	}
	for _, actor := range []string{"controller/replicaset-controller", "controller/replication-controller", "controller/deployment-controller"} {
		if adoptions[actor] == 0 {
			t.Errorf("no adoption by %s in the history (adoptions: %v)", actor, adoptions)
		}
	}
	r := lin.Check(ops, lin.Options{Reads: reads, ReadsRecorded: true})
	if r.Verdict != "Ok" || len(r.Known) > 0 {
		t.Fatalf("%s", r.Summary)
	}
}

// refsMeta carries an object's ownerReferences as metav1 for
// GetControllerOf.
func refsMeta(o *history.Object) metav1.Object {
	m := &metav1.ObjectMeta{}
	for _, r := range o.Owners {
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name,
			UID: types.UID(r.UID), Controller: ptr.To(r.Controller), BlockOwnerDeletion: ptr.To(r.Block)})
	}
	return m
}
