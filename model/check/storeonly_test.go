package check

import (
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// TestStoreOnlyProperties: a property marked StoreOnly finds nothing on
// a transition that leaves the store's object list shared, and one with
// Steps finds nothing on a step Steps rejects, on every transition of
// every preset, under every bug switch (the checker skips such
// properties there). The two largest presets are cut at 20,000 states.
func TestStoreOnlyProperties(t *testing.T) {
	exhaustive(t, "explores every preset under every bug")
	checked := map[string]int{} // transitions on which a property found something
	for _, p := range Presets {
		for _, bugs := range append([]model.BugSet{0}, bugSets()...) {
			s := withSymmetry(p.Name, bugs)
			e := &explorer{scope: s, m: &model.Model{Bugs: bugs}, opts: model.Options{Coalesce: s.Coalesce}}
			for _, c := range s.Ops {
				st, err := model.ParseStep(c)
				if err != nil {
					t.Fatal(err)
				}
				e.ops = append(e.ops, st)
			}
			init, err := setupState(e.m, s.Setup)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			queue := []*model.State{e.canon(init)}
			for len(queue) > 0 && len(seen) < 20000 {
				cur := queue[0]
				queue = queue[1:]
				for _, sc := range transitions(e, cur) {
					same := model.SameStore(cur, sc.Next)
					for i := range model.Properties {
						prop := &model.Properties[i]
						if prop.Check == nil {
							continue
						}
						found := prop.Check(e.m, sc) != nil
						if found && same && prop.StoreOnly {
							t.Fatalf("%s %s: StoreOnly property %q holds on %s, which leaves the store as it was", p.Name, bugs, prop.Name, sc.Step)
						}
						if found && prop.Steps != nil && !prop.Steps(sc.Step) {
							t.Fatalf("%s %s: property %q holds on %s, a step its Steps rejects", p.Name, bugs, prop.Name, sc.Step)
						}
						if found {
							checked[prop.Name]++
						}
					}
					n := e.canon(sc.Next)
					if k := string(n.Encode(nil)); !seen[k] {
						seen[k] = true
						queue = append(queue, n)
					}
				}
			}
		}
	}
	for i := range model.Properties {
		if p := &model.Properties[i]; p.Check != nil && checked[p.Name] == 0 {
			t.Logf("property %q found nothing on any transition (no preset and bug here violates it)", p.Name)
		}
	}
}

func bugSets() []model.BugSet {
	var out []model.BugSet
	for _, b := range model.AllBugs() {
		out = append(out, model.BugSet(0).With(b))
	}
	return out
}

// transitions lists the transitions out of s as the checker takes them.
func transitions(e *explorer, s *model.State) []*model.Transition {
	var out []*model.Transition
	for i, op := range e.ops {
		if s.Budget&(1<<i) != 0 {
			continue
		}
		if n, r, err := e.m.Apply(s, op); err == nil {
			n.Budget |= 1 << i
			out = append(out, &model.Transition{Prev: s, Next: n, Step: &op, Result: r})
		}
	}
	for _, st := range e.m.Enabled(s, e.opts) {
		if n, r, err := e.m.Apply(s, st); err == nil {
			out = append(out, &model.Transition{Prev: s, Next: n, Step: &st, Result: r})
		}
	}
	return out
}
