package model

import (
	"fmt"
	"slices"
	"strings"
)

// Bug is one entry of the bug catalogue: a switch that restores one
// documented buggy behaviour (shared/reference/known-bugs.md), so that
// every race has a model counterexample and, in impl, a real reproduction.
type Bug uint8

// The catalogue. Names are stable: traces, CLI flags and impl's --inject
// use them.
const (
	BugAdoptWithoutRecheck Bug = iota
	BugEdgeTriggeredTransitions
	BugLostFirstUpdate
	BugLookupIgnoresScope
	BugUIDOnlyIdentity
	BugDeleteWithoutRVPrecondition
	BugNoCycleUnblock
	BugDeleteDependentsWithoutPolicy
	BugForgetUnobservedVirtual
	BugProtectionDisabled
	BugFinalizerAfterDeletion
	numBugs
)

// BugInfo documents a bug switch.
type BugInfo struct {
	Name     string
	KnownBug string // known-bugs.md entry
	Upstream string // issue and fix
	Breaks   string // the property it is expected to break
	Doc      string
}

// Bugs is the catalogue, indexed by Bug.
var Bugs = [numBugs]BugInfo{
	BugAdoptWithoutRecheck: {"adopt-without-recheck", "B01", "kubernetes#42639, fixed by #42938",
		PropOrphanRespected, "The adopting controller adopts from its cache without a live GET of the owner's deletionTimestamp, so it can re-add an ownerReference the orphan step just removed."},
	BugEdgeTriggeredTransitions: {"edge-triggered-transitions", "B04", "kubernetes#77081, fixed by #81081",
		PropNoStuckFinalizer, "The graph builder starts orphan/foreground processing only when deletionTimestamp goes from nil to set, so a second delete that adds the finalizer to a terminating object is never acted on."},
	BugLostFirstUpdate: {"lost-first-update", "B05", "kubernetes#115570 (open)",
		PropNoStuckFinalizer, "The GC's informer may update its cache without calling the handler for an update (step `gc lose KEY`), so the graph builder never sees the transition to foreground deletion and the owner's node is beingDeleted but not deletingDependents."},
	BugLookupIgnoresScope: {"lookup-ignores-scope", "B10", "kubernetes#54940, fixed by #57211",
		PropNoSolidOwnerCollected, "A virtual owner node inherits its dependent's namespace and the verification GET uses it even for a cluster-scoped owner kind, so the owner looks absent."},
	BugUIDOnlyIdentity: {"uid-only-identity", "B11", "kubernetes#65200, fixed by #92743",
		PropNoSolidOwnerCollected, "The GC identifies owners by UID alone, as before kubernetes#92743: absentOwnerCache is keyed by UID, and a virtual delete event drops the node and requeues every dependent instead of partitioning them by coordinates. An owner verified absent under a wrong namespace then makes valid dependents of the same UID look dangling."},
	BugDeleteWithoutRVPrecondition: {"delete-without-rv-precondition", "B12", "kubernetes#114603, fixed by #132632",
		PropNoSolidOwnerCollected, "GC deletes carry only a UID precondition, so an ownerReference change between the GC's GET and its DELETE goes unnoticed."},
	BugNoCycleUnblock: {"no-cycle-unblock", "B08", "synchronous GC design, 'Handling circular dependencies'",
		PropNoStuckFinalizer, "attemptToDelete does not patch blockOwnerDeletion=false on an item whose dependent is itself deleting dependents, so a foreground cycle deadlocks."},
	BugDeleteDependentsWithoutPolicy: {"delete-dependents-without-policy", "B03", "kubernetes#47843, fixed by #44058",
		PropNeverSilentlyOrphaned, "The GC deletes dependents without a propagationPolicy, so a dependent kind that defaults to orphaning (ReplicationController, Job) orphans its own dependents in the middle of a cascade."},
	BugForgetUnobservedVirtual: {"forget-unobserved-virtual", "B06", "kubernetes#56121, fixed by #57503",
		PropGarbageCollected, "attemptToDelete forgets a virtual node whose owner still exists instead of requeueing it until observed, so a virtual node whose events an informer relist skipped is stranded and its dependents are never collected."},
	BugProtectionDisabled: {"protection-disabled", "B22", "openkruise/kruise#1526",
		PropProtectionHolds, "The deletion-protection webhook is disabled by an unrelated setting and allows every delete."},
	BugFinalizerAfterDeletion: {"finalizer-after-deletion", "B19", "kubernetes#32339, fixed by #32354",
		PropNoFinalizerAfterDeletion, "Update validation lets a finalizer be added to an object that is already being deleted."},
}

// String returns the bug's catalogue name.
func (b Bug) String() string { return Bugs[b].Name }

// BugByName finds a catalogue entry.
func BugByName(name string) (Bug, error) {
	for i := range Bugs {
		if Bugs[i].Name == name {
			return Bug(i), nil
		}
	}
	return 0, fmt.Errorf("unknown bug %q (known: %s)", name, strings.Join(BugNames(), ", "))
}

// BugNames lists the catalogue names in order.
func BugNames() []string {
	out := make([]string, numBugs)
	for i := range Bugs {
		out[i] = Bugs[i].Name
	}
	return out
}

// AllBugs lists every bug switch.
func AllBugs() []Bug {
	out := make([]Bug, numBugs)
	for i := range out {
		out[i] = Bug(i)
	}
	return out
}

// BugSet is a set of switched-on bugs; the zero value is upstream mode.
type BugSet uint32

// Has reports whether b is on.
func (s BugSet) Has(b Bug) bool { return s&(1<<b) != 0 }

// With returns the set with b switched on.
func (s BugSet) With(b Bug) BugSet { return s | 1<<b }

// List returns the bugs in the set.
func (s BugSet) List() []Bug {
	var out []Bug
	for b := Bug(0); b < numBugs; b++ {
		if s.Has(b) {
			out = append(out, b)
		}
	}
	return out
}

func (s BugSet) String() string {
	var names []string
	for _, b := range s.List() {
		names = append(names, b.String())
	}
	if len(names) == 0 {
		return "upstream"
	}
	return strings.Join(names, ",")
}

// Model is the state machine under a set of bug switches.
type Model struct {
	Bugs BugSet
	// Controllers names (by short kind) the owner kinds whose adopting
	// controller runs; nil means every one, as kube-controller-manager
	// runs them all. A target that runs fewer (impl's stepped adopter
	// manages Herds only) sets it, so that Enabled offers no adoption or
	// release nobody there would make.
	Controllers []string
	// Release is the Kubernetes release whose semantics the model follows
	// (ReleaseChanges); the zero value is DefaultRelease.
	Release Release
}

// controls reports whether the adopting controller of owner kind k runs.
func (m *Model) controls(k KindID) bool {
	return m.Controllers == nil || slices.Contains(m.Controllers, k.Info().Short)
}
