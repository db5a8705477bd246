package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/proxy"
)

const timeout = 60 * time.Second // reaching it is a failure, not a verdict on speed

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("proxy-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano()%1e6)
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	name = strings.TrimLeft(name, "-")
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// collected creates an owner ConfigMap with n dependents in ns, deletes
// the owner in the background and waits until kube-controller-manager's
// garbage collector has deleted every dependent.
func collected(t *testing.T, ns string, n int) (owner *corev1.ConfigMap, deps []*corev1.ConfigMap) {
	t.Helper()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		d, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("dep-%d", i),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deps = append(deps, d)
	}
	bg := metav1.DeletePropagationBackground
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for _, d := range deps {
		for {
			_, err := cms.Get(ctx, d.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the garbage collector did not delete %s/%s within %s through the proxy (err %v)", ns, d.Name, timeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return owner, deps
}

// gcDeletes are the garbage collector's DELETE requests in ev of
// ConfigMaps in ns, by name.
func gcDeletes(ev proxy.Evidence, ns string) map[string]proxy.Request {
	out := map[string]proxy.Request{}
	for _, r := range ev.Requests {
		if r.Client == proxy.GarbageCollectorClient && r.Verb == proxy.VerbDelete && r.Resource == "configmaps" && r.Namespace == ns {
			out[r.Name] = r
		}
	}
	return out
}

// delivered is the first delivery in ev of an event of type typ of
// object uid handed to informer, and whether there is one.
func delivered(ev proxy.Evidence, informer, typ, uid string) (proxy.Delivery, bool) {
	for _, d := range ev.Deliveries {
		if d.Informer == informer && d.Type == typ && d.UID == uid && !d.Delivered.IsZero() {
			return d, true
		}
	}
	return proxy.Delivery{}, false
}

// gcConfigMaps is the informer the garbage collector watches ConfigMaps
// with: the controller manager's shared typed informer.
const gcConfigMaps = proxy.SharedInformersClient + "/configmaps"

// kube-controller-manager's garbage collector collects through the
// proxy, and the evidence shows why and when: the owner's deletion
// handed to the GC's ConfigMap informer before the GC's DELETE of the
// dependent was received, the DELETE answered 200 naming the
// dependent's uid, and the dependent's DELETED event, with the deletion's
// resourceVersion, handed to the informer after.
func TestGarbageCollectorCollectsThroughProxy(t *testing.T) {
	needControlPlane(t)
	sw.set(nil)
	px.Take()
	ns := namespace(t)
	owner, deps := collected(t, ns, 1)
	dep := deps[0]
	var ev proxy.Evidence
	var del proxy.Request
	var depGone proxy.Delivery
	// the dependent's DELETED event may still be on its way to the informer
	for deadline := time.Now().Add(10 * time.Second); ; {
		ev = px.Evidence()
		var ok1, ok2 bool
		del, ok1 = gcDeletes(ev, ns)[dep.Name]
		depGone, ok2 = delivered(ev, gcConfigMaps, "DELETED", string(dep.UID))
		if ok1 && ok2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the evidence lacks the GC's DELETE of %s (%v) or its DELETED event handed to %s (%v)", dep.Name, ok1, gcConfigMaps, ok2)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if del.Code != 200 || del.UID != string(dep.UID) {
		t.Errorf("GC DELETE of %s: code %d, uid %q; want 200, uid %s", dep.Name, del.Code, del.UID, dep.UID)
	}
	if !strings.HasSuffix(del.UserAgent, "/"+proxy.GarbageCollectorClient) {
		t.Errorf("GC DELETE passed on with user agent %q, not the GC's", del.UserAgent)
	}
	ownerGone, ok := delivered(ev, gcConfigMaps, "DELETED", string(owner.UID))
	if !ok {
		t.Fatalf("no DELETED event of the owner %s handed to %s", owner.UID, gcConfigMaps)
	}
	if !ownerGone.Delivered.Before(del.Received) {
		t.Errorf("the owner's deletion was handed to the GC's informer at %s, not before the GC's DELETE of the dependent (%s)",
			ownerGone.Delivered.Format(time.StampMicro), del.Received.Format(time.StampMicro))
	}
	if !depGone.Delivered.After(del.Received) || depGone.ResourceVersion == "" {
		t.Errorf("the dependent's DELETED event (rv %q) was handed on at %s, not after the GC's DELETE (%s)",
			depGone.ResourceVersion, depGone.Delivered.Format(time.StampMicro), del.Received.Format(time.StampMicro))
	}
}

// A watch of the controller manager's is a stream, not a buffered
// answer: while it stays open, events are handed on one by one, each
// before the stream's end is recorded.
func TestWatchesAreStreamed(t *testing.T) {
	needControlPlane(t)
	sw.set(nil)
	px.Take()
	ns := namespace(t)
	collected(t, ns, 1)
	ev := px.Evidence()
	open := map[int64]bool{}
	for _, d := range ev.Deliveries {
		if d.Informer == gcConfigMaps && d.Namespace == ns && !d.Delivered.IsZero() {
			open[d.Stream] = true
		}
	}
	if len(open) == 0 {
		t.Fatalf("no event of namespace %s was handed to %s", ns, gcConfigMaps)
	}
	for _, r := range ev.Requests {
		if open[r.ID] {
			t.Errorf("watch %d (%s) holding this test's events has ended (%s): the test's events came on a stream that should still be open", r.ID, r.Informer(r.Client), r.Err)
		}
	}
}

// The evidence's file form holds one JSON line per request, per
// delivery and per graph builder line, merged by time.
func TestEvidenceFile(t *testing.T) {
	needControlPlane(t)
	ev := px.Evidence()
	ev.GraphBuilder = []history.Processed{{UID: "u", Seq: 1, At: time.Now().UnixNano()}}
	path := t.TempDir() + "/evidence.jsonl"
	if err := ev.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := readLines(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(ev.Requests) + len(ev.Deliveries) + 1; len(data) != want || want == 1 {
		t.Fatalf("%d lines, want %d (one per request, delivery and graph builder line, and some)", len(data), want)
	}
	if !slices.ContainsFunc(data, func(l string) bool { return strings.HasPrefix(l, `{"graph_builder":`) }) {
		t.Errorf("no graph builder line in %s", path)
	}
	if !slices.ContainsFunc(data, func(l string) bool { return strings.HasPrefix(l, `{"delivery":`) }) {
		t.Errorf("no delivery line in %s", path)
	}
}
