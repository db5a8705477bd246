package check

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// violationSet lists a result's violation classes with the length of
// each class's shortest counterexample, and each property's.
func violationSet(res *Result) []string {
	var out []string
	for _, v := range res.Violations {
		out = append(out, fmt.Sprintf("property %s: %d steps", v.Property, len(v.Steps)))
	}
	for _, v := range res.Classes {
		out = append(out, fmt.Sprintf("class %s: %d steps", v.Class, len(v.Steps)))
	}
	slices.Sort(out)
	return out
}

// reductionSample is the scopes the soundness tests search both ways:
// every preset with its bug switched on (and without), and the
// universes with a controller, where the reduction skips transitions.
func reductionSample(t *testing.T) []Scope {
	var out []Scope
	for _, p := range Presets {
		out = append(out, withSymmetry(p.Name, 0))
	}
	for _, b := range model.AllBugs() {
		out = append(out, withSymmetry(BugPreset[b], model.BugSet(0).With(b)))
	}
	// the universes only where whole searches of them run (exhaustive)
	if !testing.Short() && !raceEnabled {
		for _, name := range []string{"adoption", "workloads"} {
			u, err := UniverseByName(name)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, u.Scope())
		}
	}
	return out
}

// TestReductionKeepsStatesAndViolations: with sleep sets, every scope of
// the sample reaches exactly the distinct states of the unreduced search,
// at the same depth, takes exactly the unreduced transitions less the
// ones it reports skipped, and finds every violation (property and class)
// with a counterexample exactly as short.
func TestReductionKeepsStatesAndViolations(t *testing.T) {
	slept := int64(0)
	for _, s := range reductionSample(t) {
		name := s.Name + "/" + s.Bugs.String()
		t.Run(name, func(t *testing.T) {
			s.Reduction = false
			plain := run(t, s)
			s.Reduction = true
			red := run(t, s)
			if plain.Reduced || !red.Reduced {
				t.Fatalf("Reduced: %v unreduced, %v reduced", plain.Reduced, red.Reduced)
			}
			if red.Distinct != plain.Distinct || red.Depth != plain.Depth {
				t.Errorf("reduced: %d distinct states, depth %d; unreduced: %d, depth %d", red.Distinct, red.Depth, plain.Distinct, plain.Depth)
			}
			if red.Generated+red.Slept != plain.Generated {
				t.Errorf("reduced: %d transitions + %d skipped; unreduced: %d", red.Generated, red.Slept, plain.Generated)
			}
			if got, want := violationSet(red), violationSet(plain); !slices.Equal(got, want) {
				t.Errorf("reduced search found\n%q\nunreduced\n%q", got, want)
			}
			if !maps(red.Witnessed, plain.Witnessed) {
				t.Errorf("witnessed: reduced %v, unreduced %v", red.Witnessed, plain.Witnessed)
			}
			slept += red.Slept
		})
	}
	if slept == 0 {
		t.Errorf("the reduction skipped no transition in the whole sample: nothing was tested")
	}
}

func maps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestReductionOffKeepsCounts: a scope without Reduction (every preset)
// is searched as before: no transition skipped, not reported reduced.
func TestReductionOffKeepsCounts(t *testing.T) {
	res := run(t, withSymmetry("orphan-adoption", 0))
	if res.Reduced || res.Slept != 0 {
		t.Errorf("preset searched with reduction: Reduced %v, %d skipped", res.Reduced, res.Slept)
	}
	s := withSymmetry("orphan-adoption", 0)
	s.Reduction = true
	s.Constraints = []Constraint{mustConstraint(t, "objects<=9")}
	if res := run(t, s); res.Reduced {
		t.Errorf("a scope with constraints was searched with reduction")
	}
}

func mustConstraint(t *testing.T, text string) Constraint {
	t.Helper()
	c, err := ParseConstraint(text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIndependenceHolds checks, on every reachable state of the sample
// (up to a bound per scope), what the sleep sets rely on (reduction.go):
// for every GC-sleepable step g and controller informer step c enabled
// in s, g leaves the store as it was, c(s) has exactly s's GC-sleepable
// steps enabled, c is enabled in g(s), and g(c(s)) = c(g(s)).
func TestIndependenceHolds(t *testing.T) {
	pairs := 0
	for _, sc := range reductionSample(t) {
		t.Run(sc.Name+"/"+sc.Bugs.String(), func(t *testing.T) {
			m := &model.Model{Bugs: sc.Bugs, Release: sc.Release}
			opts := model.Options{Coalesce: sc.Coalesce}
			var queue []*model.State
			seen := map[string]bool{}
			push := func(s *model.State) {
				if k := string(s.Encode(nil)); !seen[k] {
					seen[k] = true
					queue = append(queue, s)
				}
			}
			roots := sc.Roots
			if len(roots) == 0 {
				roots = []Root{{}}
			}
			for _, r := range roots {
				s, err := setupState(m, append(slices.Clip(sc.Setup), r.Setup...))
				if err != nil {
					t.Fatal(err)
				}
				push(s)
			}
			ops := make([]model.Step, len(sc.Ops))
			for i, c := range sc.Ops {
				st, err := model.ParseStep(c)
				if err != nil {
					t.Fatal(err)
				}
				ops[i] = st
			}
			const bound = 20000
			for len(queue) > 0 && len(seen) < bound {
				s := queue[0]
				queue = queue[1:]
				steps := m.Enabled(s, opts)
				var gs, cs []model.Step
				for _, st := range steps {
					if gcSleepable(&st) {
						gs = append(gs, st)
					}
					if putsGCToSleep(&st) {
						cs = append(cs, st)
					}
				}
				for _, c := range cs {
					cn, _, err := m.Apply(s, c)
					if err != nil {
						continue
					}
					var after []string
					for _, st := range m.Enabled(cn, opts) {
						if gcSleepable(&st) {
							after = append(after, st.String())
						}
					}
					if !slices.Equal(stepStrings(gs), after) {
						t.Fatalf("after %s the GC steps %q are enabled, before it %q", c, after, stepStrings(gs))
					}
					for _, g := range gs {
						gn, _, err := m.Apply(s, g)
						if err != nil {
							continue
						}
						pairs++
						if !model.SameStore(s, gn) {
							t.Fatalf("%s changed the store", g)
						}
						gc, _, err := m.Apply(gn, c)
						if err != nil {
							t.Fatalf("%s disabled %s: %v", g, c, err)
						}
						cg, _, err := m.Apply(cn, g)
						if err != nil {
							t.Fatalf("%s disabled %s: %v", c, g, err)
						}
						if !bytes.Equal(gc.Canonical().Encode(nil), cg.Canonical().Encode(nil)) {
							t.Fatalf("%s and %s do not commute", g, c)
						}
					}
				}
				for _, st := range steps {
					if n, _, err := m.Apply(s, st); err == nil {
						push(n)
					}
				}
				for _, op := range ops {
					if n, _, err := m.Apply(s, op); err == nil {
						push(n)
					}
				}
			}
		})
	}
	if pairs == 0 {
		t.Errorf("no pair of steps was checked")
	}
}

func stepStrings(steps []model.Step) []string {
	out := make([]string, len(steps))
	for i := range steps {
		out[i] = steps[i].String()
	}
	return out
}
