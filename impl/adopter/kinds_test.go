package adopter

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func obj(kind, ns, name string, uid types.UID, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(uid)
	return u
}

func withLabels(u *unstructured.Unstructured, kv ...string) *unstructured.Unstructured {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	u.SetLabels(l)
	return u
}

func ownedBy(u *unstructured.Unstructured, owner *unstructured.Unstructured, controller bool) *unstructured.Unstructured {
	u.SetOwnerReferences(append(u.GetOwnerReferences(), metav1.OwnerReference{Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(controller)}))
	return u
}

func deleting(u *unstructured.Unstructured) *unstructured.Unstructured {
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	return u
}

// TestDecide: ClaimObject's decision for each owner kind, with the
// ReplicaSet-like kinds claiming active Pods only (FilterActivePods).
func TestDecide(t *testing.T) {
	sel := func(m map[string]any) map[string]any { return map[string]any{"spec": map[string]any{"selector": m}} }
	rs := obj("ReplicaSet", "ns", "web", "rs-uid", sel(map[string]any{"matchLabels": map[string]any{"app": "web"}}))
	rsExpr := obj("ReplicaSet", "ns", "expr", "expr-uid", sel(map[string]any{"matchExpressions": []any{
		map[string]any{"key": "app", "operator": "In", "values": []any{"web", "api"}}}}))
	rc := obj("ReplicationController", "ns", "db", "rc-uid", sel(map[string]any{"app": "db"}))
	herdNoSel := obj("Herd", "ns", "none", "herd-uid", nil)
	deploy := obj("Deployment", "ns", "web", "deploy-uid", sel(map[string]any{"matchLabels": map[string]any{"app": "web"}}))
	emptyDeploy := obj("Deployment", "ns", "all", "all-uid", sel(map[string]any{}))
	rsGone := deleting(obj("ReplicaSet", "ns", "gone", "gone-uid", sel(map[string]any{"matchLabels": map[string]any{"app": "web"}})))
	other := obj("ReplicaSet", "ns", "other", "other-uid", nil)

	pod := func(name string, kv ...string) *unstructured.Unstructured {
		return withLabels(obj("Pod", "ns", name, types.UID(name+"-uid"), nil), kv...)
	}
	cases := []struct {
		name       string
		kind       string
		owner, dep *unstructured.Unstructured
		want       action
	}{
		{"orphan matching", "ReplicaSet", rs, pod("a", "app", "web"), adoptIt},
		{"orphan not matching", "ReplicaSet", rs, pod("a", "app", "db"), none},
		{"orphan in another namespace", "ReplicaSet", rs, withLabels(obj("Pod", "other", "a", "a-uid", nil), "app", "web"), none},
		{"orphan being deleted", "ReplicaSet", rs, deleting(pod("a", "app", "web")), none},
		{"orphan terminal", "ReplicaSet", rs, withLabels(obj("Pod", "ns", "a", "a-uid", map[string]any{"status": map[string]any{"phase": "Succeeded"}}), "app", "web"), none},
		{"owner being deleted adopts nothing", "ReplicaSet", rsGone, pod("a", "app", "web"), none},
		{"matchExpressions", "ReplicaSet", rsExpr, pod("a", "app", "api"), adoptIt},
		{"rc map selector", "ReplicationController", rc, pod("a", "app", "db"), adoptIt},
		{"no selector selects nothing", "Herd", herdNoSel, pod("a"), none},
		{"empty deployment selector selects nothing", "Deployment", emptyDeploy, withLabels(obj("ReplicaSet", "ns", "r", "r-uid", nil), "app", "web"), none},
		{"deployment adopts a ReplicaSet", "Deployment", deploy, withLabels(obj("ReplicaSet", "ns", "r", "r-uid", nil), "app", "web"), adoptIt},
		{"owned, still matching", "ReplicaSet", rs, ownedBy(pod("a", "app", "web"), rs, true), none},
		{"owned, no longer matching", "ReplicaSet", rs, ownedBy(pod("a", "app", "db"), rs, true), releaseIt},
		{"owned, no longer matching, owner being deleted", "ReplicaSet", rsGone, ownedBy(pod("a", "app", "db"), rsGone, true), none},
		// FilterActivePods comes before ClaimPods: a Pod being deleted is
		// not released (the model releases it)
		{"owned pod being deleted, no longer matching", "ReplicaSet", rs, deleting(ownedBy(pod("a", "app", "db"), rs, true)), none},
		// ClaimReplicaSets has no such filter
		{"owned ReplicaSet being deleted, no longer matching", "Deployment", deploy, deleting(ownedBy(withLabels(obj("ReplicaSet", "ns", "r", "r-uid", nil), "app", "db"), deploy, true)), releaseIt},
		{"controlled by another", "ReplicaSet", rs, ownedBy(pod("a", "app", "db"), other, true), none},
		{"a non-controller reference to the owner is an orphan", "ReplicaSet", rs, ownedBy(pod("a", "app", "web"), rs, false), adoptIt},
	}
	for _, c := range cases {
		if got := workloads[c.kind].decide(c.owner, c.dep); got != c.want {
			t.Errorf("%s: decide = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestParseKinds(t *testing.T) {
	ws, err := parseKinds(nil)
	if err != nil || len(ws) != 1 || ws[0].owner.Kind != "Herd" || ws[0].dep.Kind != "Pod" {
		t.Fatalf("default: %+v %v", ws, err)
	}
	ws, err = parseKinds([]string{"Deployment", "ReplicaSet", "Deployment"})
	if err != nil || len(ws) != 2 || ws[0].dep.Kind != "ReplicaSet" || ws[1].dep.Kind != "Pod" {
		t.Fatalf("deploy, rs: %+v %v", ws, err)
	}
	if _, err := parseKinds([]string{"Job"}); err == nil || err.Error() != `adopter: cannot manage kind "Job" (can: Herd, ReplicaSet, ReplicationController, Deployment)` {
		t.Fatalf("Job: %v", err)
	}
}
