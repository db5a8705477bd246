package target

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// startUpstreamStepped starts an upstream-stepped target for one test, or
// skips it without control-plane binaries.
func startUpstreamStepped(t *testing.T) *Target { return startTarget(t, UpstreamStepped) }

// startTarget starts the envtest target name on the built binaries and
// closes it after the test; skipped with -short or without binaries.
func startTarget(t *testing.T, name string) *Target {
	t.Helper()
	if testing.Short() {
		t.Skip("envtest: not with -short")
	}
	dir, _, err := controlplane.ResolveBinDir("")
	if err != nil {
		t.Skip("no control-plane binaries:", err)
	}
	tg, err := Start(context.Background(), Spec{Name: name, BinDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.Close(); err != nil {
			t.Error(err)
		}
	})
	return tg
}

func parseTrace(t *testing.T, text string) *traces.Trace {
	t.Helper()
	tr, err := traces.Parse("inline.trace", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// dumpLine is the driver's dump line of key.
func dumpLine(t *testing.T, ctx context.Context, d *driver.Driver, key string) string {
	t.Helper()
	lines, err := d.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, key+" ") {
			return l
		}
	}
	t.Fatalf("no dump line for %s in %q", key, lines)
	return ""
}

// holding starts a driver for tr on tg and holds its objects' traffic.
func holding(t *testing.T, ctx context.Context, tg *Target, tr *traces.Trace) (upstreamStepped, *driver.Driver) {
	t.Helper()
	d, err := driver.New(tg.Admin, tg.Limited, "cascade-"+driver.NewRunID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Cleanup(context.Background()) })
	if err := d.EnsureNamespaces(ctx, traceNamespaces(tr)); err != nil {
		t.Fatal(err)
	}
	u, err := tg.holdFor(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.stepper.Hold(false) })
	return u, d
}

// On upstream-stepped the workload controllers run in a kube-controller-
// manager of their own, whose watch events, recheck GET and adoption
// PATCH the proxy holds apart from the GC's: handing the Deployment
// controller its events hands the GC none, the controller's recheck GET
// of the Deployment waits at the proxy, and only once it is answered does
// its PATCH of the ReplicaSet come, held in turn; the ReplicaSet is
// adopted when, and only when, that PATCH is released.
func TestControllerStepsHoldAndReleaseTheWorkloadControllersIO(t *testing.T) {
	tr := parseTrace(t, `create deploy/web selector=app=web
create rs/web-1 labels=app=web
controller adopt rs/web-1 by=deploy/web
----
deploy/web live selector=app=web
rs/web-1 live owners=[deploy/web controller block] labels=app=web
`)
	tg := startUpstreamStepped(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmds := tr.Stanzas[0].Commands
	u, d := holding(t, ctx, tg, tr)
	for _, c := range cmds[:2] {
		if _, err := d.Do(ctx, c.Step, nil); err != nil {
			t.Fatal(err)
		}
	}
	adopt := cmds[2].Step
	rs, err := u.object(adopt)
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := u.owner(adopt)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []object{deploy, rs} {
		if err := u.st.ReleaseControllerEvent(ctx, StepBound, o.group, o.resource, o.ns, o.name); err != nil {
			t.Fatalf("hand the workload controllers the ADDED event of %s: %v", o, err)
		}
	}
	// the GC's informers are streams of their own: their events are held
	// still. An event may reach the proxy's GC stream after the
	// controllers' (each watch gets it from kube-apiserver on its own), so
	// the test waits for it to be held; one handed on would never be.
	for _, o := range []object{deploy, rs} {
		want := "shared-informers/" + o.resource + "." + o.group + " ADDED " + o.String()
		deadline := time.Now().Add(StepBound)
		for !slices.Contains(u.st.HeldEvents(), want) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !slices.Contains(u.st.HeldEvents(), want) {
			t.Errorf("the GC's ADDED event of %s was not held within %s (handed on with the controllers'?): held %q", o, StepBound, u.st.HeldEvents())
		}
	}

	get, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return deploy.isController(r, proxy.VerbGet) })
	if err != nil || !ok {
		t.Fatalf("no recheck GET of %s held (%v): held %q", deploy, err, u.st.HeldRequests())
	}
	if get.Client != "deployment-controller" || get.Process != proxy.WorkloadsProcess {
		t.Errorf("the recheck GET came from %s of process %q, want deployment-controller of %q", get.Client, get.Process, proxy.WorkloadsProcess)
	}
	isPatch := func(r proxy.Request) bool { return rs.isController(r, proxy.VerbPatch) }
	if r, held, _ := u.st.WaitRequest(ctx, QuietWindow, isPatch); held {
		t.Fatalf("%s held before the recheck GET was answered", proxy.DescribeRequest(r))
	}
	if a, err := u.st.Release(ctx, StepBound, get.ID); err != nil || a.Code != 200 || a.Deleting {
		t.Fatalf("the recheck GET: %d (deleting %v), %v; want 200 of a live Deployment", a.Code, a.Deleting, err)
	}
	patch, ok, err := u.st.WaitRequest(ctx, StepBound, isPatch)
	if err != nil || !ok {
		t.Fatalf("no adoption PATCH of %s held after the recheck (%v): held %q", rs, err, u.st.HeldRequests())
	}
	if l := dumpLine(t, ctx, d, "rs/web-1"); strings.Contains(l, "owners=") {
		t.Fatalf("adopted while the PATCH is held: %s", l)
	}
	if a, err := u.st.Release(ctx, StepBound, patch.ID); err != nil || a.Code != 200 {
		t.Fatalf("the adoption PATCH: %d %s, %v", a.Code, a.Reason, err)
	}
	if l := dumpLine(t, ctx, d, "rs/web-1"); !strings.Contains(l, "owners=[deploy/web controller block]") {
		t.Fatalf("after the PATCH: %s, want the Deployment's controller reference", l)
	}
}

// The orphan-adoption interleaving on the real controllers: the GC has
// orphaned the ReplicaSet and the Deployment is gone, but the Deployment
// controller's cache still shows it live; its recheck GET finds it gone
// (404), so it sends no PATCH and the ReplicaSet stays an orphan. The
// controller steps of race/orphan-adoption-fixed map onto that IO, and
// the replay agrees with the trace.
func TestOrphanAdoptionFixedOnTheRealControllers(t *testing.T) {
	tg := startUpstreamStepped(t)
	ctx := context.Background()
	tr := embedded(t, "race/orphan-adoption-fixed")
	tg.Proxy.Take()
	outs, skip, err := tg.ReplayTrace(ctx, tr)
	if skip != "" || err != nil {
		t.Fatalf("skip %q, err %v", skip, err)
	}
	if err := replay.Diff(tr, UpstreamStepped, outs); err != nil {
		t.Fatal(err)
	}
	var gets, patches []proxy.Request
	for _, r := range tg.Proxy.Take().Requests {
		if r.Process != proxy.WorkloadsProcess {
			continue
		}
		switch {
		case r.Verb == proxy.VerbGet && r.Resource == "deployments":
			gets = append(gets, r)
		case r.Verb == proxy.VerbPatch && r.Resource == "replicasets":
			patches = append(patches, r)
		}
	}
	if len(gets) == 0 || gets[0].Code != 404 || gets[0].Client != "deployment-controller" {
		t.Fatalf("the Deployment controller's recheck GETs: %+v, want the first answered 404", gets)
	}
	if len(patches) > 0 {
		t.Fatalf("the workload controllers patched the ReplicaSet: %+v", patches)
	}
}

// Every trace with a controller step now runs on upstream-stepped or is
// skipped for a reason other than its controller steps (a bug switch the
// real binary lacks, a ReplicaSet that the real controller would scale).
func TestUpstreamSteppedTakesControllerSteps(t *testing.T) {
	all, err := traces.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, tr := range all {
		if !anyCommand(tr, func(c traces.Command) bool { return !c.Settle && c.Step.Actor == model.ActorController }) {
			continue
		}
		why := SpecSkip(Spec{Name: UpstreamStepped}, tr)
		if strings.Contains(why, "controller") && strings.Contains(why, "cannot be produced") {
			t.Errorf("%s: %s", tr.Path, why)
		}
		if why == "" {
			runs++
		}
	}
	if runs == 0 {
		t.Error("no trace with a controller step runs on upstream-stepped")
	}
}
