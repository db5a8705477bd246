package impl_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"

	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/adopter"
	"github.com/cascade-k8s/cascade/impl/crds"
	"github.com/cascade-k8s/cascade/impl/gc"
	. "github.com/cascade-k8s/cascade/impl/internal/testenv"
	"github.com/cascade-k8s/cascade/impl/step"
)

// relabel sets one label of u (a merge patch as the driver).
func relabel(t *testing.T, u *unstructured.Unstructured, k, v string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{k: v}}})
	if _, err := env.Dyn.Resource(GVR(u)).Namespace(u.GetNamespace()).Patch(context.Background(), u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label %s %s=%s: %v", u.GetName(), k, v, err)
	}
}

// claims renders the stepped adopter's claims as trace steps.
func claims(tg *impl.Target) []string {
	var out []string
	for _, c := range tg.Adopter.Stepper().Claims() {
		out = append(out, c.String())
	}
	return out
}

func wantClaims(t *testing.T, tg *impl.Target, want ...string) {
	t.Helper()
	got := claims(tg)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("claims:\n  got  %q\n  want %q", got, want)
	}
}

func notEnabled(t *testing.T, tg *impl.Target, line string) {
	t.Helper()
	if _, err := tg.Step(context.Background(), line); !errors.Is(err, step.ErrNotEnabled) {
		t.Fatalf("%s: want ErrNotEnabled, got %v", line, err)
	}
}

// `controller release` in Stepped mode (ClaimObject's release branch,
// ReleasePod): a Herd releases a Pod it controls once its cache sees the
// Pod's labels no longer match, and another Herd whose selector now
// matches adopts the orphan; a Herd being deleted releases nothing; the
// release patch of a Pod that is gone answers 404, of another
// incarnation 422, as the model's release does.
func TestSteppedRelease(t *testing.T) {
	tg := start(t, nil)
	ns := env.Namespace(t)
	ctx := context.Background()
	web := env.Create(t, Obj("herd", ns, "web", Selector("app", "web")))
	db := env.Create(t, Obj("herd", ns, "db", Selector("app", "db")))
	p := env.Create(t, Obj("pod", ns, "p", Labels("app", "web"), Owner(web, true, true)))
	settle(t, tg)
	env.Consistently(t, 0, Want{web: "live", db: "live", p: "live owners=[herd/web controller block]"})
	wantClaims(t, tg)

	relabel(t, p, "app", "db")
	release := "controller release pod/" + ns + "/p by=herd/" + ns + "/web"
	notEnabled(t, tg, release) // the cache still has app=web
	do(t, tg, "controller deliver pod/"+ns+"/p")
	wantClaims(t, tg, release)
	notEnabled(t, tg, "controller adopt pod/"+ns+"/p by=herd/"+ns+"/db") // p still has a controller
	notEnabled(t, tg, "controller release pod/"+ns+"/p by=herd/"+ns+"/db")
	do(t, tg, release)
	env.Consistently(t, 0, Want{web: "live", db: "live", p: "live"})
	settle(t, tg)
	env.Consistently(t, time.Second, Want{web: "live", db: "live", p: "live owners=[herd/db controller block]"})
	wantClaims(t, tg)

	// an owner being deleted releases nothing
	held := env.Create(t, Obj("herd", ns, "held", Selector("app", "held"), Finalizers(Hold)))
	h := env.Create(t, Obj("pod", ns, "h", Labels("app", "held"), Owner(held, true, true)))
	settle(t, tg)
	env.MustDelete(t, held, "")
	relabel(t, h, "app", "none")
	settle(t, tg)
	env.Consistently(t, time.Second, Want{held: "deleting finalizers=[" + Hold + "]", h: "live owners=[herd/held controller block]"})
	wantClaims(t, tg)
	notEnabled(t, tg, "controller release pod/"+ns+"/h by=herd/"+ns+"/held")

	// the write's answer when the cache is stale: 404 for a Pod that is
	// gone, 422 for another incarnation of it (the UID precondition)
	gone := env.Create(t, Obj("pod", ns, "gone", Labels("app", "web"), Owner(web, true, true)))
	settle(t, tg)
	relabel(t, gone, "app", "none")
	do(t, tg, "controller deliver pod/"+ns+"/gone")
	env.MustDelete(t, gone, "")
	env.Eventually(t, Want{gone: "gone"})
	werr, err := tg.Step(ctx, "controller release pod/"+ns+"/gone by=herd/"+ns+"/web")
	if err != nil || !apierrors.IsNotFound(werr) {
		t.Fatalf("release of a deleted pod: want a 404 write, got err %v, write %v", err, werr)
	}
	again := env.Create(t, Obj("pod", ns, "gone", Labels("app", "none"), Owner(web, true, true)))
	werr, err = tg.Step(ctx, "controller release pod/"+ns+"/gone by=herd/"+ns+"/web")
	if err != nil || !apierrors.IsInvalid(werr) {
		t.Fatalf("release of another incarnation: want a 422 write, got err %v, write %v", err, werr)
	}
	env.Consistently(t, 0, Want{again: "live owners=[herd/web controller block]"})
}

// The adopter in Auto mode releases a Pod whose labels stop matching (the
// Herd that now matches adopts it), leaves another controller's Pod
// alone, and a Herd being deleted releases nothing.
func TestAdopterAutoRelease(t *testing.T) {
	startWith(t, impl.Options{Mode: step.Auto, Adopter: true, GC: gc.Options{SyncPeriod: time.Second}})
	ns := env.Namespace(t)
	web := env.Create(t, Obj("herd", ns, "web", Selector("app", "web")))
	db := env.Create(t, Obj("herd", ns, "db", Selector("app", "db")))
	p := env.Create(t, Obj("pod", ns, "p", Labels("app", "web")))
	rc := env.Create(t, Obj("rc", ns, "rc"))
	q := env.Create(t, Obj("pod", ns, "q", Labels("app", "other"), Owner(rc, true, false)))
	env.Eventually(t, Want{p: "live owners=[herd/web controller block]", q: "live owners=[rc/rc controller]"})
	relabel(t, p, "app", "db")
	env.Eventually(t, Want{p: "live owners=[herd/db controller block]"})
	relabel(t, q, "app", "web")
	env.Consistently(t, 2*time.Second, Want{web: "live", db: "live", p: "live owners=[herd/db controller block]", q: "live owners=[rc/rc controller]"})

	held := env.Create(t, Obj("herd", ns, "held", Selector("app", "held"), Finalizers(Hold)))
	h := env.Create(t, Obj("pod", ns, "h", Labels("app", "held")))
	env.Eventually(t, Want{h: "live owners=[herd/held controller block]"})
	env.MustDelete(t, held, "")
	env.Eventually(t, Want{held: "deleting finalizers=[" + Hold + "]"})
	relabel(t, h, "app", "none")
	env.Consistently(t, 2*time.Second, Want{h: "live owners=[herd/held controller block]"})
}

// Stepped mode with the built-in workloads (Options.AdopterKinds), as the
// impl-stepped target runs it: a Deployment adopts a matching orphan
// ReplicaSet, a ReplicaSet and a ReplicationController adopt Pods, and a
// ReplicaSet releases a Pod whose labels stop matching.
func TestSteppedBuiltinWorkloads(t *testing.T) {
	tg := startWith(t, impl.Options{Mode: step.Stepped, Adopter: true, AdopterKinds: []string{"Deployment", "ReplicaSet", "ReplicationController"},
		GC: gc.Options{SyncPeriod: time.Second}})
	if got := strings.Join(tg.Adopter.Kinds(), ","); got != "Deployment,ReplicaSet,ReplicationController" {
		t.Fatalf("kinds: %s", got)
	}
	ns := env.Namespace(t)
	deploy := env.Create(t, Obj("deploy", ns, "web"))
	rs := env.Create(t, Obj("rs", ns, "web-1", Labels("app", "web")))
	rc := env.Create(t, Obj("rc", ns, "db"))
	p := env.Create(t, Obj("pod", ns, "p", Labels("app", "web-1")))
	q := env.Create(t, Obj("pod", ns, "q", Labels("app", "db")))
	for _, l := range []string{"deploy/" + ns + "/web", "rs/" + ns + "/web-1", "rc/" + ns + "/db", "pod/" + ns + "/p", "pod/" + ns + "/q"} {
		do(t, tg, "controller deliver "+l)
	}
	wantClaims(t, tg,
		"controller adopt pod/"+ns+"/p by=rs/"+ns+"/web-1",
		"controller adopt pod/"+ns+"/q by=rc/"+ns+"/db",
		"controller adopt rs/"+ns+"/web-1 by=deploy/"+ns+"/web")
	do(t, tg, "controller adopt rs/"+ns+"/web-1 by=deploy/"+ns+"/web")
	env.Consistently(t, 0, Want{deploy: "live", rs: "live owners=[deploy/web controller block]", rc: "live", p: "live", q: "live"})
	settle(t, tg)
	env.Consistently(t, time.Second, Want{rs: "live owners=[deploy/web controller block]",
		p: "live owners=[rs/web-1 controller block]", q: "live owners=[rc/db controller block]"})

	relabel(t, p, "app", "none")
	do(t, tg, "controller deliver pod/"+ns+"/p")
	wantClaims(t, tg, "controller release pod/"+ns+"/p by=rs/"+ns+"/web-1")
	do(t, tg, "controller release pod/"+ns+"/p by=rs/"+ns+"/web-1")
	env.Consistently(t, 0, Want{p: "live"})
	notEnabled(t, tg, "controller deliver herd/"+ns+"/x") // Herds are not managed here
}

// The adopter requires the Herd CRD, which the harness installs: without
// it Start fails at once with one line naming the CRD, and leaves nothing
// running.
func TestAdopterNeedsHerdCRD(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	herds := env.Dyn.Resource(crds.Herd.GVR())
	list, err := herds.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range list.Items { // earlier tests' Herds held by a finalizer would keep the CRD
		if len(h.GetFinalizers()) > 0 {
			if _, err := herds.Namespace(h.GetNamespace()).Patch(ctx, h.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		if err := crds.Install(context.Background(), env.Admin, crds.Herd); err != nil {
			t.Errorf("reinstall the Herd CRD: %v", err)
		}
	})
	if err := env.Dyn.Resource(crds.CRDResource).Delete(ctx, crds.Herd.Name(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Admin)
	WaitFor(t, "herds no longer served", func() error {
		if _, err := env.Dyn.Resource(crds.CRDResource).Get(ctx, crds.Herd.Name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errors.New("the CRD is still there")
		}
		rl, err := dc.ServerResourcesForGroupVersion(crds.Group + "/" + crds.Version)
		if err == nil {
			for _, r := range rl.APIResources {
				if r.Name == crds.Herd.Plural {
					return errors.New("still in discovery")
				}
			}
		}
		return nil
	})

	tg, err := impl.Start(ctx, env.Admin, impl.Options{Mode: step.Stepped, Adopter: true})
	if err == nil {
		_ = tg.Stop()
		t.Fatal("impl started an adopter without the Herd CRD")
	}
	want := "adopter: the cluster does not serve herds.cascade.dev/v1: install the CRD herds.cascade.dev first"
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line starting %q, got %q", want, err)
	}
	if _, err := adopter.New(env.Admin, adopter.Options{Kinds: []string{"StatefulSet"}}); err == nil || !strings.Contains(err.Error(), `cannot manage kind "StatefulSet"`) {
		t.Fatalf("adopter for StatefulSets: %v", err)
	}
	if err := WaitNoLeaks(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}
