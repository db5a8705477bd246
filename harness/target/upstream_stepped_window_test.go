package target

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/proxy"
)

// The orphan-adoption race on the real controllers, in the window that
// kubernetes#42938's recheck leaves: the Deployment controller's recheck
// GET finds the Deployment live, then, before its adoption PATCH reaches
// kube-apiserver, a client deletes the Deployment with Orphan and the GC
// orphans (it has no dependent to orphan: the ReplicaSet is not adopted
// yet) and lets the Deployment go. The PATCH then adopts the ReplicaSet
// for a Deployment that is gone, and the GC deletes it as garbage
// although orphaning was requested. The model's `controller adopt` takes
// the recheck and the PATCH in one step, so no trace can name this
// interleaving; the real controller sends them as two requests, and the
// proxy holds the window open between them.
func TestAdoptionAfterTheRecheckOutlivesAnOrphanDeletion(t *testing.T) {
	tr := parseTrace(t, `create deploy/web selector=app=web
create rs/web-1 labels=app=web
delete deploy/web propagation=Orphan
gc attemptToOrphan deploy/web
controller adopt rs/web-1 by=deploy/web
----
rs/web-1 gone
`)
	cmds := tr.Stanzas[0].Commands
	tg := startUpstreamStepped(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u, d := holding(t, ctx, tg, tr)
	do := func(i int) {
		t.Helper()
		if r, err := d.Do(ctx, cmds[i].Step, nil); err != nil || !r.OK() {
			t.Fatalf("%s: %v %v", cmds[i].Text, r, err)
		}
	}
	do(0)
	do(1)
	adopt := cmds[4].Step
	rs, err := u.object(adopt)
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := u.owner(adopt)
	if err != nil {
		t.Fatal(err)
	}
	// both processes see both objects
	for _, o := range []object{deploy, rs} {
		if err := u.st.ReleaseControllerEvent(ctx, StepBound, o.group, o.resource, o.ns, o.name); err != nil {
			t.Fatal(err)
		}
		if err := u.st.ReleaseEvent(ctx, StepBound, o.group, o.resource, o.ns, o.name); err != nil {
			t.Fatal(err)
		}
	}
	// the recheck finds the Deployment live; the adoption PATCH is held
	get, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return deploy.isController(r, proxy.VerbGet) })
	if err != nil || !ok {
		t.Fatalf("no recheck GET of %s (%v): held %q", deploy, err, u.st.HeldRequests())
	}
	if a, err := u.st.Release(ctx, StepBound, get.ID); err != nil || a.Code != 200 || a.Deleting {
		t.Fatalf("the recheck GET: %d (deleting %v), %v", a.Code, a.Deleting, err)
	}
	patch, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return rs.isController(r, proxy.VerbPatch) })
	if err != nil || !ok {
		t.Fatalf("no adoption PATCH of %s held (%v): held %q", rs, err, u.st.HeldRequests())
	}
	// in the window: the orphan deletion, the GC's orphaning
	do(2)
	if err := u.st.ReleaseEvent(ctx, StepBound, deploy.group, deploy.resource, deploy.ns, deploy.name); err != nil {
		t.Fatal(err)
	}
	if err := u.attemptToOrphan(ctx, deploy, d.RealUID("deploy/web"), nil, true); err != nil {
		t.Fatal(err)
	}
	if l := dumpLine(t, ctx, d, "deploy/web"); l != "deploy/web gone" {
		t.Fatalf("after the GC's orphaning: %s, want it gone", l)
	}
	// the adoption lands on a ReplicaSet whose Deployment is gone
	if a, err := u.st.Release(ctx, StepBound, patch.ID); err != nil || a.Code != 200 {
		t.Fatalf("the adoption PATCH: %d %s, %v", a.Code, a.Reason, err)
	}
	if l := dumpLine(t, ctx, d, "rs/web-1"); !strings.Contains(l, "owners=[deploy/web controller block]") {
		t.Fatalf("after the PATCH: %s, want adopted by the gone Deployment", l)
	}
	if err := u.Settle(ctx, d); err != nil {
		t.Fatal(err)
	}
	if l := dumpLine(t, ctx, d, "rs/web-1"); l != "rs/web-1 gone" {
		t.Fatalf("after settling: %s, want the ReplicaSet deleted as garbage", l)
	}
}
