package check

import (
	"fmt"
	"slices"
	"strings"
)

// Universe bounds a family of scopes instead of naming one: a few
// objects, the ownerReference shapes that may join them, the finalizers
// they may start with and the client requests the environment may send.
// Its scope (Scope) starts from every initial ownership graph the bounds
// allow, up to symmetry, and explores every interleaving of up to
// OpBudget client requests with every internal step, all in one search
// that shares its visited set across the graphs.
//
// Symmetry: objects whose kind, namespace and create arguments are the
// same are interchangeable. Renaming them maps a graph, the op alphabet
// (generated for every object alike) and therefore the whole state space
// onto an isomorphic one, so one graph per isomorphism class
// (InitialGraphs: the graph whose code is the least over the renamings)
// finds every violation class the others would.
type Universe struct {
	Name string
	Doc  string
	// Objects are create commands without the verb: "cm/a",
	// "cm/ns2/b", "pv/p", "rs/web selector=app=web".
	Objects []string
	// Shapes are the ownerReference shapes an edge may take, as owner
	// flags: "" (plain), "block", "controller", "controller,block".
	Shapes []string
	// Self lets an object reference itself.
	Self bool
	// MaxRefs bounds the references in one graph; 0: no bound.
	MaxRefs int
	// Finalizers each object may or may not start with.
	Finalizers []string
	// Ops are client request templates: $X stands for each object, $Y
	// for each other one (each one, with Self).
	Ops []string
	// OpBudget is how many client requests one run sends, in all
	// (Scope.OpBudget): a request may be sent again.
	OpBudget int
	// Unsettled starts from the graph as created, before the GC's and
	// the controllers' informers have delivered anything; otherwise the
	// setup ends with settle.
	Unsettled bool
	// Coalesce lets informer relists skip events (Scope.Coalesce).
	Coalesce bool
}

// Graph is one initial ownership graph of a universe: Refs[d][o] is 0
// when object d does not reference object o, else 1 + the index of the
// reference's shape; Fin[d] has bit f set when object d starts with
// finalizer f.
type Graph struct {
	Refs [][]int
	Fin  []int
}

// classes are the symmetry classes of the objects: objects with equal
// classes are interchangeable.
func (u *Universe) classes() []string {
	out := make([]string, len(u.Objects))
	for i, o := range u.Objects {
		key, args, _ := strings.Cut(o, " ")
		parts := strings.Split(key, "/")
		out[i] = strings.Join(parts[:len(parts)-1], "/") + " " + args
	}
	return out
}

// keys are the objects' trace keys.
func (u *Universe) keys() []string {
	out := make([]string, len(u.Objects))
	for i, o := range u.Objects {
		out[i], _, _ = strings.Cut(o, " ")
	}
	return out
}

// renamings lists every permutation of the objects that maps each onto
// one of its class (p[i] is the new index of object i).
func (u *Universe) renamings() [][]int {
	cls := u.classes()
	n := len(cls)
	var out [][]int
	p := make([]int, n)
	used := make([]bool, n)
	var rec func(i int)
	rec = func(i int) {
		if i == n {
			out = append(out, slices.Clone(p))
			return
		}
		for j := range n {
			if !used[j] && cls[j] == cls[i] {
				used[j], p[i] = true, j
				rec(i + 1)
				used[j] = false
			}
		}
	}
	rec(0)
	return out
}

// code is the graph renamed by p, flattened: finalizers, then references
// row by row.
func (g *Graph) code(p []int, buf []int) []int {
	n := len(g.Fin)
	buf = buf[:0]
	buf = slices.Grow(buf, n+n*n)[:n+n*n]
	for i := range n {
		buf[p[i]] = g.Fin[i]
		for j := range n {
			buf[n+p[i]*n+p[j]] = g.Refs[i][j]
		}
	}
	return buf
}

// AllGraphs lists every labelled initial graph the bounds allow and the
// API server accepts (at most one controller reference per object), with
// no symmetry reduction, in a fixed order.
func (u *Universe) AllGraphs() []Graph {
	n := len(u.Objects)
	var out []Graph
	refs := make([][]int, n)
	for i := range refs {
		refs[i] = make([]int, n)
	}
	fin := make([]int, n)
	var cells func(c, used int)
	var fins func(i int)
	fins = func(i int) {
		if i == n {
			cells(0, 0)
			return
		}
		for f := range 1 << len(u.Finalizers) {
			fin[i] = f
			fins(i + 1)
		}
	}
	cells = func(c, used int) {
		if c == n*n {
			for d := range refs {
				controllers := 0
				for _, s := range refs[d] {
					if s > 0 && slices.Contains(strings.Split(u.Shapes[s-1], ","), "controller") {
						controllers++
					}
				}
				if controllers > 1 {
					return
				}
			}
			g := Graph{Refs: make([][]int, n), Fin: slices.Clone(fin)}
			for i := range refs {
				g.Refs[i] = slices.Clone(refs[i])
			}
			out = append(out, g)
			return
		}
		d, o := c/n, c%n
		refs[d][o] = 0
		cells(c+1, used)
		if (d == o && !u.Self) || (u.MaxRefs > 0 && used >= u.MaxRefs) {
			return
		}
		for s := range u.Shapes {
			refs[d][o] = s + 1
			cells(c+1, used+1)
		}
		refs[d][o] = 0
	}
	fins(0)
	return out
}

// InitialGraphs lists one graph per isomorphism class of AllGraphs: the
// one whose code is the least among its renamings.
func (u *Universe) InitialGraphs() []Graph {
	perms := u.renamings()
	id := perms[0] // renamings starts with the identity
	var out []Graph
	var mine, other []int
	for _, g := range u.AllGraphs() {
		mine = g.code(id, mine)
		canonical := true
		for _, p := range perms[1:] {
			other = g.code(p, other)
			if slices.Compare(other, mine) < 0 {
				canonical = false
				break
			}
		}
		if canonical {
			out = append(out, g)
		}
	}
	return out
}

// Setup returns the commands that build a graph: every object created
// with its finalizers and no reference, then each object's references
// added in object order, then settle unless Unsettled. Adding every
// reference by an update, never inline at create, keeps what renaming
// interchangeable objects must keep: an object's resourceVersion (1 +
// its references) and, unsettled, the informer events it causes, do not
// depend on which objects were created first. What a renaming can change
// is the order of one object's references to interchangeable owners;
// no property reads that order.
func (u *Universe) Setup(g Graph) []string {
	keys := u.keys()
	var out, refs []string
	for d, obj := range u.Objects {
		c := "create " + obj
		var fs []string
		for f, name := range u.Finalizers {
			if g.Fin[d]&(1<<f) != 0 {
				fs = append(fs, name)
			}
		}
		if len(fs) > 0 {
			c += " finalizers=" + strings.Join(fs, ",")
		}
		out = append(out, c)
		for o, s := range g.Refs[d] {
			if s == 0 {
				continue
			}
			ref := keys[o]
			if sh := u.Shapes[s-1]; sh != "" {
				ref += "," + sh
			}
			refs = append(refs, "add-owner "+keys[d]+" "+ref)
		}
	}
	out = append(out, refs...)
	if !u.Unsettled {
		out = append(out, "settle")
	}
	return out
}

// Describe names a graph briefly: its references as dependent->owner
// with the shape, and its finalizers.
func (u *Universe) Describe(g Graph) string {
	keys := u.keys()
	var parts []string
	for d := range g.Refs {
		for o, s := range g.Refs[d] {
			if s == 0 {
				continue
			}
			p := keys[d] + "->" + keys[o]
			if sh := u.Shapes[s-1]; sh != "" {
				p += "[" + sh + "]"
			}
			parts = append(parts, p)
		}
	}
	for d, f := range g.Fin {
		for i, name := range u.Finalizers {
			if f&(1<<i) != 0 {
				parts = append(parts, keys[d]+"+"+name)
			}
		}
	}
	if len(parts) == 0 {
		return "no references"
	}
	return strings.Join(parts, " ")
}

// OpAlphabet instantiates the op templates for every object ($X) and
// every pair of objects ($X, $Y), without duplicates.
func (u *Universe) OpAlphabet() []string {
	keys := u.keys()
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, t := range u.Ops {
		for x, kx := range keys {
			if !strings.Contains(t, "$Y") {
				add(strings.ReplaceAll(t, "$X", kx))
				continue
			}
			for y, ky := range keys {
				if x != y || u.Self {
					add(strings.ReplaceAll(strings.ReplaceAll(t, "$X", kx), "$Y", ky))
				}
			}
		}
	}
	return out
}

// Scope is the universe as one search: a root per initial graph, the op
// alphabet under the op budget, symmetry and partial-order reduction on.
func (u *Universe) Scope() Scope {
	s := Scope{Name: u.Name, Doc: u.Doc, Ops: u.OpAlphabet(), OpBudget: u.OpBudget, Symmetry: true, Reduction: true, Coalesce: u.Coalesce,
		FoundBy: "cascade check --universe " + u.Name}
	for i, g := range u.InitialGraphs() {
		s.Roots = append(s.Roots, Root{Name: u.Describe(g), Setup: u.Setup(g), Index: i})
	}
	return s
}

// UniverseByName finds a named universe.
func UniverseByName(name string) (*Universe, error) {
	for i := range Universes {
		if Universes[i].Name == name {
			return &Universes[i], nil
		}
	}
	var names []string
	for _, u := range Universes {
		names = append(names, u.Name)
	}
	return nil, fmt.Errorf("unknown universe %q (known: %s)", name, strings.Join(names, ", "))
}
