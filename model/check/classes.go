package check

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cascade-k8s/cascade/model"
)

// Violation classes: the search keeps the shortest counterexample of
// every class, not only of every property, so that one search of a
// universe shows each distinct cause of a broken property once.

func (e *explorer) offer(v *model.Violation, c *candidate, st *model.Step) {
	class := ViolationClass(v, st)
	e.mu.Lock()
	defer e.mu.Unlock()
	c.v, c.class = v, class
	if old := e.found[v.Property]; old == nil || c.before(old) {
		e.found[v.Property] = c
	}
	if old := e.classes[class]; old == nil || c.before(old) {
		e.classes[class] = c
	}
}

// before reports whether c is reached before d in BFS order.
func (c *candidate) before(d *candidate) bool {
	return c.level < d.level || (c.level == d.level && c.order < d.order)
}

// ClassSep separates the parts of a violation class.
const ClassSep = " | "

// ViolationClass is the class of a violation: its property, the known
// race that explains it (or "unclassified") and the kind of step that
// broke it (its actor and verb, and a DELETE's propagation policy; the
// objects are left out), or "quiescent" for a quiescent property.
func ViolationClass(v *model.Violation, st *model.Step) string {
	known := v.Known
	if known == "" {
		known = "unclassified"
	}
	kind := "quiescent"
	if st != nil {
		toks := strings.Fields(st.String())
		switch toks[0] {
		case "gc", "controller", "apiextensions":
			kind = toks[0] + " " + toks[1]
		default:
			kind = "client " + toks[0]
			for _, t := range toks[2:] {
				if strings.HasPrefix(t, "propagation=") || strings.HasPrefix(t, "if-") {
					kind += " " + t
				}
			}
		}
	}
	return v.Property + ClassSep + known + ClassSep + kind
}

// CompareClasses orders violation classes as Result.Classes lists them:
// by their property's place in model.Properties, then by class.
func CompareClasses(a, b string) int {
	pa, _, _ := strings.Cut(a, ClassSep)
	pb, _, _ := strings.Cut(b, ClassSep)
	return cmp.Or(cmp.Compare(propertyIndex(pa), propertyIndex(pb)), cmp.Compare(a, b))
}

// propertyIndex is a property's place in model.Properties.
func propertyIndex(name string) int {
	return slices.IndexFunc(model.Properties, func(p model.Property) bool { return p.Name == name })
}

// classCounterexamples replays the shortest path of every class, in
// property order, then by class.
func (e *explorer) classCounterexamples() ([]*Counterexample, error) {
	keys := make([]string, 0, len(e.classes))
	for k := range e.classes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareClasses)
	var out []*Counterexample
	for _, k := range keys {
		ce, err := e.counterexample(e.classes[k])
		if err != nil {
			return nil, err
		}
		out = append(out, ce)
	}
	return out, nil
}
