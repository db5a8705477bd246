package check

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

func run(t *testing.T, s Scope) *Result {
	t.Helper()
	res, err := Run(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func withSymmetry(name string, bugs model.BugSet) Scope {
	p, err := Preset(name)
	if err != nil {
		panic(err)
	}
	p.Symmetry, p.Bugs = true, bugs
	return p
}

// TestEveryBugHasACounterexample: each catalogued bug, switched on in its
// preset, yields a shortest counterexample to the property it is
// documented to break, and that counterexample is a trace that replays on
// the model with the violation. The lengths are pinned: BFS makes them
// minimal, so a change means the model changed.
func TestEveryBugHasACounterexample(t *testing.T) {
	wantSteps := map[model.Bug]int{
		model.BugAdoptWithoutRecheck:           8,
		model.BugEdgeTriggeredTransitions:      6,
		model.BugLostFirstUpdate:               3,
		model.BugLookupIgnoresScope:            5,
		model.BugUIDOnlyIdentity:               8,
		model.BugDeleteWithoutRVPrecondition:   5,
		model.BugNoCycleUnblock:                5,
		model.BugDeleteDependentsWithoutPolicy: 4,
		model.BugForgetUnobservedVirtual:       5,
		model.BugProtectionDisabled:            1,
		model.BugFinalizerAfterDeletion:        2,
	}
	for _, b := range model.AllBugs() {
		t.Run(b.String(), func(t *testing.T) {
			preset, ok := BugPreset[b]
			if !ok {
				t.Fatalf("bug %s has no preset", b)
			}
			res := run(t, withSymmetry(preset, model.BugSet(0).With(b)))
			var ce *Counterexample
			for _, v := range res.Violations {
				if v.Property == model.Bugs[b].Breaks {
					ce = v
				}
			}
			if ce == nil {
				t.Fatalf("no counterexample to %q in preset %s", model.Bugs[b].Breaks, preset)
			}
			if ce.Known != "" {
				t.Errorf("a bug's counterexample must not be classified as a known upstream race (%s)", ce.Known)
			}
			if len(ce.Steps) != wantSteps[b] {
				t.Errorf("counterexample has %d steps, pinned %d:\n%s", len(ce.Steps), wantSteps[b], ce.Trace)
			}
			tr, err := traces.Parse("ce.trace", strings.NewReader(ce.Trace))
			if err != nil {
				t.Fatal(err)
			}
			results, _, err := traces.Replay(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := traces.Diff(tr, results); err != nil {
				t.Fatal(err)
			}
			if err := traces.CheckHeaders(tr, results); err != nil {
				t.Fatal(err)
			}
			if tr.Header(traces.HeaderBug) != b.String() || !strings.Contains(tr.Header(traces.HeaderFoundBy), "--bug "+b.String()) {
				t.Errorf("trace headers do not name the bug: %q / %q", tr.Header(traces.HeaderBug), tr.Header(traces.HeaderFoundBy))
			}
		})
	}
}

// TestCounterexamplesAreShortest: cutting the search one level short of
// the pinned length finds no violation of that property.
func TestCounterexamplesAreShortest(t *testing.T) {
	s := withSymmetry("orphan-adoption", model.BugSet(0).With(model.BugAdoptWithoutRecheck))
	s.MaxDepth = 7
	res := run(t, s)
	for _, v := range res.Violations {
		if v.Property == model.PropOrphanRespected {
			t.Fatalf("found a %d-step counterexample below the pinned minimum of 8", len(v.Steps))
		}
	}
	if res.Complete {
		t.Fatal("a depth-bounded search must report itself incomplete")
	}
}

// TestUpstreamHolds: in upstream mode every safety and liveness property
// holds in every preset, except the documented upstream races, which are
// found and reported as known; every expected reachability property is
// witnessed, so no preset is vacuous. all-policies finds two: a DELETE
// switching a foreground deletion to orphan after the GC decided to
// delete the dependent (orphan respected), and a Background DELETE
// ending it so (no solid owner collected: the owner, still held by its
// finalizer, is solid for classifyReferences when the GC's DELETE lands).
func TestUpstreamHolds(t *testing.T) {
	known := map[string][]string{
		"orphan-unseen": {"kubernetes#26120"},
		"all-policies":  {"kubernetes#32339", model.KnownForegroundEnded},
	}
	for _, p := range Presets {
		t.Run(p.Name, func(t *testing.T) {
			res := run(t, withSymmetry(p.Name, 0))
			if !res.Complete {
				t.Fatal("preset search did not complete")
			}
			if len(res.Vacuous) > 0 {
				t.Errorf("never witnessed: %v", res.Vacuous)
			}
			if why := res.VacuousScope(); why != "" {
				t.Errorf("vacuous: %s", why)
			}
			found := map[string]bool{}
			for _, v := range res.Violations {
				if v.Known == "" || !slices.Contains(known[p.Name], v.Known) {
					t.Errorf("unexpected violation of %q (%s):\n%s", v.Property, v.Known, v.Trace)
				}
				found[v.Known] = true
			}
			for _, want := range known[p.Name] {
				if !found[want] {
					t.Errorf("the known race %s was not found", want)
				}
			}
		})
	}
}

// TestDistinctStatesPinned guards the size of every preset's state space
// (with symmetry reduction) against unnoticed model changes.
// foreground-cycle (123 before) and all-policies (202486 before) grew
// when GC deletes began to record the owners they were decided on while
// waiting (Write.Waited): a delete decided while its owner waited and one
// decided otherwise no longer share a state. cluster-scoped (61 before)
// shrank when a work item began to keep the identity it was queued with:
// pv/disk's virtual node, queued in cm/ns1/claim's namespace, goes stale
// when pv/disk's event replaces it, and its pass now does nothing where it
// used to pass the observed pv/disk (upstream's attemptToDeleteWorker
// forgets a virtual node no longer in the graph).
func TestDistinctStatesPinned(t *testing.T) {
	pinned := map[string]int64{
		"orphan-adoption": 59, "orphan-unseen": 340, "foreground-cycle": 127, "mixed-owners": 12380,
		"all-policies": 203486, "cross-namespace": 164, "cluster-scoped": 52, "owner-swap": 74,
		"refinalize": 58, "lost-update": 1383, "deep-cascade": 28, "relist": 46, "protection": 152,
		"late-finalizer": 42,
	}
	for _, p := range Presets {
		want, ok := pinned[p.Name]
		if !ok {
			t.Errorf("preset %s has no pinned state count", p.Name)
			continue
		}
		if got := run(t, withSymmetry(p.Name, 0)).Distinct; got != want {
			t.Errorf("%s: %d distinct states, pinned %d", p.Name, got, want)
		}
	}
}

// TestSymmetryReduces: UID canonicalisation merges creation orders
// without changing what is found.
func TestSymmetryReduces(t *testing.T) {
	plain := withSymmetry("cross-namespace", model.BugSet(0).With(model.BugUIDOnlyIdentity))
	plain.Symmetry = false
	a := run(t, plain)
	b := run(t, withSymmetry("cross-namespace", model.BugSet(0).With(model.BugUIDOnlyIdentity)))
	if a.Distinct != 323 || b.Distinct >= a.Distinct {
		t.Errorf("distinct without symmetry %d (pinned 323), with %d: want a reduction", a.Distinct, b.Distinct)
	}
	if len(a.Violations) != len(b.Violations) {
		t.Fatalf("symmetry changed the violations found: %d vs %d", len(a.Violations), len(b.Violations))
	}
	for i := range a.Violations {
		if a.Violations[i].Property != b.Violations[i].Property || len(a.Violations[i].Steps) != len(b.Violations[i].Steps) {
			t.Errorf("symmetry changed counterexample %d", i)
		}
	}
}

// TestDeterministicAcrossWorkers: one worker or several, the same states
// and the same counterexample traces, with sleep sets too (a state's
// sleep set is ORed over its arrivals whatever the workers' order): the
// same transitions skipped.
func TestDeterministicAcrossWorkers(t *testing.T) {
	for _, reduce := range []bool{false, true} {
		t.Run(fmt.Sprintf("reduction=%v", reduce), func(t *testing.T) { deterministicAcrossWorkers(t, reduce) })
	}
}

func deterministicAcrossWorkers(t *testing.T, reduce bool) {
	s := withSymmetry("mixed-owners", model.BugSet(0).With(model.BugNoCycleUnblock).With(model.BugDeleteWithoutRVPrecondition))
	s.Reduction = reduce
	one, err := Run(s, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	four, err := Run(s, Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if one.Distinct != four.Distinct || one.Generated != four.Generated || one.Slept != four.Slept || len(one.Violations) != len(four.Violations) {
		t.Fatalf("worker count changed the result: %d/%d/%d vs %d/%d/%d", one.Distinct, one.Generated, one.Slept, four.Distinct, four.Generated, four.Slept)
	}
	if reduce && one.Slept == 0 {
		t.Errorf("nothing skipped: the reduced search was not tested")
	}
	for i := range one.Violations {
		if one.Violations[i].Trace != four.Violations[i].Trace {
			t.Errorf("worker count changed counterexample %q", one.Violations[i].Property)
		}
	}
}

// TestVacuousScopeFailsLoudly: a scope that cannot witness what it
// expects says so.
func TestVacuousScopeFailsLoudly(t *testing.T) {
	s := withSymmetry("refinalize", 0)
	s.Expect = []string{model.PropOrphaningHappens}
	if res := run(t, s); len(res.Vacuous) != 1 || res.Vacuous[0] != model.PropOrphaningHappens {
		t.Fatalf("vacuous = %v", res.Vacuous)
	}
}

// TestVacuousScopes: a scope whose constraints exclude its own setup
// state is an error before any search; an op that reaches no object in
// any explored state (its object never exists) makes the result vacuous,
// although every property "holds" in it.
func TestVacuousScopes(t *testing.T) {
	excluded := Scope{Name: "x", Setup: []string{"create cm/a"}, Ops: []string{"delete cm/a"}}
	for _, cs := range [][]string{{"objects.cm<0"}, {"objects.cm<=0", "events<=3"}} {
		excluded.Constraints = nil
		for _, c := range cs {
			con, err := ParseConstraint(c)
			if err != nil {
				t.Fatal(err)
			}
			excluded.Constraints = append(excluded.Constraints, con)
		}
		if _, err := Run(excluded, Options{}); err == nil || !strings.Contains(err.Error(), "exclude the setup state") {
			t.Errorf("constraints %v: %v", cs, err)
		}
	}
	res := run(t, Scope{Name: "x", Setup: []string{"create cm/a"}, Ops: []string{"delete cm/x", "delete cm/a"}})
	if len(res.Violations) != 0 || len(res.NeverReached) != 1 || res.NeverReached[0] != "delete cm/x" ||
		!strings.Contains(res.VacuousScope(), `"delete cm/x" never reached an object`) {
		t.Fatalf("never reached %v, vacuous %q", res.NeverReached, res.VacuousScope())
	}
	if res := run(t, Scope{Name: "x", Setup: []string{"create cm/a"}, Ops: []string{"delete cm/a"}}); res.VacuousScope() != "" {
		t.Fatalf("a scope whose op deletes its object is not vacuous: %s", res.VacuousScope())
	}
}

// TestConstraints: the flag language parses, rejects what it cannot
// read, and prunes.
func TestConstraints(t *testing.T) {
	for _, bad := range []string{"objects", "colour<=3", "objects<=-1", "objects<=x", "objects.nope<=1"} {
		if _, err := ParseConstraint(bad); err == nil {
			t.Errorf("ParseConstraint(%q) accepted", bad)
		}
	}
	if c, err := ParseConstraint("objects.pod<=3"); err != nil || c.Max != 3 {
		t.Fatalf("objects.pod<=3 = %+v, %v", c, err)
	}
	// a per-kind bound prunes: no state with a Secret is expanded
	perKind := withSymmetry("cross-namespace", 0)
	full0 := run(t, perKind).Distinct
	ck, _ := ParseConstraint("objects.secret<1")
	perKind.Constraints = []Constraint{ck}
	if got := run(t, perKind).Distinct; got >= full0 {
		t.Fatalf("objects.secret<1 did not prune: %d >= %d", got, full0)
	}
	c, err := ParseConstraint("events<2")
	if err != nil || c.Max != 1 || c.Metric != "events" {
		t.Fatalf("events<2 = %+v, %v", c, err)
	}
	s := withSymmetry("mixed-owners", 0)
	full := run(t, s).Distinct
	s.Constraints = []Constraint{c}
	if pruned := run(t, s).Distinct; pruned >= full {
		t.Fatalf("constraint did not prune: %d >= %d", pruned, full)
	}
}

// TestBadScopes: scope errors name the scope and the problem.
func TestBadScopes(t *testing.T) {
	for _, s := range []Scope{
		{Name: "x", Ops: []string{"gc attemptToDelete cm/a"}},
		{Name: "x", Setup: []string{"create cm/a", "create cm/a"}},
		{Name: "x", Ops: []string{"explode cm/a"}},
		{Name: "x", Expect: []string{model.PropGraphAgrees}},
	} {
		if _, err := Run(s, Options{}); err == nil || !strings.HasPrefix(err.Error(), "scope x:") {
			t.Errorf("scope %+v: got %v", s, err)
		}
	}
	if _, err := Preset("nope"); err == nil || !strings.Contains(err.Error(), "orphan-adoption") {
		t.Errorf("unknown preset error should list presets: %v", err)
	}
}

// TestOrderedOps: an Ordered scope sends its client ops in the order
// given, interleaved with every internal step. A counterexample keeps
// them in that order, and the search covers fewer states than the
// unordered one; ops whose order makes the bug unreachable find nothing.
func TestOrderedOps(t *testing.T) {
	ops := []string{"create pv/disk", "create cm/ns1/claim owner=pv/disk"}
	bugs := model.BugSet(0).With(model.BugLookupIgnoresScope)
	ordered := run(t, Scope{Name: "ordered", Ops: ops, Ordered: true, Bugs: bugs})
	if len(ordered.Violations) == 0 {
		t.Fatal("the ordered scope found no counterexample for lookup-ignores-scope")
	}
	ce := ordered.Violations[0]
	if i, j := slices.Index(ce.Steps, ops[0]), slices.Index(ce.Steps, ops[1]); i < 0 || j < i {
		t.Fatalf("client ops out of order in %v", ce.Steps)
	}
	three := []string{"create cm/a", "create cm/b owner=cm/a", "delete cm/a"}
	o, u := run(t, Scope{Name: "o", Ops: three, Ordered: true}), run(t, Scope{Name: "u", Ops: three})
	if o.Distinct >= u.Distinct {
		t.Fatalf("ordered explored %d states, unordered %d", o.Distinct, u.Distinct)
	}
	reversed := run(t, Scope{Name: "reversed", Ops: []string{ops[1], ops[0]}, Ordered: true, Bugs: bugs})
	for _, c := range reversed.Violations {
		if c.Known == "" {
			t.Fatalf("the claim created before its owner broke %s: %v", c.Property, c.Steps)
		}
	}
}

// exhaustive skips a test that compares whole searches of large scopes
// (universes, every preset under every bug) when -short is given or the
// race detector is on. Under -race such a test takes ten times as long
// (the package went from about 70 s to over 12 minutes in CI, and past
// its 30-minute timeout on a loaded machine) and races nothing the
// small scopes do not: every search runs the same workers and seen
// table. make test runs this package a second time without -race, so
// these tests still gate every change.
func exhaustive(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why + " (-short)")
	}
	if raceEnabled {
		t.Skip(why + ": run without -race (make test's second pass of model/check)")
	}
}
