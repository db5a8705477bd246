package impl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/gc"
	. "github.com/cascade-k8s/cascade/impl/internal/testenv"
	"github.com/cascade-k8s/cascade/impl/step"
)

// Stepped replays of the races in traces/races whose steps use lose,
// coalesce and deliver-virtual, each with its bug on and off, and Auto-mode
// checks of bugs that need no particular interleaving.

// traces/races/kubernetes-115570.trace: the update that starts the
// foreground deletion is lost; a later update shows no transition, so the
// owner's node is beingDeleted but not deletingDependents and the owner is
// stuck with foregroundDeletion.
func TestLostFirstUpdate(t *testing.T) {
	tg := start(t, bugs.Of(bugs.LostFirstUpdate))
	ns := env.Namespace(t)
	rs := env.Create(t, Obj("rs", ns, "web", Replicas(1)))
	pod := env.Create(t, Obj("pod", ns, "web-a", Labels("app", "web"), Owner(rs, true, true)))
	settle(t, tg)

	env.MustDelete(t, rs, "Foreground")
	do(t, tg, "gc lose rs/"+ns+"/web")
	patch(t, rs, `{"metadata":{"labels":{"touched":"yes"}}}`)
	settle(t, tg)
	env.Consistently(t, time.Second, Want{pod: "live owners=[rs/web controller block]", rs: "deleting finalizers=[foregroundDeletion]"})
	n, ok := tg.GC.Node(rs.GetUID())
	if !ok || !n.BeingDeleted || n.DeletingDependents {
		t.Fatalf("owner node: %+v (in graph %v), want beingDeleted and not deletingDependents", n, ok)
	}
}

// traces/races/stranded-virtual-node.trace: the owner's add and delete
// events are both skipped by relists; only the requeue of the unobserved
// virtual node (kubernetes#56121) finds it gone and collects the dependent.
func TestStrandedVirtualNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		bugs bugs.Set
		dep  string
	}{
		{"fixed", nil, "gone"},
		{"forget-unobserved-virtual", bugs.Of(bugs.ForgetUnobservedVirtual), "live owners=[secret/owner]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := start(t, tc.bugs)
			ns := env.Namespace(t)
			owner := env.Create(t, Obj("secret", ns, "owner"))
			dep := env.Create(t, Obj("cm", ns, "dep", Owner(owner, false, false)))
			do(t, tg, "gc deliver cm/"+ns+"/dep", "gc attemptToDelete secret/"+ns+"/owner")
			env.MustDelete(t, owner, "")
			do(t, tg, "gc coalesce secret/"+ns+"/owner", "gc coalesce secret/"+ns+"/owner")
			settle(t, tg)
			env.Eventually(t, Want{owner: "gone", dep: tc.dep})
			env.Consistently(t, time.Second, Want{dep: tc.dep})
		})
	}
}

// traces/races/cluster-scoped-owner-lookup.trace and its -fixed twin: the
// virtual node of a cluster-scoped owner carries its dependent's
// namespace; looking it up there (kubernetes#54940) finds nothing, and the
// dependent of a live owner is collected.
func TestClusterScopedOwnerLookup(t *testing.T) {
	t.Run("lookup-ignores-scope", func(t *testing.T) {
		tg := start(t, bugs.Of(bugs.LookupIgnoresScope))
		ns := env.Namespace(t)
		disk := env.Create(t, Obj("pv", "", ns+"-disk"))
		claim := env.Create(t, Obj("cm", ns, "claim", Owner(disk, false, false)))
		do(t, tg, "gc deliver cm/"+ns+"/claim",
			"gc attemptToDelete pv/"+ns+"/"+disk.GetName(),
			"gc deliver-virtual pv/"+ns+"/"+disk.GetName(),
			"gc attemptToDelete cm/"+ns+"/claim",
			"gc delete cm/"+ns+"/claim")
		settle(t, tg)
		env.Eventually(t, Want{claim: "gone", disk: "live" + env.FinalizersSuffix(disk)})
	})
	t.Run("fixed", func(t *testing.T) {
		tg := start(t, nil)
		ns := env.Namespace(t)
		disk := env.Create(t, Obj("pv", "", ns+"-disk"))
		claim := env.Create(t, Obj("cm", ns, "claim", Owner(disk, false, false)))
		do(t, tg, "gc deliver cm/"+ns+"/claim", "gc attemptToDelete pv/"+ns+"/"+disk.GetName())
		if _, err := tg.Step(context.Background(), "gc deliver-virtual pv/"+ns+"/"+disk.GetName()); !errors.Is(err, step.ErrNotEnabled) {
			t.Fatalf("deliver-virtual after finding the owner: want ErrNotEnabled, got %v", err)
		}
		if q := tg.GC.Stepper().Queues().AttemptToDelete; len(q) != 1 || q[0].UID != disk.GetUID() {
			t.Fatalf("the unobserved virtual owner must stay queued, queue: %v", q)
		}
		settle(t, tg)
		env.Consistently(t, time.Second, Want{claim: "live owners=[pv/" + disk.GetName() + "]"})
	})
}

// Auto mode with bugs that need no particular interleaving, each next to
// its upstream behaviour: a foreground cycle deadlocks without the unblock
// (traces/races/cycle-deadlock.trace), a policy-less delete orphans
// mid-cascade, a lost first update strands a foreground owner, and a
// second foreground delete is missed by edge-triggered transitions
// (traces/races/second-foreground-delete.trace).
func TestBugsAuto(t *testing.T) {
	auto := func(t *testing.T, bs bugs.Set) *impl.Target {
		tg, err := impl.Start(context.Background(), env.Admin, impl.Options{Mode: step.Auto, Bugs: bs, GC: gc.Options{SyncPeriod: time.Second}})
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
		return tg
	}
	cycle := func(t *testing.T, bs bugs.Set, want string) {
		tg := auto(t, bs)
		ns := env.Namespace(t)
		a := env.Create(t, Obj("cm", ns, "a"))
		b := env.Create(t, Obj("cm", ns, "b", Owner(a, false, true)))
		patch(t, a, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"b","uid":"`+string(b.GetUID())+`","blockOwnerDeletion":true}]}}`)
		observed(t, tg, a, b)
		env.MustDelete(t, a, "Foreground")
		if want == "gone" {
			t.Cleanup(func() {
				if t.Failed() {
					nb, okb := tg.GC.Node(b.GetUID())
					na, oka := tg.GC.Node(a.GetUID())
					cur, _ := env.Fetch(b)
					t.Logf("gc graph: b node %v %+v\na node %v %+v\nstats %+v\nabsent %v\nlive b %v", okb, nb, oka, na, tg.GC.Stats(), tg.GC.AbsentOwners(), cur)
				}
			})
			env.Eventually(t, Want{a: "gone", b: "gone"})
			return
		}
		env.Eventually(t, Want{a: "deleting owners=[cm/b block] finalizers=[foregroundDeletion]", b: "deleting owners=[cm/a block] finalizers=[foregroundDeletion]"})
		settle(t, tg)
		env.Consistently(t, 2*time.Second, Want{a: "deleting owners=[cm/b block] finalizers=[foregroundDeletion]"})
	}
	t.Run("no-cycle-unblock", func(t *testing.T) { cycle(t, bugs.Of(bugs.NoCycleUnblock), "stuck") })
	t.Run("cycle-fixed", func(t *testing.T) { cycle(t, nil, "gone") })

	second := func(t *testing.T, bs bugs.Set, want string) {
		tg := auto(t, bs)
		ns := env.Namespace(t)
		x := env.Create(t, Obj("cm", ns, "x", Finalizers(Hold)))
		observed(t, tg, x)
		env.MustDelete(t, x, "Foreground")
		env.Eventually(t, Want{x: "deleting finalizers=[" + Hold + "]"})
		env.MustDelete(t, x, "Foreground")
		env.Eventually(t, Want{x: want})
		settle(t, tg)
		env.Consistently(t, time.Second, Want{x: want})
	}
	// traces/races/delete-without-policy.trace: without a policy the GC's
	// delete of a ReplicationController (core/v1 default: orphan) orphans
	// its pod in the middle of a background cascade.
	policy := func(t *testing.T, bs bugs.Set, bottom string) {
		tg := auto(t, bs)
		ns := env.Namespace(t)
		top := env.Create(t, Obj("cm", ns, "top"))
		middle := env.Create(t, Obj("rc", ns, "middle", Owner(top, false, false)))
		pod := env.Create(t, Obj("pod", ns, "bottom", Owner(middle, true, false)))
		observed(t, tg, top, middle, pod)
		env.MustDelete(t, top, "")
		env.Eventually(t, Want{top: "gone", middle: "gone", pod: bottom})
		settle(t, tg)
		env.Consistently(t, time.Second, Want{pod: bottom})
	}
	t.Run("delete-dependents-without-policy", func(t *testing.T) {
		policy(t, bugs.Of(bugs.DeleteDependentsWithoutPolicy), "live")
	})
	t.Run("delete-with-policy", func(t *testing.T) { policy(t, nil, "gone") })

	// kubernetes#115570 in Auto mode: the update that first shows the
	// foreground deletion never reaches the graph builder.
	t.Run("lost-first-update", func(t *testing.T) {
		tg := auto(t, bugs.Of(bugs.LostFirstUpdate))
		ns := env.Namespace(t)
		rs := env.Create(t, Obj("rs", ns, "web", Replicas(1)))
		pod := env.Create(t, Obj("pod", ns, "web-a", Owner(rs, true, true)))
		observed(t, tg, rs, pod)
		env.MustDelete(t, rs, "Foreground")
		settle(t, tg)
		env.Consistently(t, 2*time.Second, Want{rs: "deleting finalizers=[foregroundDeletion]", pod: "live owners=[rs/web controller block]"})
	})

	t.Run("edge-triggered-transitions", func(t *testing.T) {
		second(t, bugs.Of(bugs.EdgeTriggeredTransitions), "deleting finalizers=["+Hold+" foregroundDeletion]")
	})
	t.Run("second-foreground-fixed", func(t *testing.T) { second(t, nil, "deleting finalizers=["+Hold+"]") })
}

// observed waits until the GC's graph has observed the objects.
func observed(t *testing.T, tg *impl.Target, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		WaitFor(t, "gc observes "+u.GetName(), func() error {
			if n, ok := tg.GC.Node(u.GetUID()); !ok || n.Virtual {
				return errors.New("not observed")
			}
			return nil
		})
	}
}

func patch(t *testing.T, u *unstructured.Unstructured, p string) {
	t.Helper()
	if _, err := env.Dyn.Resource(GVR(u)).Namespace(u.GetNamespace()).Patch(context.Background(), u.GetName(), types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch %s: %v", u.GetName(), err)
	}
}
