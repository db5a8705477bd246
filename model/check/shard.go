package check

import "fmt"

// Shard is the scope split by its roots: the index-th (from 0) of count
// disjoint slices of them, every count-th root from the index-th, each
// keeping its Root.Index. Only a scope with roots (a universe's) splits;
// count may not exceed its roots, so that no slice is empty.
//
// Round robin over the roots in their order: a universe enumerates its
// graphs with the finalizers outermost and the last reference fastest
// (AllGraphs), so every family of alike graphs (the same finalizers, the
// same first references) is spread over all the slices, and the slices'
// sizes differ by one graph at most. A size estimate per graph would
// have to guess the states a graph reaches, which its references and
// finalizers predict poorly: most of a universe's states are reached
// from many graphs (after the first request has deleted an object or
// changed a reference).
//
// Soundness: each slice's search is a search of the same model from
// fewer initial states, so every state it reaches, and every violation,
// the unsplit search reaches; every state the unsplit search reaches is
// reached from some root, and so by the slice holding that root. The
// slices together find every violation class the unsplit search finds,
// and a class's shortest counterexample over the slices is as short as
// the unsplit search's. A state reached from roots of two slices is
// explored by both: the slices' distinct states sum to at least the
// unsplit search's.
func (s Scope) Shard(index, count int) (Scope, error) {
	switch {
	case len(s.Roots) == 0:
		return s, fmt.Errorf("scope %s has one initial state, not several (a universe's graphs): nothing to split", s.Name)
	case count < 1 || index < 0 || index >= count:
		return s, fmt.Errorf("shard %d/%d: want 0 <= i < n", index, count)
	case count > len(s.Roots):
		return s, fmt.Errorf("%d shards of %s: it has %d initial graphs, so at most %d shards", count, s.Name, len(s.Roots), len(s.Roots))
	}
	roots := make([]Root, 0, (len(s.Roots)-index+count-1)/count)
	for i := index; i < len(s.Roots); i += count {
		roots = append(roots, s.Roots[i])
	}
	s.Roots = roots
	return s, nil
}
