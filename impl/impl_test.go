package impl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/gc"
	. "github.com/cascade-k8s/cascade/impl/internal/testenv"
	"github.com/cascade-k8s/cascade/impl/step"
)

// The tests of this package drive impl in Stepped mode, one model trace
// step per call. Each test starts its own Target (one GC at a time: two
// would race) on the package's control plane and stops it before the next.

var env *Env

func TestMain(m *testing.M) {
	os.Exit(Main(m, func(e *Env) (func() error, error) {
		env = e
		return func() error { return nil }, nil
	}))
}

// start runs a stepped Target with the adopter and settles the initial
// list, so that the test's first step meets empty queues.
func start(t *testing.T, bs bugs.Set) *impl.Target {
	t.Helper()
	return startWith(t, impl.Options{Mode: step.Stepped, Bugs: bs, Adopter: true, GC: gc.Options{SyncPeriod: time.Second}})
}

func startWith(t *testing.T, opts impl.Options) *impl.Target {
	t.Helper()
	ctx := context.Background()
	tg, err := impl.Start(ctx, env.Admin, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.Stop(); err != nil {
			t.Error(err)
		}
		if err := WaitNoLeaks(10 * time.Second); err != nil {
			t.Error(err)
		}
	})
	settle(t, tg)
	return tg
}

func settle(t *testing.T, tg *impl.Target) {
	t.Helper()
	if err := tg.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// do takes trace steps that must succeed, writes included.
func do(t *testing.T, tg *impl.Target, lines ...string) {
	t.Helper()
	for _, l := range lines {
		werr, err := tg.Step(context.Background(), l)
		if err != nil {
			t.Fatalf("%s: %v\nqueues: %s", l, err, tg.GC.Stepper())
		}
		if werr != nil {
			t.Fatalf("%s: the write failed: %v", l, werr)
		}
	}
}

// orphanAdoption plays traces/races/orphan-adoption.trace (and its -fixed
// twin) with a Herd adopting a Pod instead of a Deployment adopting a
// ReplicaSet, and returns the target after the adoption step and the
// adoption's outcome.
func orphanAdoption(t *testing.T, bs bugs.Set) (tg *impl.Target, ns string, herd, pod *unstructured.Unstructured, adoptErr error) {
	tg = start(t, bs)
	ns = env.Namespace(t)
	herd = env.Create(t, Obj("herd", ns, "web", Selector("app", "web")))
	pod = env.Create(t, Obj("pod", ns, "web-1", Labels("app", "web"), Owner(herd, true, true)))
	settle(t, tg)
	env.Consistently(t, 0, Want{herd: "live", pod: "live owners=[herd/web controller block]"})

	// delete herd/web propagation=Orphan; gc deliver; gc attemptToOrphan
	env.MustDelete(t, herd, "Orphan")
	do(t, tg, "gc deliver herd/"+ns+"/web")
	q := tg.GC.Stepper().Queues()
	if len(q.AttemptToOrphan) != 1 || q.AttemptToOrphan[0].UID != herd.GetUID() {
		t.Fatalf("attemptToOrphan after delivering the orphan delete: %v", q.AttemptToOrphan)
	}
	do(t, tg, "gc attemptToOrphan herd/"+ns+"/web")
	env.Consistently(t, 0, Want{herd: "gone", pod: "live"})

	// controller deliver pod/web-1: the controller's cache sees the orphan
	// while it still has the Herd live
	do(t, tg, "controller deliver pod/"+ns+"/web-1")
	claims := tg.Adopter.Stepper().Claims()
	if len(claims) != 1 || claims[0].Release || claims[0].Dependent.UID != pod.GetUID() || claims[0].Owner.UID != herd.GetUID() {
		t.Fatalf("the controller's cache should allow exactly the adoption of %s by %s, allows %v", pod.GetName(), herd.GetName(), claims)
	}
	adoptErr, err := tg.Step(context.Background(), "controller adopt pod/"+ns+"/web-1 by=herd/"+ns+"/web")
	if err != nil {
		t.Fatal(err)
	}
	return tg, ns, herd, pod, adoptErr
}

// With adopt-without-recheck the controller re-adds the reference the
// orphan step removed, and the GC collects the Pod as garbage although
// orphaning was requested: orphan respected is violated.
func TestOrphanAdoptionRace(t *testing.T) {
	tg, _, herd, pod, adoptErr := orphanAdoption(t, bugs.Of(bugs.AdoptWithoutRecheck))
	if adoptErr != nil {
		t.Fatalf("adopt without re-check failed: %v", adoptErr)
	}
	env.Consistently(t, 0, Want{herd: "gone", pod: "live owners=[herd/web controller block]"})
	settle(t, tg)
	env.Eventually(t, Want{herd: "gone", pod: "gone"})
}

// Upstream (RecheckDeletionTimestamp, kubernetes#42938): the live GET finds
// the Herd gone and the adoption is refused with 404; the Pod survives.
func TestOrphanAdoptionFixed(t *testing.T) {
	tg, _, herd, pod, adoptErr := orphanAdoption(t, nil)
	if !apierrors.IsNotFound(adoptErr) || !strings.Contains(adoptErr.Error(), "original Herd") {
		t.Fatalf("adopt: want 404 original Herd ... is gone, got %v", adoptErr)
	}
	env.Consistently(t, 0, Want{herd: "gone", pod: "live"})
	settle(t, tg)
	env.Consistently(t, 2*time.Second, Want{herd: "gone", pod: "live"})
}

// traces/races/kubernetes-114603-fixed.trace and its bug twin
// delete-without-rv-owner-moved: the GC
// decides to delete cm/proxy, the user moves its reference to v19 before
// the DELETE is sent. With the resourceVersion precondition the DELETE
// fails 409 and the proxy survives; without it the proxy is collected.
func TestHeldDeleteRVPrecondition(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bugs      bugs.Set
		conflict  bool
		wantProxy string
	}{
		{"fixed", nil, true, "live owners=[cm/v19]"},
		{"delete-without-rv-precondition", bugs.Of(bugs.DeleteWithoutRVPrecondition), false, "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := start(t, tc.bugs)
			ns := env.Namespace(t)
			v18 := env.Create(t, Obj("cm", ns, "v18"))
			v19 := env.Create(t, Obj("cm", ns, "v19"))
			proxy := env.Create(t, Obj("cm", ns, "proxy", Owner(v18, false, false)))
			settle(t, tg)

			env.MustDelete(t, v18, "")
			do(t, tg, "gc deliver cm/"+ns+"/v18", "gc attemptToDelete cm/"+ns+"/proxy")
			held := tg.GC.Stepper().Queues().Held
			if len(held) != 1 || held[0].Verb != gc.VerbDelete || held[0].Item.UID != proxy.GetUID() || held[0].Policy != "Background" {
				t.Fatalf("held writes: %+v", held)
			}
			env.Consistently(t, 0, Want{proxy: "live owners=[cm/v18]", v18: "gone", v19: "live"})

			// add-owner cm/proxy cm/v19; remove-owner cm/proxy cm/v18
			cur, err := env.Fetch(proxy)
			if err != nil {
				t.Fatal(err)
			}
			cur.SetOwnerReferences(nil)
			Owner(v19, false, false)(cur)
			if _, err := env.Dyn.Resource(GVR(cur)).Namespace(ns).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			werr, err := tg.Step(context.Background(), "gc delete cm/"+ns+"/proxy")
			if err != nil {
				t.Fatal(err)
			}
			if got := apierrors.IsConflict(werr); got != tc.conflict {
				t.Fatalf("gc delete: conflict=%v, want %v (err %v)", got, tc.conflict, werr)
			}
			settle(t, tg)
			env.Eventually(t, Want{proxy: tc.wantProxy, v18: "gone", v19: "live"})
		})
	}
}

// A step that cannot be taken says so and changes nothing.
func TestNotEnabled(t *testing.T) {
	// a short EventWait: refusing a coalesce waits that long for an event
	tg := startWith(t, impl.Options{Mode: step.Stepped, Adopter: true, GC: gc.Options{SyncPeriod: time.Second, EventWait: time.Second}})
	ns := env.Namespace(t)
	a := env.Create(t, Obj("cm", ns, "a"))
	b := env.Create(t, Obj("cm", ns, "b"))
	heldCMs := func() []types.UID {
		var out []types.UID
		for _, r := range tg.GC.Stepper().Pending() {
			if r.Resource.Resource == "configmaps" {
				for _, e := range r.Events {
					out = append(out, e.Key.UID)
				}
			}
		}
		return out
	}
	WaitFor(t, "two configmap events held", func() error {
		if n := len(heldCMs()); n != 2 {
			return errors.New("held: " + string(rune('0'+n)))
		}
		return nil
	})
	ctx := context.Background()
	for _, line := range []string{
		"gc deliver cm/" + ns + "/b",         // not the head
		"gc lose cm/" + ns + "/a",            // needs lost-first-update
		"gc coalesce cm/" + ns + "/a",        // nothing supersedes it
		"gc attemptToDelete cm/" + ns + "/a", // not queued
		"gc delete cm/" + ns + "/a",          // nothing held
		"controller adopt pod/" + ns + "/x by=herd/" + ns + "/y",
		"controller release pod/" + ns + "/x by=herd/" + ns + "/y",
	} {
		if _, err := tg.Step(ctx, line); !errors.Is(err, step.ErrNotEnabled) {
			t.Errorf("%s: want ErrNotEnabled, got %v", line, err)
		}
	}
	pending := heldCMs()
	if len(pending) != 2 || pending[0] != a.GetUID() || pending[1] != b.GetUID() {
		t.Fatalf("held configmap events: %v, want [%s %s]", pending, a.GetUID(), b.GetUID())
	}
	do(t, tg, "gc deliver cm/"+ns+"/a", "gc deliver cm/"+ns+"/b")
	if !tg.GC.GraphHasUID(a.GetUID()) || !tg.GC.GraphHasUID(b.GetUID()) {
		t.Fatal("delivered objects are not in the graph")
	}
}

// The adopter in Auto mode adopts a matching orphan Pod, not one that has
// a controller or does not match, and a Herd being deleted adopts nothing.
func TestAdopterAuto(t *testing.T) {
	startWith(t, impl.Options{Mode: step.Auto, Adopter: true, GC: gc.Options{SyncPeriod: time.Second}})
	ns := env.Namespace(t)
	herd := env.Create(t, Obj("herd", ns, "web", Selector("app", "web")))
	orphan := env.Create(t, Obj("pod", ns, "orphan", Labels("app", "web")))
	other := env.Create(t, Obj("pod", ns, "other", Labels("app", "db")))
	rc := env.Create(t, Obj("rc", ns, "rc"))
	owned := env.Create(t, Obj("pod", ns, "owned", Labels("app", "web"), Owner(rc, true, false)))
	want := Want{orphan: "live owners=[herd/web controller block]", other: "live", owned: "live owners=[rc/rc controller]"}
	env.Eventually(t, want)

	held := env.Create(t, Obj("herd", ns, "held", Selector("app", "late"), Finalizers(Hold)))
	env.MustDelete(t, held, "")
	late := env.Create(t, Obj("pod", ns, "late", Labels("app", "late")))
	env.Consistently(t, 2*time.Second, Want{late: "live", held: "deleting finalizers=[" + Hold + "]", herd: "live"})
}

// TestRelistGapsCollect: under the informer-relist fault an owner can be
// created and deleted within a relist gap of its resource, so that the
// graph builder never sees it, while its dependent's event arrives at
// once and makes it a virtual node. The GC requeues the virtual node
// until it is observed or found absent (kubernetes#56121), so every
// dependent is still collected. (With forget-unobserved-virtual some
// are stranded; `cascade fuzz --target impl --informer-relist` finds it.)
func TestRelistGapsCollect(t *testing.T) {
	startWith(t, impl.Options{Mode: step.Auto, GC: gc.Options{SyncPeriod: time.Second, InformerRelist: 300 * time.Millisecond, LagSeed: 3}})
	ns := env.Namespace(t)
	want := Want{}
	for i := range 20 {
		o := env.Create(t, Obj("secret", ns, fmt.Sprintf("o%d", i)))
		d := env.Create(t, Obj("cm", ns, fmt.Sprintf("d%d", i), Owner(o, false, false)))
		env.MustDelete(t, o, "")
		want[d] = "gone"
	}
	env.Eventually(t, want)
}
