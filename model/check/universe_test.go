package check

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/model"
)

// permutations lists every permutation of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// symmetries are the permutations that map every object onto one with
// the same kind, namespace and create arguments, worked out here from
// the object texts rather than by Universe.
func symmetries(u *Universe) [][]int {
	class := func(o string) string {
		key, args, _ := strings.Cut(o, " ")
		return key[:strings.LastIndex(key, "/")] + " " + args
	}
	var out [][]int
	for _, p := range permutations(len(u.Objects)) {
		ok := true
		for i, j := range p {
			ok = ok && class(u.Objects[i]) == class(u.Objects[j])
		}
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// orbit is the set of a labelled graph's renamings under perms, as one
// string: two graphs are isomorphic exactly when their orbits are equal.
func orbit(g Graph, perms [][]int) string {
	n := len(g.Fin)
	var codes []string
	for _, p := range perms {
		// object p[i] of the renamed graph is object i of g
		cells := make([]int, n*n)
		fins := make([]int, n)
		for i := range n {
			fins[p[i]] = g.Fin[i]
			for j := range n {
				cells[p[i]*n+p[j]] = g.Refs[i][j]
			}
		}
		codes = append(codes, fmt.Sprint(fins, cells))
	}
	slices.Sort(codes)
	return strings.Join(slices.Compact(codes), "|")
}

// TestInitialGraphsUpToSymmetry: three interchangeable ConfigMaps, each
// ordered pair (self-references included) joined by one plain reference
// or none, are the directed graphs with loops on three unlabelled
// vertices: 104 (OEIS A000595), which Burnside's lemma also gives,
// (2^9 + 3*2^5 + 2*2^3) / 6.
func TestInitialGraphsUpToSymmetry(t *testing.T) {
	u := Universe{Objects: []string{"cm/a", "cm/b", "cm/c"}, Shapes: []string{""}, Self: true}
	if n := len(u.AllGraphs()); n != 512 {
		t.Errorf("%d labelled graphs, want 2^9 = 512", n)
	}
	// Burnside: the graphs a permutation fixes are those constant on
	// each cycle of the permutation acting on the 9 cells
	sum := 0
	for _, p := range permutations(3) {
		seen := map[int]bool{}
		cycles := 0
		for c := range 9 {
			if seen[c] {
				continue
			}
			cycles++
			for x := c; !seen[x]; x = p[x/3]*3 + p[x%3] {
				seen[x] = true
			}
		}
		sum += 1 << cycles
	}
	if sum/6 != 104 {
		t.Fatalf("Burnside gives %d, not 104: the test's own count is wrong", sum/6)
	}
	if n := len(u.InitialGraphs()); n != 104 {
		t.Errorf("%d graphs up to symmetry, want 104", n)
	}
}

// TestInitialGraphsOnePerOrbit: for tiny bounds with mixed kinds,
// namespaces, shapes, finalizers and a reference bound, and for every
// named universe, the graphs up to symmetry are one representative of
// each isomorphism class of the labelled graphs, counted by brute force:
// every labelled graph's orbit under the renamings, deduplicated.
func TestInitialGraphsOnePerOrbit(t *testing.T) {
	tiny := []Universe{
		{Name: "two-kinds", Objects: []string{"cm/a", "cm/b", "secret/s"}, Shapes: []string{"", "block"}, MaxRefs: 2, Finalizers: []string{"cascade.dev/hold"}},
		{Name: "namespaces", Objects: []string{"cm/a", "cm/ns2/b", "cm/ns2/c"}, Shapes: []string{"controller", "block"}, Self: true, MaxRefs: 2},
	}
	for _, u := range append(tiny, Universes...) {
		t.Run(u.Name, func(t *testing.T) {
			perms := symmetries(&u)
			orbits := map[string]bool{}
			for _, g := range u.AllGraphs() {
				orbits[orbit(g, perms)] = true
			}
			reps := map[string]bool{}
			for _, g := range u.InitialGraphs() {
				o := orbit(g, perms)
				if reps[o] {
					t.Fatalf("two representatives of one isomorphism class: %s", u.Describe(g))
				}
				reps[o] = true
			}
			if len(reps) != len(orbits) {
				t.Fatalf("%d graphs up to symmetry, brute force counts %d isomorphism classes", len(reps), len(orbits))
			}
			t.Logf("%d labelled graphs, %d up to symmetry", len(u.AllGraphs()), len(reps))
		})
	}
}

// TestInitialGraphsAreValid: no initial graph gives an object two
// controller references, which the API server refuses.
func TestInitialGraphsAreValid(t *testing.T) {
	u := Universe{Objects: []string{"rs/a", "pod/p", "pod/q"}, Shapes: []string{"controller", ""}, MaxRefs: 3}
	for _, g := range u.AllGraphs() {
		for d := range g.Refs {
			if n := strings.Count(fmt.Sprint(g.Refs[d]), "1"); n > 1 {
				t.Fatalf("%s gives %s %d controller references", u.Describe(g), u.Objects[d], n)
			}
		}
	}
	if _, err := Run(u.Scope(), Options{}); err != nil {
		t.Fatalf("a graph's setup fails: %v", err)
	}
}

// bugDepth bounds the depth of TestUniversesFindEveryBug's searches.
const bugDepth = 14

// TestUniversesFindEveryBug: each catalogued bug, switched on in a
// universe (not the preset written for it), yields an unclassified
// violation of the property the bug is documented to break within
// bugDepth steps. The log compares the universe's counterexample and
// time with the preset's.
func TestUniversesFindEveryBug(t *testing.T) {
	exhaustive(t, "explores six universes once per bug")
	universe := map[model.Bug]string{
		model.BugAdoptWithoutRecheck:           "adoption",
		model.BugEdgeTriggeredTransitions:      "pair",
		model.BugLostFirstUpdate:               "workloads",
		model.BugLookupIgnoresScope:            "scopes",
		model.BugUIDOnlyIdentity:               "scopes",
		model.BugDeleteWithoutRVPrecondition:   "pair",
		model.BugNoCycleUnblock:                "pair",
		model.BugDeleteDependentsWithoutPolicy: "workloads",
		model.BugForgetUnobservedVirtual:       "relist",
		model.BugProtectionDisabled:            "workloads",
		model.BugFinalizerAfterDeletion:        "pair",
	}
	for _, b := range model.AllBugs() {
		t.Run(b.String(), func(t *testing.T) {
			name, ok := universe[b]
			if !ok {
				t.Fatalf("bug %s has no universe", b)
			}
			u, err := UniverseByName(name)
			if err != nil {
				t.Fatal(err)
			}
			// a depth bound keeps the universes that grow fast under a
			// bug short; breadth-first, the search still finds the
			// shortest counterexample within it
			s := u.Scope()
			s.Bugs, s.MaxDepth = model.BugSet(0).With(b), bugDepth
			start := time.Now()
			res := run(t, s)
			took := time.Since(start)
			breaks := model.Bugs[b].Breaks
			var ce *Counterexample
			for _, c := range res.Classes {
				if c.Property == breaks && c.Known == "" && (ce == nil || len(c.Steps) < len(ce.Steps)) {
					ce = c
				}
			}
			if ce == nil {
				t.Fatalf("universe %s finds no unclassified violation of %q", name, breaks)
			}
			if want := "# found-by: cascade check --universe " + name + " --bug " + b.String() + "\n"; !strings.Contains(ce.Trace, want) {
				t.Errorf("the counterexample's trace does not say how it was found (%q):\n%s", strings.TrimSpace(want), ce.Trace)
			}
			start = time.Now()
			pres := run(t, withSymmetry(BugPreset[b], model.BugSet(0).With(b)))
			ptook := time.Since(start)
			psteps := -1
			for _, v := range pres.Violations {
				if v.Property == breaks {
					psteps = len(v.Steps)
				}
			}
			t.Logf("universe %s: %d steps from %s, %d states, %s; preset %s: %d steps, %d states, %s",
				name, len(ce.Steps), ce.Root, res.Distinct, took.Round(time.Millisecond), BugPreset[b], psteps, pres.Distinct, ptook.Round(time.Millisecond))
		})
	}
}

// TestSetupIsRenamingInvariant: what a renaming of interchangeable
// objects must keep does not depend on creation order: after the setup
// of every trio graph, each object's resourceVersion is 1 + its
// references (a DELETE precondition reads it), whichever objects were
// created first.
func TestSetupIsRenamingInvariant(t *testing.T) {
	u, err := UniverseByName("trio")
	if err != nil {
		t.Fatal(err)
	}
	m := &model.Model{}
	for _, g := range u.InitialGraphs() {
		s, err := setupState(m, u.Setup(g))
		if err != nil {
			t.Fatal(err)
		}
		for d, key := range u.keys() {
			refs := 0
			for _, r := range g.Refs[d] {
				if r != 0 {
					refs++
				}
			}
			k, _ := model.KindByShort(strings.Split(key, "/")[0])
			o := s.Lookup(k, model.DefaultNamespace, strings.Split(key, "/")[1])
			if o == nil || o.RV != 1+refs {
				t.Fatalf("%s: %s has %+v, want resourceVersion %d", u.Describe(g), key, o, 1+refs)
			}
		}
	}
}
