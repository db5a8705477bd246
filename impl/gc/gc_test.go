package gc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/impl/crds"
	"github.com/cascade-k8s/cascade/impl/gc"
	. "github.com/cascade-k8s/cascade/impl/internal/testenv"
)

// The tests of this package share one control plane and one GC in Auto
// mode, upstream behaviour (no bug switched on), started in TestMain; each
// test works in its own namespace. No kube-controller-manager runs: every
// collection the tests see is impl's.

var (
	env       *Env
	collector *gc.GarbageCollector
	// firstChanges are the first two graph changes the GC reported
	// (TestRunReportsResetFirst)
	firstChanges struct {
		sync.Mutex
		c []gc.GraphChange
	}
)

// recordFirstChanges is the shared GC's OnGraphChange.
func recordFirstChanges(c gc.GraphChange) {
	firstChanges.Lock()
	defer firstChanges.Unlock()
	if len(firstChanges.c) < 2 {
		firstChanges.c = append(firstChanges.c, c)
	}
}

func TestMain(m *testing.M) {
	os.Exit(Main(m, func(e *Env) (func() error, error) {
		env = e
		var err error
		collector, err = gc.New(e.Admin, gc.Options{SyncPeriod: time.Second, OnGraphChange: recordFirstChanges})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- collector.Run(ctx) }()
		syncCtx, syncCancel := context.WithTimeout(ctx, 60*time.Second)
		defer syncCancel()
		if err := collector.WaitForSync(syncCtx); err != nil {
			cancel()
			<-done
			return nil, err
		}
		return func() error {
			cancel()
			select {
			case err := <-done:
				return err
			case <-time.After(30 * time.Second):
				return errors.New("gc.Run did not return within 30s of cancellation")
			}
		}, nil
	}))
}

// seen waits until the GC's graph has observed every object (not only as
// a virtual node), as upstream's integration tests wait for GraphHasUID
// before deleting owners: orphaning and foreground blocking are
// best-effort for dependents the graph has not seen.
func seen(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		WaitFor(t, "gc observes "+string(u.GetUID()), func() error {
			n, ok := collector.Node(u.GetUID())
			if !ok || n.Virtual {
				return fmt.Errorf("not observed (in graph: %v)", ok)
			}
			return nil
		})
	}
}

// quiet waits until the GC has had nothing to do for a while, so that a
// following Consistently checks a settled state.
func quiet(t *testing.T) {
	t.Helper()
	since := time.Now()
	WaitFor(t, "gc quiet", func() error {
		if !collector.Stats().Idle() {
			since = time.Now()
		}
		if time.Since(since) < time.Second {
			return fmt.Errorf("busy: %+v", collector.Stats())
		}
		return nil
	})
}

// TestRunReportsResetFirst: Run reports a Reset before any event, so
// that a harness recording graph changes across a restart
// (impl.Target.RestartGC) credits the new GC's empty graph with nothing
// its predecessor held; the events that follow name their objects.
func TestRunReportsResetFirst(t *testing.T) {
	WaitFor(t, "two graph changes", func() error {
		firstChanges.Lock()
		defer firstChanges.Unlock()
		if len(firstChanges.c) < 2 {
			return fmt.Errorf("%d reported", len(firstChanges.c))
		}
		return nil
	})
	firstChanges.Lock()
	defer firstChanges.Unlock()
	if c := firstChanges.c[0]; c != (gc.GraphChange{Reset: true}) {
		t.Errorf("first change: got %+v, want a Reset alone", c)
	}
	if c := firstChanges.c[1]; c.Reset || c.UID == "" {
		t.Errorf("second change: got %+v, want an object's event", c)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Each test follows one of the model's traces (traces/scenarios/NAME.trace)
// and asserts the end states the trace expects, in its words: "live",
// "deleting", "gone", owners=[...] and finalizers=[...].

// traces/scenarios/background.trace
func TestBackground(t *testing.T) {
	ns := env.Namespace(t)
	rc := env.Create(t, Obj("rc", ns, "web"))
	pod := env.Create(t, Obj("pod", ns, "web-1", Owner(rc, true, true)))
	seen(t, pod)
	env.Eventually(t, Want{rc: "live", pod: "live owners=[rc/web controller block]"})

	env.MustDelete(t, rc, "Background")
	env.Eventually(t, Want{rc: "gone", pod: "gone"})
}

// traces/scenarios/foreground-blocking.trace
func TestForegroundBlocking(t *testing.T) {
	ns := env.Namespace(t)
	owner := env.Create(t, Obj("cm", ns, "owner"))
	dep := env.Create(t, Obj("cm", ns, "dep", Finalizers(Hold), Owner(owner, false, true)))
	seen(t, owner, dep)

	env.MustDelete(t, owner, "Foreground")
	want := Want{
		dep:   "deleting owners=[cm/owner block] finalizers=[" + Hold + "]",
		owner: "deleting finalizers=[foregroundDeletion]",
	}
	env.Eventually(t, want)
	quiet(t)
	env.Consistently(t, 2*time.Second, want)

	removeFinalizers(t, dep)
	env.Eventually(t, Want{dep: "gone", owner: "gone"})
}

// traces/scenarios/foreground-nonblocking.trace, with the two ways of not
// blocking (TestNonBlockingOwnerRefDoesNotBlock): blockOwnerDeletion unset
// and false.
func TestForegroundNonBlocking(t *testing.T) {
	ns := env.Namespace(t)
	rc := env.Create(t, Obj("rc", ns, "owner"))
	unset := env.Create(t, Obj("pod", ns, "unset", Finalizers(Hold), Owner(rc, false, false)))
	f := Obj("pod", ns, "false", Finalizers(Hold), Owner(rc, false, false))
	refs := f.GetOwnerReferences()
	refs[0].BlockOwnerDeletion = ptr.To(false)
	f.SetOwnerReferences(refs)
	blockFalse := env.Create(t, f)
	seen(t, rc, unset, blockFalse)

	env.MustDelete(t, rc, "Foreground")
	env.Eventually(t, Want{
		rc:         "gone",
		unset:      "deleting owners=[rc/owner] finalizers=[" + Hold + "]",
		blockFalse: "deleting owners=[rc/owner] finalizers=[" + Hold + "]",
	})
	removeFinalizers(t, unset, blockFalse)
	env.Eventually(t, Want{unset: "gone", blockFalse: "gone"})
}

// traces/scenarios/mixed-owners.trace: a dependent with several owners
// survives while one is solid and loses the reference of the owner
// waiting in foreground (TestSolidOwnerDoesNotBlockWaitingOwner).
func TestForegroundMultipleOwners(t *testing.T) {
	ns := env.Namespace(t)
	a := env.Create(t, Obj("rc", ns, "a"))
	b := env.Create(t, Obj("rc", ns, "b"))
	c := env.Create(t, Obj("rc", ns, "c"))
	shared := env.Create(t, Obj("pod", ns, "shared", Owner(a, false, true), Owner(b, false, false), Owner(c, false, false)))
	seen(t, a, b, c, shared)

	env.MustDelete(t, a, "Foreground")
	env.Eventually(t, Want{shared: "live owners=[rc/b, rc/c]", a: "gone", b: "live", c: "live"})

	env.MustDelete(t, b, "Orphan")
	env.Eventually(t, Want{shared: "live owners=[rc/c]", a: "gone", b: "gone", c: "live"})

	env.MustDelete(t, c, "Background")
	env.Eventually(t, Want{shared: "gone", c: "gone"})
}

// traces/scenarios/dependency-circle.trace: pod1 <- pod3, pod2 <- pod1,
// pod3 <- pod2, all controller and blocking; a foreground delete of pod1
// takes all three (the GC unblocks to break the cycle).
func TestForegroundCycle(t *testing.T) {
	ns := env.Namespace(t)
	p1 := env.Create(t, Obj("pod", ns, "pod1"))
	p2 := env.Create(t, Obj("pod", ns, "pod2"))
	p3 := env.Create(t, Obj("pod", ns, "pod3"))
	p1 = addOwner(t, p1, p3)
	p2 = addOwner(t, p2, p1)
	p3 = addOwner(t, p3, p2)
	seen(t, p1, p2, p3)
	env.Eventually(t, Want{
		p1: "live owners=[pod/pod3 controller block]",
		p2: "live owners=[pod/pod1 controller block]",
		p3: "live owners=[pod/pod2 controller block]",
	})
	env.MustDelete(t, p1, "Foreground")
	env.Eventually(t, Want{p1: "gone", p2: "gone", p3: "gone"})
}

// TestOrphaning (upstream integration test) and the orphan step of
// traces/scenarios/custom-resources.trace: the orphan finalizer is
// removed once every dependent the graph knows lost its reference.
func TestOrphan(t *testing.T) {
	ns := env.Namespace(t)
	rc := env.Create(t, Obj("rc", ns, "rc"))
	var pods []*unstructured.Unstructured
	for _, n := range []string{"p1", "p2", "p3"} {
		pods = append(pods, env.Create(t, Obj("pod", ns, n, Owner(rc, true, true))))
	}
	keeper := env.Create(t, Obj("widget", ns, "keeper"))
	kept := env.Create(t, Obj("cm", ns, "kept", Owner(keeper, false, false)))
	seen(t, append(pods, rc, keeper, kept)...)

	env.MustDelete(t, rc, "Orphan")
	env.MustDelete(t, keeper, "Orphan")
	want := Want{rc: "gone", keeper: "gone", kept: "live"}
	for _, p := range pods {
		want[p] = "live"
	}
	env.Eventually(t, want)
	quiet(t)
	env.Consistently(t, 2*time.Second, want)
}

// traces/scenarios/custom-resources.trace: custom resources cascade both
// ways (TestMixedRelationships), in background and foreground.
func TestCustomResources(t *testing.T) {
	ns := env.Namespace(t)
	owner := env.Create(t, Obj("widget", ns, "owner"))
	dep := env.Create(t, Obj("widget", ns, "dep", Owner(owner, false, true)))
	depOfWidget := env.Create(t, Obj("cm", ns, "dep-of-widget", Owner(owner, false, false)))
	cmOwner := env.Create(t, Obj("cm", ns, "owner-of-widget"))
	depOfCM := env.Create(t, Obj("widget", ns, "dep-of-cm", Owner(cmOwner, false, false)))
	seen(t, owner, dep, depOfWidget, cmOwner, depOfCM)

	env.MustDelete(t, owner, "Background")
	env.MustDelete(t, cmOwner, "Foreground")
	env.Eventually(t, Want{owner: "gone", dep: "gone", depOfWidget: "gone", cmOwner: "gone", depOfCM: "gone"})
}

// traces/scenarios/cross-namespace.trace: a namespaced owner is looked up
// in the dependent's namespace only; the bad child is collected with an
// OwnerRefInvalidNamespace event, the good one is untouched.
func TestCrossNamespace(t *testing.T) {
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	parent := env.Create(t, Obj("cm", ns2, "parent"))
	good := env.Create(t, Obj("secret", ns2, "good", Owner(parent, false, false)))
	seen(t, parent, good)
	bad := env.Create(t, Obj("secret", ns1, "bad", Owner(parent, false, false)))
	env.Eventually(t, Want{parent: "live", good: "live owners=[cm/parent]", bad: "gone"})
	wantEvent(t, ns1, "bad", "OwnerRefInvalidNamespace",
		`ownerRef [v1/ConfigMap, namespace: `+ns1+`, name: parent, uid: `+string(parent.GetUID())+`] does not exist in namespace "`+ns1+`"`)
	quiet(t)
	env.Consistently(t, time.Second, Want{parent: "live", good: "live owners=[cm/parent]"})
}

// traces/scenarios/uid-mismatch.trace: a reference whose UID is not the
// named owner's is dangling (TestCreateWithNonExistentOwner), and a
// recreated owner does not adopt its predecessor's dependents.
func TestUIDMismatch(t *testing.T) {
	ns := env.Namespace(t)
	rc := env.Create(t, Obj("rc", ns, "owner"))
	madeUp := env.Create(t, Obj("pod", ns, "made-up", OwnerRef("v1", "ReplicationController", "owner", "not-rc-owner", false, false)))
	first := env.Create(t, Obj("pod", ns, "first", Owner(rc, false, false)))
	env.Eventually(t, Want{first: "live owners=[rc/owner]", madeUp: "gone", rc: "live"})
	seen(t, first)

	env.MustDelete(t, rc, "Orphan")
	env.Eventually(t, Want{rc: "gone", first: "live"})
	rc2 := env.Create(t, Obj("rc", ns, "owner"))
	oldRef := env.Create(t, Obj("pod", ns, "old-ref", OwnerRef("v1", "ReplicationController", "owner", rc.GetUID(), false, false)))
	env.Eventually(t, Want{first: "live", madeUp: "gone", oldRef: "gone", rc2: "live"})
}

// traces/scenarios/cluster-scoped.trace (TestClusterScopedOwners): a
// namespaced dependent of a cluster-scoped owner is valid and cascades, so
// does a cluster-scoped dependent of a cluster-scoped owner; a
// cluster-scoped dependent naming a namespaced owner kind is never
// collected; an owner of an unserved kind is retried, never collected.
func TestClusterScoped(t *testing.T) {
	ns := env.Namespace(t)
	disk := env.Create(t, Obj("pv", "", ns+"-disk"))
	onDisk := env.Create(t, Obj("cm", ns, "on-disk", Owner(disk, false, false)))
	childDisk := env.Create(t, Obj("pv", "", ns+"-child-disk", Owner(disk, false, false)))
	g1 := env.Create(t, Obj("gizmo", "", ns+"-g1", Owner(onDisk, false, false)))
	unknown := env.Create(t, Obj("cm", ns, "unknown-owner", OwnerRef("unknown.group/v1", "UnknownKind", "thing", "thing-uid", false, false)))
	// The StorageObjectInUseProtection admission plugin, when enabled,
	// adds pv-protection to every PersistentVolume; the controller that
	// removes it runs in kube-controller-manager, so the test plays its part.
	pvp := env.FinalizersSuffix(disk)
	before := Want{
		onDisk:    "live owners=[pv/" + ns + "-disk]",
		childDisk: "live owners=[pv/" + ns + "-disk]" + pvp,
		g1:        "live owners=[cm/on-disk]",
		unknown:   "live owners=[UnknownKind/thing]",
		disk:      "live" + pvp,
	}
	seen(t, disk, onDisk, childDisk, g1, unknown)
	wantEvent(t, "", g1.GetName(), "OwnerRefInvalidNamespace",
		`ownerRef [v1/ConfigMap, namespace: , name: on-disk, uid: `+string(onDisk.GetUID())+`] does not exist in namespace ""`)
	quiet(t)
	env.Consistently(t, 2*time.Second, before)

	env.MustDelete(t, disk, "")
	if pvp != "" {
		removeFinalizers(t, disk)
	}
	// the GC deleted the child PV (whose own pv-protection may hold it)
	childGone := "gone"
	if pvp != "" {
		childGone = "deleting owners=[pv/" + ns + "-disk]" + pvp
	}
	env.Eventually(t, Want{disk: "gone", onDisk: "gone", childDisk: childGone})
	if pvp != "" {
		removeFinalizers(t, childDisk)
	}
	after := Want{g1: "live owners=[cm/on-disk]", unknown: "live owners=[UnknownKind/thing]"}
	quiet(t)
	env.Consistently(t, 2*time.Second, after)
	if _, ok := collector.Node(unknown.GetUID()); !ok {
		t.Fatal("the dependent of an unserved owner kind left the graph")
	}
	_ = env.Delete(g1, "")
}

func removeFinalizers(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		_, err := env.Dyn.Resource(GVR(u)).Namespace(u.GetNamespace()).Patch(context.Background(), u.GetName(),
			types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("remove finalizers of %s: %v", u.GetName(), err)
		}
	}
}

// addOwner adds a controller, blocking reference to owner to u.
func addOwner(t *testing.T, u, owner *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	Owner(owner, true, true)(u)
	got, err := env.Dyn.Resource(GVR(u)).Namespace(u.GetNamespace()).Update(context.Background(), u, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("add owner to %s: %v", u.GetName(), err)
	}
	return got
}

// wantEvent waits for a Warning event about the named object.
func wantEvent(t *testing.T, ns, name, reason, message string) {
	t.Helper()
	WaitFor(t, "event "+reason+" about "+name, func() error {
		if ns == "" {
			ns = "default" // events about cluster-scoped objects go there
		}
		list, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name != name {
				continue
			}
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.Message == message {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return errorf("events about %s: %s", name, strings.Join(seen, "; "))
	})
}

// The last step of traces/scenarios/custom-resources.trace
// (TestCRDDeletionCascading): deleting a CRD deletes its custom resources
// (apiextensions' cleanup finalizer) and the GC their dependents. The test
// uses a CRD of its own, so the package's shared kinds stay served.
func TestCRDDeletion(t *testing.T) {
	ns := env.Namespace(t)
	sprocket := crds.Def{Kind: "Sprocket", Plural: "sprockets", Singular: "sprocket", Namespaced: true,
		Schema: map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
	if err := crds.Install(context.Background(), env.Admin, sprocket); err != nil {
		t.Fatal(err)
	}
	if err := collector.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(sprocket.GVK())
	u.SetNamespace(ns)
	u.SetName("last")
	last, err := env.Dyn.Resource(sprocket.GVR()).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ofLast := env.Create(t, Obj("cm", ns, "of-last", Owner(last, false, false)))
	seen(t, last, ofLast)

	if err := env.Dyn.Resource(crds.CRDResource).Delete(context.Background(), sprocket.Name(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, Want{ofLast: "gone"})
	WaitFor(t, "sprocket gone", func() error {
		_, err := env.Dyn.Resource(sprocket.GVR()).Namespace(ns).Get(context.Background(), "last", metav1.GetOptions{})
		if err == nil {
			return errorf("still there")
		}
		return nil
	})
}

// MonitorSynced counts a discovery sync for a CRD only if its discovery
// read began after the CRD was created, and only once the monitor it
// started has synced: how harness/target sees the GC take a new CRD in.
func TestMonitorSyncedCountsSyncsAfterTheCRD(t *testing.T) {
	gear := crds.Def{Kind: "Gear", Plural: "gears", Singular: "gear", Namespaced: true,
		Schema: map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
	gr := gear.GVR().GroupResource()
	created := time.Now()
	if err := crds.Install(context.Background(), env.Admin, gear); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dyn.Resource(crds.CRDResource).Delete(context.Background(), gear.Name(), metav1.DeleteOptions{})
	})
	WaitFor(t, "the GC to monitor gears", func() error { // SyncPeriod is 1s here
		if !collector.MonitorSynced(gr, created) {
			return errorf("not yet")
		}
		return nil
	})
	if collector.MonitorSynced(gr, time.Now()) {
		t.Error("a monitor started before a CRD's creation counted for it")
	}
	if collector.MonitorSynced(schema.GroupResource{Group: gr.Group, Resource: "cogs"}, created) {
		t.Error("a resource no CRD serves counted as monitored")
	}
}
