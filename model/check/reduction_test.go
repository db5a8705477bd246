package check

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// violationSet lists a result's violation classes with each class's
// shortest counterexample, and each property's, step by step.
func violationSet(res *Result) []string {
	var out []string
	for _, v := range res.Violations {
		out = append(out, fmt.Sprintf("property %s: %q", v.Property, v.Steps))
	}
	for _, v := range res.Classes {
		out = append(out, fmt.Sprintf("class %s from %s: %q", v.Class, v.Root, v.Steps))
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
// the sample reaches exactly the distinct states of the plain search
// (Options.Plain: no sleep sets at all),
// at the same depth, takes exactly the unreduced transitions less the
// ones it reports skipped, and finds every violation (property and class)
// with the very counterexample the unreduced search finds: the sleep sets
// order steps as the search numbers them, so they never skip the
// transition a state's recorded path ends with.
func TestReductionKeepsStatesAndViolations(t *testing.T) {
	slept := int64(0)
	for _, s := range reductionSample(t) {
		name := s.Name + "/" + s.Bugs.String()
		t.Run(name, func(t *testing.T) {
			// the plain search (no sleep sets at all), not the unreduced
			// one that skips sleeping claims on the same relation
			s.Reduction = false
			plain, err := Run(s, Options{Plain: true})
			if err != nil {
				t.Fatal(err)
			}
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
			t.Logf("%d distinct states, %d transitions unreduced, %d skipped (%.1f%%)", plain.Distinct, plain.Generated, red.Slept, 100*float64(red.Slept)/float64(max(plain.Generated, 1)))
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

// independenceSample is the scopes TestIndependenceHolds walks: the
// reduction sample and the universes the reduction sample leaves out
// (their reachable states up to the test's bound).
func independenceSample(t *testing.T) []Scope {
	out := reductionSample(t)
	if testing.Short() || raceEnabled {
		return out
	}
	for _, name := range []string{"pair", "scopes", "relist", "trio"} {
		u, err := UniverseByName(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u.Scope())
	}
	return out
}

// TestIndependenceHolds checks, on every reachable state p of the sample
// (up to a bound per scope), what the sleep sets rely on (reduction.go):
// for every step c enabled in p (client requests of the scope included)
// and every step a that sleepAfter puts to sleep after it, a is below c,
// a is the step of its class in c(p) (the same step, enabled there), a
// leaves the store as it was in p and in c(p), c is enabled in a(p), and
// a(c(p)) = c(a(p)).
func TestIndependenceHolds(t *testing.T) {
	pairs := map[string]int{}
	for _, sc := range independenceSample(t) {
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
			canon := func(s *model.State) []byte { return s.Canonical().Encode(nil) }
			roots := sc.Roots
			if len(roots) == 0 {
				roots = []Root{{}}
			}
			for _, r := range roots {
				s, err := setupState(m, append(slices.Clip(sc.Setup), r.Setup...))
				if err != nil {
					t.Fatal(err)
				}
				push(s.Canonical())
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
				p := queue[0]
				queue = queue[1:]
				// the explorer's order: requests (a refused one is
				// skipped below), then the model's steps
				steps := append(slices.Clip(ops), m.Enabled(p, opts)...)
				infos := classify(nil, p, steps, 0, nil)
				for ci := range steps {
					c := &steps[ci]
					cn, _, err := m.ApplyStep(p, c)
					if err != nil {
						continue
					}
					// the largest sleep set: as if every step of p slept
					z := sleepAfter(infos, &infos[ci], cn, sleepAll)
					if z == 0 {
						continue
					}
					tn := cn
					if !sameUIDs(p, cn) {
						tn = cn.Canonical()
					}
					tsteps := append(slices.Clip(ops), m.Enabled(tn, opts)...)
					tinfos := classify(nil, tn, tsteps, 0, nil)
					// every step of t whose class is asleep: the search skips it
					for ti := range tsteps {
						at := &tsteps[ti]
						if b := tinfos[ti].bit; b < 0 || z&(1<<b) == 0 {
							continue
						}
						var a *model.Step
						ai := -1
						for i := range steps {
							if sameStep(&steps[i], &infos[i], at, &tinfos[ti]) {
								ai = i
							}
						}
						if ai >= 0 && commute(&infos[ai], &infos[ci]) {
							a = &steps[ai]
						}
						if a == nil {
							t.Fatalf("after %s, %s is asleep, but is no step of p that commutes with it", c, at)
						}
						if infos[ai].rank >= infos[ci].rank {
							if !infos[ai].inherit {
								t.Fatalf("%s sleeps after %s, above it, and is not inherited", a, c)
							}
							// inherited: no other step of p reaches a(p)
							ap, _, _ := m.ApplyStep(p, a)
							for bi := range steps {
								if bn, _, err := m.ApplyStep(p, &steps[bi]); bi != ai && err == nil && bytes.Equal(canon(bn), canon(ap)) {
									t.Fatalf("%s is inherited, but %s reaches the same state", a, &steps[bi])
								}
							}
							pairs["inherited"]++
						}
						pairs[fmt.Sprintf("%s after %s", roleNames[infos[ai].role], roleNames[infos[ci].role])]++
						an, _, err := m.ApplyStep(p, a)
						if err != nil {
							t.Fatalf("%s: %v", a, err)
						}
						if !model.SameStore(p, an) {
							t.Fatalf("%s changed the store", a)
						}
						atn, _, err := m.ApplyStep(tn, at)
						if err != nil {
							t.Fatalf("%s disabled %s: %v", c, a, err)
						}
						if !model.SameStore(tn, atn) {
							t.Fatalf("%s changed the store after %s", a, c)
						}
						// c in a(p): the same step, whose name may have
						// changed (an item queued beside it with its key)
						asteps := append(slices.Clip(ops), m.Enabled(an, opts)...)
						ainfos := classify(nil, an, asteps, 0, nil)
						enabled := false
						for i := range asteps {
							if !sameStep(c, &infos[ci], &asteps[i], &ainfos[i]) {
								continue
							}
							acn, _, err := m.ApplyStep(an, &asteps[i])
							if err != nil {
								continue
							}
							enabled = true
							if !bytes.Equal(canon(acn), canon(atn)) {
								t.Fatalf("%s and %s do not commute in\n%s", a, c, strings.Join(p.Dump(), "\n"))
							}
						}
						if !enabled {
							t.Fatalf("%s disabled %s", a, c)
						}
					}
				}
				for i := range steps {
					if n, _, err := m.ApplyStep(p, &steps[i]); err == nil {
						if !sameUIDs(p, n) {
							n = n.Canonical()
						}
						push(n)
					}
				}
			}
		})
	}
	t.Logf("pairs checked, by role (slept/after): %v", pairs)
	if len(pairs) == 0 {
		t.Errorf("no pair of steps was checked")
	}
}

// sameStep reports whether step a of one state and b of another are the
// same step: the same attemptToDelete item, or the same actor, op and
// target, whatever uid= their names need in their states.
func sameStep(a *model.Step, ai *sleepStep, b *model.Step, bi *sleepStep) bool {
	if ai.role == roleItem || bi.role == roleItem || ai.role == roleSend || bi.role == roleSend {
		return ai.role == bi.role && ai.item == bi.item
	}
	if a.Actor == model.ActorClient || b.Actor == model.ActorClient {
		return a.String() == b.String()
	}
	return a.Actor == b.Actor && a.Op == b.Op && a.Target == b.Target && a.By == b.By
}

var roleNames = map[int8]string{roleNone: "other", roleDeliver: "gc deliver", roleVirtual: "gc deliver-virtual", roleSync: "gc sync",
	roleItem: "gc attemptToDelete", roleSend: "gc send", roleCtlInform: "controller informer", roleStoreWrite: "store write"}

func stepStrings(steps []model.Step) []string {
	out := make([]string, len(steps))
	for i := range steps {
		out[i] = steps[i].String()
	}
	return out
}

// TestReductionKindNames: the API kinds writeKeys takes as reaching
// other objects are the model's CRD and Namespace kinds.
func TestReductionKindNames(t *testing.T) {
	for short, want := range map[string]string{"crd": crdKind, "ns": namespaceKind} {
		k, ok := model.KindByShort(short)
		if !ok || k.Info().Kind != want {
			t.Errorf("kind %s: %v, want API kind %s", short, ok, want)
		}
	}
}
