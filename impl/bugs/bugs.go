// Package bugs is impl's bug catalogue: named switches that each restore
// one documented buggy behaviour of the garbage collector, the adopting
// controller or the deletion-protection webhook (shared/reference/known-bugs.md).
//
// The names are the model's (model/bugs.go), so that a trace's `# bug:`
// header, `cascade check --bug` and `cascade gc --inject` all speak of the
// same switch. impl never imports the model: this list is kept in step by
// hand and TestNamesMatchModel compares the two.
package bugs

import (
	"fmt"
	"sort"
	"strings"
)

// Bug names one switch of the catalogue.
type Bug string

// The catalogue, in the model's order.
const (
	// AdoptWithoutRecheck: the adopting controller adopts from its cache
	// without the live GET of the owner (RecheckDeletionTimestamp,
	// kubernetes#42938), so it can re-add an ownerReference the orphan
	// step just removed (B01, kubernetes#42639).
	AdoptWithoutRecheck Bug = "adopt-without-recheck"
	// EdgeTriggeredTransitions: the graph builder starts orphan or
	// foreground processing only when deletionTimestamp goes from nil to
	// set (B04, kubernetes#77081, fixed by #81081).
	EdgeTriggeredTransitions Bug = "edge-triggered-transitions"
	// LostFirstUpdate: the informer updates its cache without calling the
	// handler for an update (B05, kubernetes#115570). Stepped mode offers
	// the `gc lose KEY` step; Auto mode drops the first update that shows
	// an object being deleted.
	LostFirstUpdate Bug = "lost-first-update"
	// LookupIgnoresScope: the live GET of an item keeps the namespace its
	// virtual node inherited even for a cluster-scoped kind (B10,
	// kubernetes#54940, fixed by #57211).
	LookupIgnoresScope Bug = "lookup-ignores-scope"
	// UIDOnlyIdentity: absentOwnerCache is keyed by UID alone and a
	// virtual delete event removes the node and requeues every dependent
	// without partitioning them by coordinates (B11, kubernetes#65200,
	// fixed by #92743).
	UIDOnlyIdentity Bug = "uid-only-identity"
	// DeleteWithoutRVPrecondition: GC deletes carry only a UID
	// precondition (B12, kubernetes#114603, fixed by #132632).
	DeleteWithoutRVPrecondition Bug = "delete-without-rv-precondition"
	// NoCycleUnblock: attemptToDelete never patches blockOwnerDeletion=false
	// to break a foreground cycle (B08).
	NoCycleUnblock Bug = "no-cycle-unblock"
	// DeleteDependentsWithoutPolicy: the GC deletes dependents without a
	// propagationPolicy, so kinds that default to orphaning orphan their
	// own dependents mid-cascade (B03, kubernetes#47843, fixed by #44058).
	DeleteDependentsWithoutPolicy Bug = "delete-dependents-without-policy"
	// ForgetUnobservedVirtual: attemptToDelete forgets a virtual node whose
	// owner exists instead of requeueing it until an informer observes it
	// (B06, kubernetes#56121, fixed by #57503).
	ForgetUnobservedVirtual Bug = "forget-unobserved-virtual"
	// ProtectionDisabled: the deletion-protection webhook allows every
	// delete (B22, openkruise/kruise#1526).
	ProtectionDisabled Bug = "protection-disabled"
	// FinalizerAfterDeletion is an API-server bug: update validation lets
	// a finalizer be added to an object already being deleted (B19,
	// kubernetes#32339, fixed by #32354). impl drives a real, unmodified
	// kube-apiserver, whose validation cannot be switched off from the
	// outside, so Parse rejects this name; only the model can inject it.
	FinalizerAfterDeletion Bug = "finalizer-after-deletion"
)

// All lists the catalogue in the model's order.
var All = []Bug{
	AdoptWithoutRecheck, EdgeTriggeredTransitions, LostFirstUpdate, LookupIgnoresScope,
	UIDOnlyIdentity, DeleteWithoutRVPrecondition, NoCycleUnblock, DeleteDependentsWithoutPolicy,
	ForgetUnobservedVirtual, ProtectionDisabled, FinalizerAfterDeletion,
}

// Injectable reports whether impl can switch b on.
func (b Bug) Injectable() bool { return b != FinalizerAfterDeletion }

// Set is a set of switched-on bugs. The zero value (nil) is upstream mode;
// a Set is never modified after it is built, so it can be shared.
type Set map[Bug]bool

// Has reports whether b is switched on.
func (s Set) Has(b Bug) bool { return s[b] }

// Names lists the switched-on bugs in catalogue order.
func (s Set) Names() []string {
	var out []string
	for _, b := range All {
		if s[b] {
			out = append(out, string(b))
		}
	}
	return out
}

// String renders the set as "upstream" or a comma-separated list.
func (s Set) String() string {
	if len(s) == 0 {
		return "upstream"
	}
	return strings.Join(s.Names(), ",")
}

// Of builds a set from known, injectable bugs; it panics otherwise (use
// Parse for user input).
func Of(bs ...Bug) Set {
	s := Set{}
	for _, b := range bs {
		if !known(b) || !b.Injectable() {
			panic(fmt.Sprintf("bugs: cannot inject %q", b))
		}
		s[b] = true
	}
	return s
}

func known(b Bug) bool {
	for _, k := range All {
		if k == b {
			return true
		}
	}
	return false
}

// Parse reads bug names (as --inject gives them; a name may also be a
// comma-separated list). An unknown name is an error listing the valid
// ones; finalizer-after-deletion is an error explaining why impl cannot
// inject it.
func Parse(names []string) (Set, error) {
	s := Set{}
	for _, arg := range names {
		for _, name := range strings.Split(arg, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			b := Bug(name)
			switch {
			case !known(b):
				return nil, fmt.Errorf("unknown bug %q (known: %s)", name, strings.Join(InjectableNames(), ", "))
			case !b.Injectable():
				return nil, fmt.Errorf("bug %q is in the API server's update validation, which impl cannot change on a real kube-apiserver; only the model can inject it", name)
			}
			s[b] = true
		}
	}
	return s, nil
}

// InjectableNames lists the names Parse accepts, sorted.
func InjectableNames() []string {
	var out []string
	for _, b := range All {
		if b.Injectable() {
			out = append(out, string(b))
		}
	}
	sort.Strings(out)
	return out
}
