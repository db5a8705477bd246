package gc

import (
	"k8s.io/apimachinery/pkg/types"

	"fmt"
	"sort"
	"strings"
)

// fingerprint renders everything a Settle round reads and writes on the
// GC's side: the graph (uidToNode and the detached nodes), the
// absentOwnerCache, the held informer and virtual events, the work
// queues with their held writes, and the resourceVersion of each object
// the graph builder was last handed. Two equal fingerprints mean the GC
// is where it was: a round run from it again takes the same steps. A
// write that changed the store shows in a later fingerprint through its
// event's resourceVersion, so a repeat is not mistaken for a settled
// store while its effect is still on the way (Settle's quiet wait covers
// that).
func (s *Stepper) fingerprint() string {
	var b strings.Builder
	g := &s.gc.graph
	g.mu.RLock()
	for _, nodes := range []map[string]*node{byKey(g.nodes), byKey(g.detached)} {
		keys := make([]string, 0, len(nodes))
		for k := range nodes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n := nodes[k]
			fmt.Fprintf(&b, "%s %v v=%t d=%t dd=%t oq=%t o=[", k, n.identity, n.virtual, n.beingDeleted, n.deletingDependents, n.orphanQueued)
			for _, o := range n.owners {
				fmt.Fprintf(&b, "%s/%s/%s/%v/%v ", o.Kind, o.Name, o.UID, ptrBool(o.BlockOwnerDeletion), ptrBool(o.Controller))
			}
			fmt.Fprintf(&b, "] deps=%v\n", n.dependentUIDs())
		}
		b.WriteString("--\n")
	}
	g.mu.RUnlock()
	fmt.Fprintf(&b, "absent=%v\n%s\n", s.gc.AbsentOwners(), s)
	s.mu.Lock()
	var seen []string
	for r, objs := range s.delivered {
		for uid, o := range objs {
			seen = append(seen, fmt.Sprintf("%s %s %s", r, uid, o.ResourceVersion))
		}
	}
	s.mu.Unlock()
	sort.Strings(seen)
	b.WriteString(strings.Join(seen, "\n"))
	return b.String()
}

func byKey(m map[types.UID]*node) map[string]*node {
	out := make(map[string]*node, len(m))
	for u, n := range m {
		out[string(u)] = n
	}
	return out
}

func ptrBool(p *bool) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
