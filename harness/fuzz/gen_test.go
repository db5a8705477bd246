package fuzz

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/model"
)

// TestFamily: the family action builds what an adopting controller acts
// on. Taken on the model, its steps leave a live workload and a live
// object of the kind it adopts, in the workload's namespace, carrying the
// selector label; without an adopting controller it draws nothing.
func TestFamily(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &model.Model{}
		s := model.NewState()
		g := &gen{u: DefaultUniverse, state: func() *model.State { return s }}
		for range rapid.IntRange(1, 4).Draw(t, "families") {
			lines := g.family(t, SteppedAdopterKinds)
			if len(lines) == 0 {
				t.Fatalf("no family drawn from %v", DefaultUniverse.Kinds)
			}
			for _, l := range lines {
				st, err := model.ParseStep(l)
				if err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				next, res, err := m.Apply(s, st)
				if err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				if !res.OK() {
					t.Fatalf("%q: %s", l, res)
				}
				s = next
			}
			last := lines[len(lines)-1]
			dep := lookupKey(s, strings.Fields(last)[1])
			if dep == nil {
				t.Fatalf("%q left nothing live", last)
			}
			if v, _ := dep.Label(selectorLabel); v != "web" {
				t.Fatalf("%s does not carry %s=web", dep.Key(), selectorLabel)
			}
			var workloads []string
			for i := range s.Objects {
				o := &s.Objects[i]
				if o.Kind.Info().Adopts == dep.Kind.Info().Short && o.Namespace == dep.Namespace {
					workloads = append(workloads, o.Key())
				}
			}
			if len(workloads) == 0 {
				t.Fatalf("no workload adopting %s in its namespace", dep.Key())
			}
		}
	})
	none := &gen{u: DefaultUniverse, state: model.NewState}
	rapid.Check(t, func(t *rapid.T) {
		if lines := none.family(t, nil); lines != nil {
			t.Fatalf("drew %v without an adopting controller", lines)
		}
	})
	// a concurrent run draws without a state: the workload's create and
	// the adoptee's, labelled, in the workload's namespace
	stateless := &gen{u: DefaultUniverse}
	rapid.Check(t, func(t *rapid.T) {
		lines := stateless.family(t, SteppedAdopterKinds)
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "create ") || !strings.Contains(lines[0], " selector="+selectorLabel+"=web") ||
			!strings.HasPrefix(lines[1], "create ") || !strings.Contains(lines[1], " labels="+selectorLabel+"=web") {
			t.Fatalf("want two creates, the workload's and the labelled adoptee's, got %q", lines)
		}
		_, ons, _ := split(strings.Fields(lines[0])[1])
		_, dns, _ := split(strings.Fields(lines[1])[1])
		if ons != dns {
			t.Fatalf("the workload and the adoptee are in different namespaces: %q", lines)
		}
	})
	if !slices.Contains(DefaultUniverse.Kinds, "rc") || !slices.Contains(DefaultUniverse.Kinds, "pod") {
		t.Fatal("the default universe no longer has rc and pod together: the family action has nothing to draw")
	}
}

// TestScoped: the scoped action's steps, taken on the model, leave a live
// cluster-scoped owner and a live namespaced dependent naming it; a
// universe without a cluster-scoped kind draws a single create.
func TestScoped(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &model.Model{}
		s := model.NewState()
		g := &gen{u: DefaultUniverse}
		lines := g.scoped(t)
		if len(lines) != 2 {
			t.Fatalf("want an owner's create and a dependent's, got %q", lines)
		}
		for _, l := range lines {
			st, err := model.ParseStep(l)
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			next, res, err := m.Apply(s, st)
			if err != nil || !res.OK() {
				t.Fatalf("%q: %v %s", l, err, res)
			}
			s = next
		}
		owner := lookupKey(s, strings.Fields(lines[0])[1])
		dep := lookupKey(s, strings.Fields(lines[1])[1])
		if owner == nil || dep == nil || owner.Namespace != "" || dep.Namespace == "" {
			t.Fatalf("want a live cluster-scoped owner and a live namespaced dependent after %q", lines)
		}
		if len(dep.Owners) != 1 || dep.Owners[0].UID != owner.UID {
			t.Fatalf("the dependent does not name the owner after %q", lines)
		}
	})
	namespacedOnly := &gen{u: Universe{Kinds: []string{"cm", "pod"}, Names: DefaultUniverse.Names, Namespaces: DefaultUniverse.Namespaces}}
	rapid.Check(t, func(t *rapid.T) {
		if lines := namespacedOnly.scoped(t); len(lines) != 1 || !strings.HasPrefix(lines[0], "create ") {
			t.Fatalf("want one create without a cluster-scoped kind, got %q", lines)
		}
	})
}

// TestImplTakesItsAdoptersEvents: a stepped run hands impl the controller
// events of the kinds its adopter manages and of what they adopt; the
// model's controller, which watches every adopting kind, takes the rest
// alone (found by fuzzing: impl's adopter has no informer for Herds).
func TestImplTakesItsAdoptersEvents(t *testing.T) {
	with := implSystem{&steppedRun{env: SteppedEnv{AdopterKinds: SteppedAdopterKinds}}}
	without := implSystem{&steppedRun{}}
	for line, want := range map[string][2]bool{
		"controller deliver herd/h":           {false, false},
		"controller deliver pod/p":            {true, false},
		"controller deliver rs/r":             {true, false},
		"controller deliver deploy/d":         {true, false},
		"controller adopt pod/p by=rs/r":      {true, false},
		"gc deliver herd/h":                   {true, true},
		"controller release rs/r by=deploy/d": {true, false},
	} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]bool{with.takes(st), without.takes(st)}; got != want {
			t.Errorf("takes(%q) with and without the adopter = %v, want %v", line, got, want)
		}
	}
}
