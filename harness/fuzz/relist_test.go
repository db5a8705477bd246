package fuzz

import (
	"strings"
	"testing"

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
	v, known := checkLiveness(relistRun(t), staleFromGraph(changes))
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
		v, known := checkLiveness(relistRun(t), staleFromGraph(changes))
		if v == nil || v.Property != model.PropGarbageCollected || len(known) != 0 {
			t.Errorf("%s: want garbage is collected violated, unexcused; got %v (known %v)", name, v, known)
		}
	}
}
