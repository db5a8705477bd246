package render

import (
	"slices"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// TestFindRace: the page marks the step that violates the trace's
// property and the step that made it possible: the stale adoption in
// orphan-adoption, the user's write between the GC's decision and its
// DELETE in kubernetes#114603, the lost update in lost-first-update, the
// poisoned absent-owner cache in uid-only-identity. A trace that violates
// nothing marks nothing.
func TestFindRace(t *testing.T) {
	for _, c := range []struct {
		path                string
		violating, enabling string // the marked steps' commands; "" for none
		property            string
	}{
		{"../races/orphan-adoption.trace", "gc delete rs/web-1", "controller adopt rs/web-1 by=deploy/web", "orphan respected"},
		{"../counterexamples/adopt-without-recheck.trace", "gc delete rs/web-1", "controller adopt rs/web-1 by=deploy/web", "orphan respected"},
		{"../races/kubernetes-114603.trace", "gc delete cm/proxy", "add-owner cm/proxy cm/v19", "no solid owner collected"},
		{"../counterexamples/lost-first-update.trace", "controller deliver rs/web", "gc lose rs/web", "no GC finalizer is stuck"},
		{"../races/uid-only-identity.trace", "gc delete secret/ns2/good", "gc attemptToDelete cm/ns1/parent", "no solid owner collected"},
		{"../races/orphan-adoption-fixed.trace", "", "", ""},
	} {
		t.Run(c.path, func(t *testing.T) {
			tr, fs := frames(t, c.path)
			r := FindRace(tr, fs)
			cmd := func(i int) string {
				if i < 0 {
					return ""
				}
				return fs[i].Command
			}
			if cmd(r.Violating) != c.violating || cmd(r.Enabling) != c.enabling || r.Property != c.property {
				t.Errorf("marked violating %d %q, enabling %d %q (%q); want %q, %q (%q)", r.Violating, cmd(r.Violating), r.Enabling, cmd(r.Enabling), r.Property, c.violating, c.enabling, c.property)
			}
			if r.Violating >= 0 && !slices.ContainsFunc(fs[r.Violating].Violations, func(v *model.Violation) bool { return v.Property == c.property }) {
				t.Errorf("step %d does not violate %q", r.Violating, c.property)
			}
			if r.Enabling >= r.Violating && r.Enabling >= 0 {
				t.Errorf("enabling step %d is not before violating step %d", r.Enabling, r.Violating)
			}
		})
	}
}

// TestLanes: one lane per actor that took a step, clients first, then
// the controllers' informers and each controller, then the GC's informers
// and workers; a GC write sits in the lane of the worker that decided it.
func TestLanes(t *testing.T) {
	_, fs := frames(t, "../races/orphan-adoption.trace")
	names, of := lanes(fs)
	want := []string{"client", "controller informers", "Deployment controller", "GC informers (graph builder)", "GC worker: attemptToOrphan", "GC worker: attemptToDelete"}
	if !slices.Equal(names, want) {
		t.Fatalf("lanes %q, want %q", names, want)
	}
	for i, f := range fs {
		var lane string
		if of[i] >= 0 {
			lane = names[of[i]]
		}
		wantLane := map[string]string{
			"(initial state)":                         "",
			"delete deploy/web propagation=Orphan":    "client",
			"controller adopt rs/web-1 by=deploy/web": "Deployment controller",
			"controller deliver rs/web-1":             "controller informers",
			"gc attemptToOrphan deploy/web":           "GC worker: attemptToOrphan",
			"gc deliver-virtual deploy/web":           "GC informers (graph builder)",
			"gc delete rs/web-1":                      "GC worker: attemptToDelete",
		}
		if w, ok := wantLane[f.Command]; ok && lane != w {
			t.Errorf("step %d %q in lane %q, want %q", i, f.Command, lane, w)
		}
	}
}
