package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// TestForegroundUnobservedOnGraphChanges: kubernetes#26120 (lin gcPatch,
// foreground) on an in-process GC, whose recorded graph changes say when
// its graph held each version, with its requests read from the audit
// log (history.GCRequestsFromAudit). A secret referencing rs c as a
// blocking owner is created three seconds before c's Foreground
// deletion, far outside the race window; the GC GETs c
// (attemptToDeleteItem's), reads c's blocking dependents from its graph,
// GETs c again (removeFinalizer's) and removes foregroundDeletion. Only
// the graph's record tells a GC that ignored a dependent it had from one
// whose informer lagged (after an API server restart the secrets
// informer's relist can come tens of seconds later: found by
// harness/fuzz.TestConcurrentSurvivesAPIServerRestart, seed 6, run 3,
// which the window alone failed).
func TestForegroundUnobservedOnGraphChanges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		graph func(b *builder, d history.Key) // the secret's graph changes
		known bool
	}{
		// in the graph long before the worker read it
		{"applied before the deletion", func(b *builder, d history.Key) { b.applied(d, 40*ms) }, false},
		// applied between the GC's two GETs of c: the worker may have
		// read its graph before
		{"applied between the GC's two GETs", func(b *builder, d history.Key) { b.applied(d, 3027*ms) }, true},
		// the informer lagged past the patch
		{"applied after the patch", func(b *builder, d history.Key) { b.applied(d, 3050*ms) }, true},
		// never applied (the run ended first)
		{"never applied", func(*builder, history.Key) {}, true},
		// applied, then the GC restarted with an empty graph and had not
		// listed the secret again when it decided
		{"applied before a restart only", func(b *builder, d history.Key) {
			b.applied(d, 40*ms)
			b.graph = append(b.graph, history.GraphChange{Reset: true, At: 2000 * ms})
		}, true},
		// applied again by the restarted GC before the worker read
		{"applied again after a restart", func(b *builder, d history.Key) {
			b.applied(d, 40*ms)
			b.graph = append(b.graph, history.GraphChange{Reset: true, At: 2000 * ms})
			b.applied(d, 2500*ms)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			c, d := key("rs", "c"), key("secret", "d")
			b.create("client-0", c, 0, 10*ms, nil)
			b.applied(c, 11*ms)
			b.create("client-1", d, 20*ms, 30*ms, nil, b.ref(c, true, false))
			tc.graph(b, d)
			b.del("client-0", c, 3000*ms, 3010*ms, "Foreground")
			b.applied(c, 3011*ms)
			b.get("gc", c, 3020*ms, 3025*ms)
			b.requested("gc", "get", c, 3020*ms, 3025*ms)
			b.get("gc", c, 3030*ms, 3035*ms)
			b.requested("gc", "get", c, 3030*ms, 3035*ms)
			b.requested("gc", "patch", c, 3040*ms, 3045*ms)
			gc := b.write("gc", c, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerForeground))
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownUnobservedDependent)
				expectBasis(t, r, basisGraph)
				return
			}
			expectIllegal(t, r, gc, model.PropForegroundWaits, "recorded graph changes show its graph had secret/ns/d's reference")
		})
	}
}

// TestOrphanUnobservedOnGraphChanges: kubernetes#26120 (lin gcPatch,
// orphan) on an in-process GC. attemptToOrphan takes the owner's
// dependents once the graph builder has applied the owner's event
// carrying the orphan finalizer (orphanEventApplied), then patches each
// dependent and only then GETs the owner (removeFinalizer), so a
// reference the graph applied between the owner's event and that GET
// may have been missed, and one applied before the owner's event was
// not. The pod is created three seconds before the deletion, outside
// the race window.
func TestOrphanUnobservedOnGraphChanges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		podAt int64 // the pod's graph change, ms; 0: none
		known bool
	}{
		{"applied before the owner's event", 40, false},
		{"applied after the owner's event, before the GC's GET", 3015, true},
		{"applied after the patch", 3050, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			o, p := key("cm", "owner"), key("pod", "p")
			b.create("client-0", o, 0, 10*ms, nil)
			b.applied(o, 11*ms)
			b.create("client-1", p, 20*ms, 30*ms, nil, b.ref(o, false, false))
			b.del("client-0", o, 3000*ms, 3010*ms, "Orphan")
			if tc.podAt < 3011 {
				b.applied(p, tc.podAt*ms)
			}
			b.applied(o, 3011*ms)
			if tc.podAt >= 3011 {
				b.applied(p, tc.podAt*ms)
			}
			b.get("gc", o, 3030*ms, 3035*ms)
			b.requested("gc", "get", o, 3030*ms, 3035*ms)
			b.requested("gc", "patch", o, 3040*ms, 3045*ms)
			gc := b.write("gc", o, 3040*ms, 3045*ms, withoutFinalizer(model.FinalizerOrphan))
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownUnobservedDependent)
				expectBasis(t, r, basisGraph)
				return
			}
			expectIllegal(t, r, gc, model.PropOrphanRespected, "recorded graph changes show its graph had pod/ns/p's reference")
		})
	}
}

// TestVirtualNamespaceOnGraphChanges: model.KnownVirtualNamespace (lin
// borrowedNamespace) on an in-process GC, TestVirtualNamespaceOnDeliveries'
// timeline with the GC's graph changes for the delivery record: the GC
// held pv a as a virtual node in secret c's namespace only if its graph
// had applied no event of a before it decided (its GET of a).
func TestVirtualNamespaceOnGraphChanges(t *testing.T) { virtualNamespaceOn(t, onGraph) }

// TestUnblockPutsBackReferenceOnGraphChanges: model.KnownStaleGraph (lin
// unblockedFromGraph) on an in-process GC: the unblock patch lists the
// graph's references, so it can put back one a client removed only if
// the graph had not applied the version without it when the patch was
// sent.
func TestUnblockPutsBackReferenceOnGraphChanges(t *testing.T) {
	unblockPutsBackReferenceOn(t, onGraph, "graph had the version without it")
}

// TestOrphanSwitchedOnGraphChanges: kubernetes#32339 in gcPatch's
// attemptToOrphan sites on an in-process GC. o's orphan deletion is
// switched (to Foreground, which takes the orphan finalizer off; to
// Background, which leaves o solid while cascade.dev/hold keeps it) before
// the GC's orphaning patch of o's dependent lands. attemptToOrphan began
// only if the GC's graph had applied o's orphaning version before the
// patch was sent; the race window is not consulted.
func TestOrphanSwitchedOnGraphChanges(t *testing.T) {
	for _, policy := range []string{"Foreground", "Background"} {
		for _, tc := range []struct {
			name     string
			orphanAt int64 // o's orphaning version applied to the graph, ms; 0: never
			known    bool
		}{
			{"applied before the patch", 27, true},
			{"applied after the patch", 50, false},
			{"never applied", 0, false},
		} {
			t.Run(policy+"/"+tc.name, func(t *testing.T) {
				b := newBuilder(t)
				o, d := key("rc", "o"), key("pv", "vol")
				b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
				b.applied(o, 11*ms)
				b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
				b.applied(d, 21*ms)
				b.del("client-0", o, 21*ms, 25*ms, "Orphan")
				if tc.orphanAt != 0 {
					b.applied(o, tc.orphanAt*ms)
				}
				b.del("client-1", o, 26*ms, 30*ms, policy)
				gc := b.write("gc", d, 40*ms, 45*ms, withRefs())
				r := b.check()
				if tc.known {
					expectKnown(t, r, gc, model.KnownPolicySwitch)
					expectBasis(t, r, basisGraph)
					return
				}
				expectIllegal(t, r, gc, "gc removed")
			})
		}
	}
}
