package fuzz

import (
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// The GC's watch of Deployments broke (a kube-apiserver restart) while a
// client deleted deployment/c and created a new c; the informer's relist
// handed the new c on as an update from the old one, without a delete,
// and the graph kept the old c's node: rs/d, whose owner is gone, was
// never collected (cascade fuzz --target impl --restart-apiserver 3s
// --seed 2, run 6). Only evidence of that excuses the stuck garbage.

// relistRun is that run's quiet state: rs/d names the old c, a new c is
// live.
func relistRun(t *testing.T) []realObject {
	c := realObj(t, "deploy", "c", "uid-c-new", nil)
	d := realObj(t, "rs", "d", "uid-d", ownedBy("Deployment", "c", "uid-c-old", true))
	return []realObject{c, d}
}

// TestLivenessRelistReplacedOwner: impl's recorded graph changes show the
// relist's update from the old c to the new one and no removal of the
// old c's node; the stuck rs/d is then the known race relist-uid-change,
// named, and the run passes.
func TestLivenessRelistReplacedOwner(t *testing.T) {
	changes := []history.GraphChange{
		{UID: "uid-c-old", RV: 10}, {UID: "uid-d", RV: 11},
		{UID: "uid-c-new", RV: 20, Replaced: "uid-c-old"},
	}
	v, known := checkLiveness(relistRun(t), staleFromGraph(changes), model.Release{})
	if v != nil {
		t.Fatalf("the graph changes show the relist's replacement, yet: %v", v)
	}
	if len(known) != 1 || known[0].Known != model.KnownRelistUIDChange || !strings.Contains(known[0].Message, "rs/"+testPrefix+"-default/d") {
		t.Fatalf("want rs/d's stuck garbage named %s, got %v", model.KnownRelistUIDChange, known)
	}
}

// TestLivenessRelistNeedsEvidence: without evidence of a replacement
// (no graph changes; an ordinary update; the old node removed after
// all), the same state fails liveness: the window alone excuses nothing.
func TestLivenessRelistNeedsEvidence(t *testing.T) {
	for name, changes := range map[string][]history.GraphChange{
		"none":    nil,
		"update":  {{UID: "uid-c-old", RV: 10}, {UID: "uid-c-new", RV: 20}},
		"removed": {{UID: "uid-c-new", RV: 20, Replaced: "uid-c-old"}, {UID: "uid-c-old", RV: 21, Deleted: true}},
	} {
		v, known := checkLiveness(relistRun(t), staleFromGraph(changes), model.Release{})
		if v == nil || v.Property != model.PropGarbageCollected || len(known) != 0 {
			t.Errorf("%s: want garbage is collected violated, unexcused; got %v (known %v)", name, v, known)
		}
	}
}

// auditRec is an audited request of the run's namespace at second sec.
func auditRec(sec int, verb, resource, name, ua, uri string, code int, uid string) controlplane.AuditRecord {
	rec := controlplane.AuditRecord{Stage: controlplane.StageResponseComplete, Verb: verb, APIGroup: "apps", Resource: resource,
		Namespace: testPrefix + "-default", Name: name, UserAgent: ua, RequestURI: uri, Code: code,
		RequestReceived: time.Unix(1000+int64(sec), 0)}
	if uid != "" {
		rec.ResponseObject = []byte(`{"metadata":{"name":"` + name + `","uid":"` + uid + `"}}`)
	}
	return rec
}

// relistAudit is the audit log of seed 2's run 6, cut to what matters:
// deployment c created (uid-c-old), kube-apiserver restarting at second
// 10, c deleted and created again (uid-c-new) at 12 and 13, and the GC's
// informer relisting Deployments at relistAt.
func relistAudit(relistAt int, relistURI string) []controlplane.AuditRecord {
	const client = history.DriverUserAgentPrefix + "1"
	return []controlplane.AuditRecord{
		auditRec(1, "create", "deployments", "c", client, "/apis/apps/v1/namespaces/x/deployments", 201, "uid-c-old"),
		auditRec(12, "delete", "deployments", "c", client, "/apis/apps/v1/namespaces/x/deployments/c", 200, ""),
		auditRec(13, "create", "deployments", "c", client, "/apis/apps/v1/namespaces/x/deployments", 201, "uid-c-new"),
		auditRec(relistAt, "watch", "deployments", "", history.ImplGCUserAgent, relistURI, 200, ""),
	}
}

// TestLivenessRelistFromAudit: the audit log shows deployment c deleted
// and created with a new UID after a kube-apiserver restart broke the
// GC's watches and before its informer relisted Deployments; rs/d's
// stuck garbage is then the known race relist-uid-change, named.
func TestLivenessRelistFromAudit(t *testing.T) {
	stale := staleFromAudit(relistAudit(15, "/apis/apps/v1/deployments?sendInitialEvents=true&watch=true"), []time.Time{time.Unix(1010, 0)})
	v, known := checkLiveness(relistRun(t), stale, model.Release{})
	if v != nil {
		t.Fatalf("the audit log shows the name taken over within the relist's gap, yet: %v", v)
	}
	if len(known) != 1 || known[0].Known != model.KnownRelistUIDChange {
		t.Fatalf("want rs/d's stuck garbage named %s, got %v", model.KnownRelistUIDChange, known)
	}
}

// TestLivenessRelistFromAuditNeedsTheGap: the same deletes and creates
// are no evidence without a restart before them, when the informer
// relisted before the create, or resumed its watch without a relist
// (its watch then delivered the delete).
func TestLivenessRelistFromAuditNeedsTheGap(t *testing.T) {
	const relist = "/apis/apps/v1/deployments?sendInitialEvents=true&watch=true"
	for name, c := range map[string]struct {
		recs   []controlplane.AuditRecord
		breaks []time.Time
	}{
		"no restart":            {relistAudit(15, relist), nil},
		"restart after":         {relistAudit(15, relist), []time.Time{time.Unix(1014, 0)}},
		"relisted before":       {relistAudit(11, relist), []time.Time{time.Unix(1010, 0)}},
		"watch resumed instead": {relistAudit(11, "/apis/apps/v1/deployments?resourceVersion=5&watch=true"), []time.Time{time.Unix(1010, 0)}},
	} {
		v, known := checkLiveness(relistRun(t), staleFromAudit(c.recs, c.breaks), model.Release{})
		if v == nil || v.Property != model.PropGarbageCollected || len(known) != 0 {
			t.Errorf("%s: want garbage is collected violated, unexcused; got %v (known %v)", name, v, known)
		}
	}
}
