package lin

import (
	"slices"

	"github.com/cascade-k8s/cascade/harness/history"
)

// partition splits a history into independent parts: the connected
// components of the keys its ops write, two keys being connected when
// some object in the history (an op's Sent or Got) at one of them holds
// an ownerReference that resolves to the other by coordinates, or that
// names the UID some object at the other had.
//
// This is sound (a history is linearizable and legal if and only if each
// part is) because every step reads nothing but its own key and keys so
// connected to it: the API semantics are per key; a GC DELETE or
// reference removal reads the owners its references resolve to;
// finalizer removals read the objects that reference the owner by UID;
// adoption and unblocking read the owners of the object written; the
// deletion-protection check reads only the object's own label. Every
// reference any state can hold comes from some op's object, so it is
// among the edges; an object whose content an ambiguous write left
// unknown could hold others, but no rule judges on unknown content. What
// the partitions lose is only a cross-key order, and none of the checks
// reads one: resourceVersions are compared per object, and UID freshness
// is checked on the whole history before partitioning matters
// (checker.static).
func partition(ops []history.Op) [][]int {
	idx := map[history.Key]int{}
	var parent []int
	node := func(k history.Key) int {
		if i, ok := idx[k]; ok {
			return i
		}
		idx[k] = len(parent)
		parent = append(parent, len(parent))
		return idx[k]
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		if ra, rb := find(a), find(b); ra != rb {
			parent[rb] = ra
		}
	}
	byUID := map[string]int{} // uid -> the node of an object that had it
	type uidEdge struct {
		n   int
		uid string
	}
	var refs []uidEdge // resolved once byUID is complete
	for i := range ops {
		op := &ops[i]
		n := node(op.Key())
		for _, o := range []*history.Object{op.Sent, op.Got} {
			if o == nil {
				continue
			}
			if o.UID != "" {
				if m, ok := byUID[o.UID]; ok {
					union(n, m)
				} else {
					byUID[o.UID] = n
				}
			}
			// Sent of a patch is partial and has no key of its own; its
			// references belong to the op's object all the same.
			d := *o
			d.Kind, d.Namespace, d.Name = op.Kind, op.Namespace, op.Name
			for j := range o.Owners {
				r := &o.Owners[j]
				if k, ok := ownerKey(&d, r); ok {
					union(n, node(k))
				}
				refs = append(refs, uidEdge{n, r.UID})
			}
		}
	}
	for _, e := range refs {
		if m, ok := byUID[e.uid]; ok {
			union(e.n, m)
		}
	}
	groups := map[int][]int{}
	var roots []int
	for i := range ops {
		r := find(idx[ops[i].Key()])
		if _, seen := groups[r]; !seen {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([][]int, 0, len(roots))
	for _, r := range roots {
		out = append(out, groups[r])
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}
