package gc

import (
	"container/list"
	"fmt"
	"sort"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl/step"
)

// Identity is the GC's objectReference (graph.go): an owner's coordinates
// as an ownerReference carries them, plus the namespace the GC looks the
// object up in. A virtual node's Namespace is its first dependent's, even
// for a cluster-scoped kind.
type Identity struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// String renders the identity as upstream's objectReference.String does;
// OwnerRefInvalidNamespace events carry this text.
func (id Identity) String() string {
	return fmt.Sprintf("[%s/%s, namespace: %s, name: %s, uid: %s]", id.APIVersion, id.Kind, id.Namespace, id.Name, id.UID)
}

// Key is the identity's trace key.
func (id Identity) Key() step.Key {
	return step.Key{Kind: id.Kind, Namespace: id.Namespace, Name: id.Name, UID: id.UID}
}

// ownerIdentity is ownerReferenceCoordinates plus a namespace.
func ownerIdentity(ref metav1.OwnerReference, namespace string) Identity {
	return Identity{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Namespace: namespace}
}

// refMatches is ownerReferenceMatchesCoordinates: UID, name, kind and
// apiVersion all equal (the namespace is not part of a reference).
func refMatches(ref metav1.OwnerReference, id Identity) bool {
	return ref.UID == id.UID && ref.Name == id.Name && ref.Kind == id.Kind && ref.APIVersion == id.APIVersion
}

// node is a vertex of the dependency graph (graph.go node). Unlike
// upstream, whose node has a lock per field, every node is guarded by the
// one graph lock: processGraphChanges writes under it, workers read short
// snapshots under it and never hold it across an API call.
type node struct {
	identity Identity
	owners   []metav1.OwnerReference
	// dependents maps each dependent's UID to its created order key.
	dependents map[types.UID]uint64
	// created orders nodes by creation: the object's resourceVersion when
	// the graph first observed it, which for an object first seen through
	// its ADDED event is its creation revision (kube-apiserver on etcd3
	// hands out revisions from one counter for every resource). Zero for
	// a virtual node, or a resourceVersion that is not a number.
	created uint64
	// virtual: built from an ownerReference, never observed by an informer.
	virtual bool
	// beingDeleted: deletionTimestamp seen; a one-way flag (markBeingDeleted).
	beingDeleted bool
	// deletingDependents: being deleted with foregroundDeletion.
	deletingDependents bool
	// orphanQueued: queued for attemptToOrphan and not yet taken by it.
	// A node removed from the graph while queued is kept in
	// graph.detached for the work item.
	orphanQueued bool
}

// graph is uidToNode.
type graph struct {
	mu    sync.RWMutex
	nodes map[types.UID]*node
	// detached holds the nodes removed from nodes while queued for
	// attemptToOrphan. Upstream's queue holds the *node, and removeNode
	// leaves its dependents as they were, so attemptToOrphanWorker still
	// orphans them; the queues here are keyed by UID, so the work item
	// finds its node here.
	detached map[types.UID]*node
}

// dependentUIDs returns n's dependents in creation order (UID order
// among equals). Upstream iterates a map and orphans dependents in
// parallel, so any order is upstream's; Stepped mode needs one that is
// deterministic and the model's, whose dependents are ordered by UID and
// whose UIDs count creations. The order shows when one work item writes
// several dependents of one resource: their events queue in that order.
func (n *node) dependentUIDs() []types.UID {
	out := make([]types.UID, 0, len(n.dependents))
	for u := range n.dependents {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		ci, cj := n.dependents[out[i]], n.dependents[out[j]]
		if ci != cj {
			return ci < cj
		}
		return out[i] < out[j]
	})
	return out
}

// createdOrder is a node's created key from the resourceVersion of its
// first observation.
func createdOrder(rv string) uint64 {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// blockingDependents: dependents whose reference to n has
// blockOwnerDeletion=true. It reads the graph only, so a dependent the GC
// has not observed does not block: foreground deletion is best-effort.
// Caller holds the graph lock.
func (g *graph) blockingDependents(n *node) []*node {
	var out []*node
	for _, du := range n.dependentUIDs() {
		d := g.nodes[du]
		if d == nil {
			continue
		}
		for _, r := range d.owners {
			if r.UID == n.identity.UID && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// partitionDependents (graph_builder.go) splits deps into those whose
// reference to owner.UID matches owner's coordinates and those that do
// not; a dependent with several references to the UID can be in both. A
// dependent outside a namespaced owner's namespace never matches.
// Caller holds the graph lock.
func (g *graph) partitionDependents(deps []types.UID, owner Identity) (matching, nonmatching []*node) {
	ownerNamespaced := owner.Namespace != ""
	for _, du := range deps {
		d := g.nodes[du]
		if d == nil {
			continue
		}
		match, mismatch := false, false
		if ownerNamespaced && owner.Namespace != d.identity.Namespace {
			mismatch = true
		} else {
			for _, r := range d.owners {
				if r.UID != owner.UID {
					continue
				}
				if refMatches(r, owner) {
					match = true
				} else {
					mismatch = true
				}
			}
		}
		if match {
			matching = append(matching, d)
		}
		if mismatch {
			nonmatching = append(nonmatching, d)
		}
	}
	return matching, nonmatching
}

// identityLess is referenceLessThan: kind and apiVersion before namespace,
// so kinds order coherently whatever their scope.
func identityLess(a, b Identity) bool {
	switch {
	case a.Kind != b.Kind:
		return a.Kind < b.Kind
	case a.APIVersion != b.APIVersion:
		return a.APIVersion < b.APIVersion
	case a.Namespace != b.Namespace:
		return a.Namespace < b.Namespace
	case a.Name != b.Name:
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

// getAlternateOwnerIdentity (graph_builder.go) picks the identity a
// virtual node takes after its current one was verified absent: among the
// coordinates deps use for the same UID, the first that follows absent in
// identityLess order, else the first; ok is false when there is none.
func getAlternateOwnerIdentity(deps []*node, absent Identity) (Identity, bool) {
	clusterScoped := absent.Namespace == ""
	seen := map[Identity]bool{absent: true}
	var first, following *Identity
	for _, d := range deps {
		for _, r := range d.owners {
			if r.UID != absent.UID {
				continue
			}
			if refMatches(r, absent) && (clusterScoped || absent.Namespace == d.identity.Namespace) {
				continue // the absent identity itself
			}
			id := ownerIdentity(r, d.identity.Namespace)
			if clusterScoped && id.APIVersion == absent.APIVersion && id.Kind == absent.Kind {
				// absent proved this apiVersion/kind cluster-scoped
				id.Namespace = ""
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			c := id
			if first == nil || identityLess(c, *first) {
				first = &c
			}
			if identityLess(absent, c) && (following == nil || identityLess(c, *following)) {
				following = &c
			}
		}
	}
	switch {
	case following != nil:
		return *following, true
	case first != nil:
		return *first, true
	}
	return Identity{}, false
}

// refPair is a changed ownerReference: same UID, other fields differ.
type refPair struct{ old, new metav1.OwnerReference }

// referencesDiffs compares two ownerReference lists by UID as upstream's
// graph_builder.go referencesDiffs does, duplicate UIDs included: the
// LAST old reference to a UID stands for all of them, a UID is matched
// by its first new reference and a second new reference to it is
// "added", and a removed UID is reported once, by its last reference.
// (Upstream lists removed references in map order; this keeps the old
// list's order.)
func referencesDiffs(old, new []metav1.OwnerReference) (added, removed []metav1.OwnerReference, changed []refPair) {
	oldByUID := map[types.UID]metav1.OwnerReference{}
	for _, r := range old {
		oldByUID[r.UID] = r
	}
	unmatched := map[types.UID]bool{}
	for uid := range oldByUID {
		unmatched[uid] = true
	}
	for _, r := range new {
		if !unmatched[r.UID] {
			added = append(added, r)
			continue
		}
		if o := oldByUID[r.UID]; !refEqual(o, r) {
			changed = append(changed, refPair{o, r})
		}
		delete(unmatched, r.UID)
	}
	for _, r := range old {
		if unmatched[r.UID] {
			removed = append(removed, oldByUID[r.UID])
			delete(unmatched, r.UID)
		}
	}
	return added, removed, changed
}

// refEqual compares two references field by field, as reflect.DeepEqual
// does (a nil and a false *bool differ).
func refEqual(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		boolPtrEqual(a.Controller, b.Controller) && boolPtrEqual(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func boolPtrEqual(a, b *bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func refsEqual(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !refEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func blocks(r metav1.OwnerReference) bool {
	return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
}

// absentCache is absentOwnerCache (uid_cache.go ReferenceCache): an LRU of
// identities verified absent, keyed by full coordinates including the
// namespace (kubernetes#92743). With the uid-only-identity bug it keys by
// UID alone, as before that fix.
type absentCache struct {
	mu      sync.Mutex
	max     int
	uidOnly bool
	order   *list.List // front: most recently used
	items   map[Identity]*list.Element
}

func newAbsentCache(max int, uidOnly bool) *absentCache {
	return &absentCache{max: max, uidOnly: uidOnly, order: list.New(), items: map[Identity]*list.Element{}}
}

func (c *absentCache) key(id Identity) Identity {
	if c.uidOnly {
		return Identity{UID: id.UID}
	}
	return id
}

// Add records id as absent.
func (c *absentCache) Add(id Identity) {
	k := c.key(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(k)
	if c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(Identity))
	}
}

// Has reports whether id is recorded absent.
func (c *absentCache) Has(id Identity) bool {
	k := c.key(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if ok {
		c.order.MoveToFront(e)
	}
	return ok
}

// List returns the cached identities, sorted.
func (c *absentCache) List() []Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Identity, 0, len(c.items))
	for k := range c.items {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return identityLess(out[i], out[j]) })
	return out
}
