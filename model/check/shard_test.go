package check

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// A universe split into shards by its initial graphs: the shards' graphs
// are a disjoint partition of the universe's, each shard's search finds
// only classes the unsplit search finds, together they find every one of
// them with a counterexample as short as the unsplit search's, and their
// distinct states sum to at least the unsplit search's (a state reached
// from graphs of two shards counts in both). In upstream mode and with a
// bug switched on.
func TestShardsFindTheUnsplitClasses(t *testing.T) {
	exhaustive(t, "explores a universe several times")
	for _, c := range []struct {
		universe string
		bugs     model.BugSet
		shards   []int
	}{
		{"scopes", 0, []int{4, 7}},
		{"scopes", model.BugSet(0).With(model.BugLookupIgnoresScope), []int{3}},
		{"pair", model.BugSet(0).With(model.BugNoCycleUnblock), []int{5}},
	} {
		u, err := UniverseByName(c.universe)
		if err != nil {
			t.Fatal(err)
		}
		scope := u.Scope()
		scope.Bugs = c.bugs
		whole, err := Run(scope, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(whole.Classes) == 0 {
			t.Fatalf("%s mode %s: no violation class; the test needs some", c.universe, scope.Bugs)
		}
		for _, n := range c.shards {
			t.Run(fmt.Sprintf("%s/%s/%d-shards", c.universe, scope.Bugs, n), func(t *testing.T) {
				shortest := map[string]int{}
				var graphs []int
				var distinct, roots int64
				for i := range n {
					sh, err := scope.Shard(i, n)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range sh.Roots {
						graphs = append(graphs, r.Index)
					}
					res, err := Run(sh, Options{})
					if err != nil {
						t.Fatal(err)
					}
					distinct += res.Distinct
					roots += int64(res.Roots)
					for _, ce := range res.Classes {
						if sh.Roots[slices.IndexFunc(sh.Roots, func(r Root) bool { return r.Index == ce.RootIndex })].Name != ce.Root {
							t.Errorf("shard %d/%d: class %s names graph %q, not its graph %d", i, n, ce.Class, ce.Root, ce.RootIndex)
						}
						if (ce.RootIndex-i)%n != 0 {
							t.Errorf("shard %d/%d: class %s starts from graph %d, another shard's", i, n, ce.Class, ce.RootIndex)
						}
						if l, ok := shortest[ce.Class]; !ok || len(ce.Steps) < l {
							shortest[ce.Class] = len(ce.Steps)
						}
					}
				}
				slices.Sort(graphs)
				for i, g := range graphs {
					if g != i {
						t.Fatalf("the shards' graphs are not the %d graphs 0..%d, each once: %v", len(scope.Roots), len(scope.Roots)-1, graphs)
					}
				}
				if len(graphs) != len(scope.Roots) {
					t.Fatalf("the shards have %d graphs, the universe %d", len(graphs), len(scope.Roots))
				}
				want := map[string]int{}
				for _, ce := range whole.Classes {
					want[ce.Class] = len(ce.Steps)
				}
				for class, l := range want {
					if got, ok := shortest[class]; !ok || got != l {
						t.Errorf("class %s: shortest over the shards %d steps (found: %v), unsplit %d", class, got, ok, l)
					}
				}
				for class := range shortest {
					if _, ok := want[class]; !ok {
						t.Errorf("class %s found by a shard, not by the unsplit search", class)
					}
				}
				if distinct < whole.Distinct || roots < int64(whole.Roots) {
					t.Errorf("the shards explored %d distinct states from %d initial states; unsplit %d from %d", distinct, roots, whole.Distinct, whole.Roots)
				}
				t.Logf("%d shards: %d distinct states (unsplit %d, overlap %d), %d classes", n, distinct, whole.Distinct, distinct-whole.Distinct, len(shortest))
			})
		}
	}
}

// Only a scope with several initial states splits, into at most as many
// shards as it has; the error names what is wrong.
func TestShardRefusesWhatCannotSplit(t *testing.T) {
	u, err := UniverseByName("relist")
	if err != nil {
		t.Fatal(err)
	}
	preset, err := Preset("relist")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		scope        Scope
		index, count int
		want         string
	}{
		{preset, 0, 2, "nothing to split"},
		{u.Scope(), 0, 14, "it has 13 initial graphs, so at most 13 shards"},
		{u.Scope(), 2, 2, "shard 2/2"},
		{u.Scope(), 0, 0, "shard 0/0"},
	} {
		if _, err := c.scope.Shard(c.index, c.count); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s shard %d/%d: %v; want an error naming %q", c.scope.Name, c.index, c.count, err, c.want)
		}
	}
	sh, err := u.Scope().Shard(12, 13)
	if err != nil || len(sh.Roots) != 1 || sh.Roots[0].Index != 12 {
		t.Errorf("shard 12/13 of relist: %v, %+v; want its 13th graph alone", err, sh.Roots)
	}
}
