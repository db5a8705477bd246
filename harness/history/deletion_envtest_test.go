package history_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/lin"
)

var pvResource = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}

// holdWebhook is a validating admission webhook on the DELETE and UPDATE
// (patches included) of PersistentVolumes and Pods labelled
// blockLabel=<its value>: it allows every request, but the first request
// of an operation on a name passed to hold waits in the webhook until
// released. A DELETE's admission runs inside etcd3's conditionalDelete,
// after the registry decided how to delete and before the storage
// transaction, so a held DELETE is a request parked between the two; a
// held UPDATE is a write that has not landed yet.
type holdWebhook struct {
	mu      sync.Mutex
	calls   map[string]int           // reviews per "OPERATION name"
	held    map[string]chan struct{} // closed on release
	arrived map[string]chan struct{} // closed when the held request arrives
}

const blockLabel = "cascade.dev/test-hold"

func (h *holdWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	key := string(review.Request.Operation) + " " + review.Request.Name
	h.mu.Lock()
	h.calls[key]++
	first := h.calls[key] == 1
	held, arrived := h.held[key], h.arrived[key]
	h.mu.Unlock()
	if first && held != nil {
		close(arrived)
		select {
		case <-held:
		case <-time.After(timeout):
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// hold parks the first request of operation (DELETE, UPDATE) on name in
// the webhook; the returned channel closes when it arrives there, and
// release lets it go on.
func (h *holdWebhook) hold(operation, name string) (arrived <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := operation + " " + name
	h.held[key], h.arrived[key] = make(chan struct{}), make(chan struct{})
	var once sync.Once
	ch := h.held[key]
	return h.arrived[key], func() { once.Do(func() { close(ch) }) }
}

// reviews counts the requests of operation on name the webhook saw.
func (h *holdWebhook) reviews(operation, name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[operation+" "+name]
}

// awaitHeld waits for a held request to arrive.
func awaitHeld(t *testing.T, arrived <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(timeout):
		t.Fatalf("%s never reached the webhook", what)
	}
}

// installHoldWebhook serves a holdWebhook over TLS on the loopback and
// registers it for objects labelled blockLabel=value, waiting until the
// API server calls it.
func installHoldWebhook(t *testing.T, admin *rest.Config, dyn dynamic.Interface, value string) *holdWebhook {
	t.Helper()
	h := &holdWebhook{calls: map[string]int{}, held: map[string]chan struct{}{}, arrived: map[string]chan struct{}{}}
	srv := httptest.NewTLSServer(h) // its certificate is valid for 127.0.0.1
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cs := clientFor(t, admin)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-" + value},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "hold.cascade.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/validate"), CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"persistentvolumes", "pods"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{blockLabel: value}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](int32(timeout / time.Second)),
		}},
	}
	ctx := context.Background()
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
		srv.Close()
	})
	// The API server picks the configuration up asynchronously: delete
	// labelled probes (out of every scope) until one reaches the webhook.
	i := 0
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		i++
		name := fmt.Sprintf("probe-%s-%d", value, i)
		if _, err := dyn.Resource(pvResource).Create(ctx, pvObject(name, map[string]string{blockLabel: value}), metav1.CreateOptions{}); err != nil {
			return false, err
		}
		if err := dyn.Resource(pvResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return false, err
		}
		return h.reviews("DELETE", name) > 0, nil
	})
	if err != nil {
		t.Fatalf("the hold webhook was never called: %v", err)
	}
	return h
}

// pvObject is a PersistentVolume as the driver creates one.
func pvObject(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume",
		"spec": map[string]any{
			"capacity":                      map[string]any{"storage": "1Mi"},
			"accessModes":                   []any{"ReadWriteOnce"},
			"hostPath":                      map[string]any{"path": "/cascade/" + name},
			"persistentVolumeReclaimPolicy": "Retain",
		},
	}}
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// finalizerPatch is the driver's add-finalizer and remove-finalizer: a
// JSON merge patch of the finalizers carrying the resourceVersion read.
func finalizerPatch(t *testing.T, rv string, fins []string) []byte {
	t.Helper()
	if fins == nil {
		fins = []string{}
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv, "finalizers": fins}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPVDeleteAndFinalizerRaces drives the requests of a fuzz run (create
// a PersistentVolume, add a finalizer with a read-then-patch, delete it)
// in every order, as two driver clients with a dynamic client, and pins
// what kube-apiserver answers and what FromAudit makes of it:
//
//   - add-finalizer, then delete: the DELETE answers 200 and the object
//     with deletionTimestamp and the finalizer (the PV registry returns
//     objects, ReturnDeletedObject); removing the finalizer removes it;
//   - delete, then a patch at the resourceVersion read before: the DELETE
//     answers 200 and the removed object, without deletionTimestamp; the
//     patch 404;
//   - delete and add-finalizer concurrently, the patch landing while the
//     DELETE is in its admission webhook (kubernetes#77988, whose fix
//     #129768 was reverted by #133979): the generic store decided on the
//     object it read first, without finalizers, to delete it at once;
//     etcd3's conditionalDelete retries its transaction on the version the
//     patch wrote and removes the object although it now has a finalizer.
//     The DELETE answers 200 and that version, the finalizer on it, without
//     deletionTimestamp.
//
// The sequential histories check Ok; the racing one checks Ok only
// through the known race kubernetes#77988, and the same history with
// the patch moved after the DELETE in real time is Illegal.
func TestPVDeleteAndFinalizerRaces(t *testing.T) {
	controlPlane(t)
	ctx, cs := context.Background(), clientFor(t, driver)
	s, _ := newScope(t, cs)
	clients := make([]dynamic.ResourceInterface, 2)
	for i := range clients {
		cfg := rest.CopyConfig(driver)
		cfg.UserAgent = history.DriverUserAgentPrefix + fmt.Sprint(i)
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = dyn.Resource(pvResource)
	}
	c0, c1 := clients[0], clients[1]
	adminDyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	wh := installHoldWebhook(t, cp.Config, adminDyn, s.Prefix)
	labels := map[string]string{"app": "web", blockLabel: s.Prefix}
	name := func(n string) string { return s.Prefix + "-" + n }
	create := func(n string) *unstructured.Unstructured {
		t.Helper()
		u, err := c1.Create(ctx, pvObject(name(n), labels), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	addFinalizer := func(c dynamic.ResourceInterface, n string) *unstructured.Unstructured {
		t.Helper()
		cur, err := c.Get(ctx, name(n), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u, err := c.Patch(ctx, name(n), types.MergePatchType,
			finalizerPatch(t, cur.GetResourceVersion(), append(cur.GetFinalizers(), holdFinalizer)), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	gone := func(n string) {
		t.Helper()
		if _, err := c0.Get(ctx, name(n), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("pv %s: want it gone, got %v", name(n), err)
		}
	}

	// add-finalizer, then delete, then remove the finalizer
	create("seq")
	addFinalizer(c0, "seq")
	if err := c1.Delete(ctx, name("seq"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := c0.Get(ctx, name("seq"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c0.Patch(ctx, name("seq"), types.MergePatchType, finalizerPatch(t, cur.GetResourceVersion(), nil), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	gone("seq")

	// delete, then a patch with the resourceVersion read before it
	create("late")
	read, err := c0.Get(ctx, name("late"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Delete(ctx, name("late"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c0.Patch(ctx, name("late"), types.MergePatchType, finalizerPatch(t, read.GetResourceVersion(), []string{holdFinalizer}),
		metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("patch after the delete: want NotFound, got %v", err)
	}

	// the DELETE parked in its webhook while the finalizer is added
	created := create("race")
	arrived, release := wh.hold("DELETE", name("race"))
	defer release()
	delErr := make(chan error, 1)
	go func() { delErr <- c1.Delete(ctx, name("race"), metav1.DeleteOptions{}) }()
	awaitHeld(t, arrived, "the DELETE")
	patched := addFinalizer(c0, "race")
	release()
	if err := <-delErr; err != nil {
		t.Fatalf("the racing DELETE: %v", err)
	}
	if n := wh.reviews("DELETE", name("race")); n != 2 {
		t.Errorf("want the DELETE reviewed twice (once more on the version the patch wrote), got %d", n)
	}
	gone("race") // removed, finalizer and all

	ops := auditHistory(t, s)
	pvOps := func(n string) []history.Op {
		var out []history.Op
		for _, op := range ops {
			if op.Kind.Info().Short == "pv" && op.Name == name(n) {
				out = append(out, op)
			}
		}
		return out
	}
	describe := func(ops []history.Op) string {
		var b strings.Builder
		for _, op := range ops {
			fmt.Fprintf(&b, "\n  %s [%d, %d] got %+v", op.String(), op.Call, op.Return, op.Got)
		}
		return b.String()
	}
	verbs := func(ops []history.Op) []history.Verb {
		var out []history.Verb
		for _, op := range ops {
			out = append(out, op.Verb)
		}
		return out
	}

	seq := pvOps("seq")
	if !slices.Equal(verbs(seq), []history.Verb{history.Create, history.Patch, history.Delete, history.Patch}) {
		t.Fatalf("pv seq: want create, patch, delete, patch; got%s", describe(seq))
	}
	if d := seq[2]; d.Code != 200 || d.Removed || d.Got == nil || !d.Got.Deleting || !slices.Equal(d.Got.Finalizers, []string{holdFinalizer}) ||
		d.Got.RV <= seq[1].Got.RV {
		t.Errorf("delete of a PV with a finalizer: want 200 and the object being deleted with the finalizer at a new rv; got%s", describe(seq))
	}
	if p := seq[3]; p.Code != 200 || !p.Removed {
		t.Errorf("the finalizer removal: want 200, removed; got%s", describe(seq))
	}

	late := pvOps("late")
	if !slices.Equal(verbs(late), []history.Verb{history.Create, history.Delete, history.Patch}) {
		t.Fatalf("pv late: want create, delete, patch; got%s", describe(late))
	}
	if d := late[1]; d.Code != 200 || !d.Removed || d.Got == nil || d.Got.Deleting || d.Got.UID != string(read.GetUID()) {
		t.Errorf("immediate delete of a PV: want 200 and the object as stored, removed; got%s", describe(late))
	}
	if p := late[2]; p.Code != 404 {
		t.Errorf("patch after the delete: want 404; got%s", describe(late))
	}

	race := pvOps("race") // in the order the answers completed
	slices.SortStableFunc(race, func(a, b history.Op) int { return int(a.Call - b.Call) })
	if !slices.Equal(verbs(race), []history.Verb{history.Create, history.Delete, history.Patch}) {
		t.Fatalf("pv race: want create, delete, patch by Call; got%s", describe(race))
	}
	d, p := race[1], race[2]
	patchedRV := parseRV(t, patched.GetResourceVersion())
	if p.Code != 200 || p.Removed || p.Got.RV != patchedRV || !slices.Equal(p.Got.Finalizers, []string{holdFinalizer}) ||
		p.Call < d.Call || p.Return > d.Return {
		t.Errorf("the racing patch: want 200 at rv %d with the finalizer, inside the DELETE's interval; got%s", patchedRV, describe(race))
	}
	if d.Code != 200 || !d.Removed || d.Got == nil || d.Got.Deleting || d.Got.UID != string(created.GetUID()) ||
		!slices.Equal(d.Got.Finalizers, []string{holdFinalizer}) {
		t.Errorf("the racing DELETE: want 200 and the version the patch wrote, finalizer on, no deletionTimestamp, removed; got%s", describe(race))
	}

	for _, part := range [][]history.Op{seq, late} {
		history.AssignLanes(part)
		if r := lin.Check(part, lin.Options{}); r.Verdict != "Ok" || len(r.Known) > 0 {
			t.Errorf("%s%s", r.Summary, describe(part))
		}
	}
	history.AssignLanes(race)
	r := lin.Check(race, lin.Options{})
	if r.Verdict != "Ok" || len(r.Known) != 1 || r.Known[0].Issue != "kubernetes#77988" || r.Known[0].Op != 1 {
		t.Errorf("want the race Ok through kubernetes#77988 at op 1, got %s: %+v%s", r.Summary, r.Known, describe(race))
	}
	// The patch moved after the DELETE in real time: the object was gone.
	bad := slices.Clone(race)
	bad[2].Call, bad[2].Return = d.Return+int64(time.Millisecond), d.Return+2*int64(time.Millisecond)
	if r := lin.Check(bad, lin.Options{}); r.Verdict != "Illegal" {
		t.Errorf("want a patch answered 200 after the DELETE removed the object illegal, got %s", r.Summary)
	}
	if t.Failed() {
		t.Logf("history:%s", describe(ops))
	}
}

// TestRemovalAnswers pins two answers of a removal the request that
// answers it did not make in full:
//
//   - a DELETE whose options drop the only finalizer of an object being
//     deleted, a GC finalizer (Background on an object orphaning): the
//     generic registry computes no finalizers left and deletes the object
//     without writing the change (store.go's errDeleteNow), so kinds that
//     answer the deleted object (PersistentVolumes, Pods) answer it as
//     last stored, with deletionTimestamp and the orphan finalizer,
//     although it is gone. FromAudit must read that answer as a removal.
//     The garbage collector's orphaning of a dependent, which would
//     otherwise remove the finalizer first, is held in a webhook
//     meanwhile;
//   - two patches emptying the finalizers of an object being deleted:
//     the one held in the webhook (inside its update, on the object as
//     the watch cache had it) finds the object gone when it goes on, and
//     answers 404. Had it read the object from etcd and passed that
//     check before the other removed it, it would answer 200 and the
//     removal (deleteWithoutFinalizers ignores NotFound), as fuzz runs
//     saw; no webhook reaches that window, so harness/lin's
//     TestRemovedMeanwhile pins the checker's side of it.
//
// Both histories check Ok.
func TestRemovalAnswers(t *testing.T) {
	controlPlane(t)
	ctx, cs := context.Background(), clientFor(t, driver)
	s, ns := newScope(t, cs)
	adminDyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	wh := installHoldWebhook(t, cp.Config, adminDyn, s.Prefix)
	dyn, err := dynamic.NewForConfig(driver)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{blockLabel: s.Prefix}
	pod := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.invalid/c"}}}}}
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	cases := []struct {
		kind   string
		client dynamic.ResourceInterface
		object func(name string) *unstructured.Unstructured
	}{
		{"pv", dyn.Resource(pvResource), func(name string) *unstructured.Unstructured { return pvObject(name, labels) }},
		{"pod", dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(ns), pod},
	}
	for _, c := range cases {
		ownName, depName := s.Prefix+"-"+c.kind+"-owner", s.Prefix+"-"+c.kind+"-dep"
		own, err := c.client.Create(ctx, c.object(ownName), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep := c.object(depName)
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: own.GetKind(), Name: ownName, UID: own.GetUID()}})
		if _, err := c.client.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		arrived, release := wh.hold("UPDATE", depName)
		if err := c.client.Delete(ctx, ownName, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
			release()
			t.Fatal(err)
		}
		awaitHeld(t, arrived, "the garbage collector's orphaning patch of "+depName)
		err = c.client.Delete(ctx, ownName, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.Get(ctx, ownName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: want it gone, got %v", ownName, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
			d, err := c.client.Get(ctx, depName, metav1.GetOptions{})
			return err == nil && len(d.GetOwnerReferences()) == 0, nil
		}); err != nil {
			t.Fatalf("%s was never orphaned", depName)
		}
	}

	// two finalizer removals, the first held in the webhook after it read
	// the object
	pvs := dyn.Resource(pvResource)
	twice := s.Prefix + "-twice"
	u := pvObject(twice, labels)
	u.SetFinalizers([]string{holdFinalizer})
	if _, err := pvs.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pvs.Delete(ctx, twice, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	read, err := pvs.Get(ctx, twice, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := wh.hold("UPDATE", twice)
	defer release()
	patch := finalizerPatch(t, read.GetResourceVersion(), nil)
	firstErr := make(chan error, 1)
	go func() {
		_, err := pvs.Patch(ctx, twice, types.MergePatchType, patch, metav1.PatchOptions{})
		firstErr <- err
	}()
	awaitHeld(t, arrived, "the first finalizer removal")
	if _, err := pvs.Patch(ctx, twice, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the second finalizer removal: %v", err)
	}
	release()
	if err := <-firstErr; !apierrors.IsNotFound(err) {
		t.Fatalf("the first finalizer removal, which found the object gone: want NotFound, got %v", err)
	}
	if _, err := pvs.Get(ctx, twice, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s: want it gone, got %v", twice, err)
	}
	time.Sleep(500 * time.Millisecond) // the GC's last finalizer removal, which finds the owners gone

	ops := auditHistory(t, s)
	for _, c := range cases {
		var dels []history.Op
		for _, op := range ops {
			if op.Actor == "client-0" && op.Verb == history.Delete && op.Name == s.Prefix+"-"+c.kind+"-owner" {
				dels = append(dels, op)
			}
		}
		if len(dels) != 2 {
			t.Fatalf("%s: want two deletes of the owner, got %+v", c.kind, dels)
		}
		orphan, bg := dels[0], dels[1]
		if orphan.Code != 200 || orphan.Removed || !orphan.Got.Deleting || !slices.Equal(orphan.Got.Finalizers, []string{"orphan"}) {
			t.Errorf("%s: the Orphan delete: want 200, kept with the orphan finalizer; got %+v got %+v", c.kind, orphan, orphan.Got)
		}
		if bg.Code != 200 || !bg.Removed || bg.Got == nil || !bg.Got.Deleting || !slices.Equal(bg.Got.Finalizers, []string{"orphan"}) ||
			bg.Got.RV <= orphan.Got.RV {
			t.Errorf("%s: the Background delete: want 200 and the object as stored, orphan finalizer on, at a newer rv, removed; got %+v got %+v",
				c.kind, bg, bg.Got)
		}
	}
	var removals []history.Op
	for _, op := range ops {
		if op.Verb == history.Patch && op.Name == twice {
			removals = append(removals, op)
		}
	}
	slices.SortFunc(removals, func(a, b history.Op) int { return int(a.Call - b.Call) })
	if len(removals) != 2 || removals[0].Code != 404 || !removals[1].Removed || removals[1].Code != 200 {
		t.Errorf("want the held finalizer removal 404, the other 200 and the removal; got %+v", removals)
	}
	expectLinearizable(t, ops)
}
