package model

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// This file is the one registry of known upstream races: every excuse the
// model's properties and harness/lin give a broken rule names an entry
// here (Excuse), and each entry says where upstream the race lives, which
// properties it relaxes, what evidence admits it, and which fixtures show
// it in and out of the race.

// Evidence is what admits a known race: what a checker reads to tell the
// race from a bug.
type Evidence uint8

// Evidence kinds.
const (
	// EvidenceModelState: the model's own state records the race's cause
	// (an in-flight write's decision, the GC's graph), exactly.
	EvidenceModelState Evidence = iota
	// EvidenceAuditOrder: the order of the history's operations shows
	// it (a write returned after another was sent, a refused request
	// before its retry).
	EvidenceAuditOrder
	// EvidenceRecordedReads: the components' recorded GETs show what
	// they read (lin.Options.Reads).
	EvidenceRecordedReads
	// EvidenceGraphChanges: the GC's recorded graph changes show what
	// its graph held and in which order it took events in: impl's
	// (lin.Options.GraphChanges), or, upstream, the graph builder's own
	// log of the events it began to apply (lin.Options.GraphLog).
	EvidenceGraphChanges
	// EvidenceDeliveryRecord: the API proxy's record of the moment each
	// watch event was handed to the real GC's informers shows the GC
	// could not have seen the write yet (lin.Options.Deliveries; the
	// upstream target behind the proxy).
	EvidenceDeliveryRecord
	// EvidenceWindow: a write within the race window (lin's
	// Options.RaceWindow, 1 s by default) before the judged one; the
	// entry's Window says why nothing better admits it.
	EvidenceWindow
)

var evidenceNames = [...]string{"model-state", "audit-order", "recorded-reads", "graph-changes", "delivery-record", "window"}

func (e Evidence) String() string { return evidenceNames[e] }

// Known race IDs. A violation's Known (and harness/lin's Known.Issue) is
// one of these, through Excuse; KnownRaces describes each.
const (
	// KnownUnobservedDependent: the GC had not observed a dependent.
	KnownUnobservedDependent = "kubernetes#26120"
	// KnownPolicySwitch: a DELETE switched a deletion under way.
	KnownPolicySwitch = "kubernetes#32339"
	// KnownAdoptionRecheck: a deletion between a recheck and an adoption.
	KnownAdoptionRecheck = "kubernetes#42938"
	// KnownRemovalBeforeFinalizers: a DELETE removed what it read bare.
	KnownRemovalBeforeFinalizers = "kubernetes#77988"
	// KnownVirtualNamespace: a virtual node's borrowed namespace.
	KnownVirtualNamespace = "kubernetes#124378"
	// KnownForegroundEnded: a write decided while an owner waited.
	KnownForegroundEnded = "foreground-ended"
	// KnownRetryWithoutRV: deleteObject's retry without resourceVersion.
	KnownRetryWithoutRV = "retry-without-rv"
	// KnownForegroundOverridesOrphan: the waiting branch's Foreground
	// DELETE switches a dependent's orphan deletion.
	KnownForegroundOverridesOrphan = "foreground-overrides-orphan"
	// KnownStaleOrphanItem: a stale attemptToOrphan item strips a new
	// same-name owner's orphan finalizer.
	KnownStaleOrphanItem = "stale-orphan-item"
	// KnownStaleOrphanPolicy: Orphan asked from a GET before attemptToOrphan.
	KnownStaleOrphanPolicy = "stale-orphan-policy"
	// KnownStaleGraph: a decision on a graph behind the store.
	KnownStaleGraph = "stale-graph"
	// KnownStaleDuplicateRef: stale references to a duplicated UID.
	KnownStaleDuplicateRef = "stale-duplicate-ref"
	// KnownForegroundCycle: a cycle of foreground deletions.
	KnownForegroundCycle = "foreground-cycle"
	// KnownClusterScopedBlocker: a cluster-scoped blocker the GC gives up on.
	KnownClusterScopedBlocker = "cluster-scoped-blocker"
	// KnownStoppedMonitor: a stopped monitor's nodes outlive their objects.
	KnownStoppedMonitor = "stopped-monitor"
	// KnownOwnerChangeBeforeDelete: a GC DELETE without the
	// resourceVersion precondition, before v1.34.
	KnownOwnerChangeBeforeDelete = "kubernetes#114603"
	// KnownRelistUIDChange: a relist hands a name's new object on as an
	// update from the deleted one, whose node stays in the graph.
	KnownRelistUIDChange = "relist-uid-change"
	// KnownNamespaceDeleteRead: a Namespace DELETE that read the
	// Namespace before another DELETE started its deletion acts as the
	// first.
	KnownNamespaceDeleteRead = "namespace-delete-read"
	// KnownEmptiedFinalizersRemoval: an update that emptied the
	// finalizers of the version it checked removes a later one.
	KnownEmptiedFinalizersRemoval = "emptied-finalizers-removal"
)

// harness/lin's own rules (lin.Prop*), which entries relax by name, and
// the words several entries share.
const (
	knownLinAPISemantics         = "the API server's answers are linearizable"
	knownLinAdoption             = "no adoption by an owner being deleted"
	knownLinGCWrites             = "the GC writes only what it may"
	knownLinResolvable           = "the GC never acts on an unresolvable reference"
	knownLinCycleUnblocked       = "the GC unblocks a foreground cycle before deleting into it"
	knownWindowGCRead            = "only on kubeconfig targets, which record no GC GETs: on envtest targets the GC's recorded GET of the object it decided on, and the version it was answered at, decides"
	knownWindowInformer          = "only where neither record exists: kubeconfig targets and upstream with --no-proxy (nothing shows when the GC had the event); on upstream the API proxy's delivery record decides, on impl the GC's recorded graph changes"
	knownWindowNoReads           = "a kubeconfig target records no controller GETs, so nothing shows whether the controller rechecked"
	knownWindowStaleGraph        = "only where neither record exists: kubeconfig targets and upstream with --no-proxy; on upstream the API proxy's delivery record decides both sites, on impl the GC's recorded graph changes"
	knownWindowPolicySwitch      = "only on kubeconfig targets for a GC decision on a waiting owner (elsewhere the GC's recorded GET decides), and for attemptToOrphan's patch where neither the delivery record nor impl's recorded graph changes exist (kubeconfig, upstream with --no-proxy)"
	knownFixtureTrace            = "traces/"
	knownFixtureLin              = "harness/lin."
	knownFixtureFuzz             = "harness/fuzz."
	knownSiteModel, knownSiteLin = "model ", "lin "
	knownSiteFuzz                = "fuzz "
)

// KnownRace is one entry of the registry.
type KnownRace struct {
	// ID is stable: the upstream issue, or a name for a race cascade
	// found that no upstream issue reports.
	ID string
	// Upstream is the issue, pull request or code path of the race.
	Upstream string
	// Relaxes lists the properties (model.Prop* and harness/lin's own
	// rules, by name) a violation of which the race may explain.
	Relaxes []string
	// Evidence lists what admits the race, over all its sites.
	Evidence []Evidence
	// Window says why nothing better than a timing window admits it,
	// where Evidence holds EvidenceWindow; "" otherwise.
	Window string
	// Sites are the checks that name it: "model checkSolidOwner",
	// "lin gcDelete", ...
	Sites []string
	// Fixtures show it in and out of the race: traces under
	// traces/races/ (the model's sites), harness/lin tests,
	// "harness/lin.TestName" (lin's), and harness/fuzz tests,
	// "harness/fuzz.TestName" (its liveness check's). Each fails with the
	// entry disabled.
	Fixtures []string
	// Releases are the releases that carry the race; the zero range is
	// every release. An excuse holds only on a release the range
	// contains: KnownIn decides it for every site, the model's (Admit)
	// and harness/lin's alike.
	Releases ReleaseRange
	// Component is the component whose release Releases is of: on a
	// skewed control plane (Release.WithKCM), the race is present when
	// that component's release carries it (both releases for
	// EveryComponent).
	Component Component
	// Doc explains it.
	Doc string
}

// Filed reports whether an upstream issue reports the race (its Upstream
// reference starts with one, "kubernetes#N"). The others are races
// cascade found and read in the upstream sources, which no issue names
// yet: a gate owner may weigh the two differently.
func (k *KnownRace) Filed() bool { return strings.HasPrefix(k.Upstream, "kubernetes#") }

// PresentIn reports whether release r carries the race: the release of
// its component (Component).
func (k *KnownRace) PresentIn(r Release) bool { return k.Releases.Contains(r.Or().Of(k.Component)) }

// KnownRaces is the registry, in the order `cascade check --list-known`
// prints it.
var KnownRaces = []KnownRace{
	{ID: KnownUnobservedDependent, Upstream: "kubernetes#26120 item 1 (closed unfixed as lifecycle/rotten): the GC's watches of different resources are not ordered",
		Relaxes:  []string{PropOrphanRespected, PropForegroundWaits},
		Evidence: []Evidence{EvidenceModelState, EvidenceAuditOrder, EvidenceGraphChanges, EvidenceDeliveryRecord, EvidenceWindow},
		Window:   "for a dependent of another resource whose reference was written before the owner's finalizer, " + knownWindowInformer,
		Sites:    []string{"model checkOrphanRespected", "lin gcPatch"},
		Fixtures: []string{"traces/races/kubernetes-26120.trace", "harness/lin.TestKnownOrphanRace", "harness/lin.TestKnownForegroundRace",
			"harness/lin.TestUnobservedDependentOnDeliveries",
			"harness/lin.TestForegroundDecidedBeforeDependentsOnDeliveries", "harness/lin.TestOrphanDecidedBeforeRetriesOnDeliveries",
			"harness/lin.TestOrphanTakesDependentsOnOwnersEvent", "harness/lin.TestOrphanMissesAnotherInformersReference",
			"harness/lin.TestOrphanMissesReferenceLoggedTwice", "harness/lin.TestForegroundUnobservedOnGraphChanges",
			"harness/lin.TestOrphanUnobservedOnGraphChanges"},
		Doc: "The GC processes an owner's orphan or foreground deletion before it has observed a dependent's reference, so attemptToOrphan or processDeletingDependentsItem misses the dependent."},
	{ID: KnownPolicySwitch, Upstream: "kubernetes#32339, fixed by #32354 on the update path only: a DELETE still re-chooses the GC finalizer of a deletion under way",
		Relaxes:  []string{PropOrphanRespected, PropNoSolidOwnerCollected, knownLinGCWrites, knownLinResolvable},
		Evidence: []Evidence{EvidenceModelState, EvidenceRecordedReads, EvidenceGraphChanges, EvidenceDeliveryRecord, EvidenceWindow},
		Window:   knownWindowPolicySwitch,
		Sites:    []string{"model checkSolidOwner", "model checkOrphanRespected", "lin stoppedWaiting", "lin gcPatch (orphan switched to foreground)", "lin gcPatch (orphaning owner removed)"},
		Fixtures: []string{"traces/races/policy-switch-foreground-to-orphan.trace", "harness/lin.TestKnownPolicySwitchRace", "harness/lin.TestOrphanSwitchedToForeground", "harness/lin.TestOrphanSwitchedToBackgroundOnDeliveries",
			"harness/lin.TestOrphanedAfterOwnerRemoved", "harness/lin.TestUnblockAfterWaitEnded/Orphan", "harness/lin.TestOrphanSwitchedToForegroundOnDeliveries",
			"harness/lin.TestOrphanSwitchedOnGraphChanges"},
		Doc: "A DELETE switches a deletion under way between foreground and orphan after the GC decided a write on the old policy, which then lands."},
	{ID: KnownAdoptionRecheck, Upstream: "kubernetes#42938 (RecheckDeletionTimestamp, pkg/controller/controller_ref_manager.go): the window between the recheck GET and the adoption",
		Relaxes:  []string{knownLinAdoption},
		Evidence: []Evidence{EvidenceRecordedReads, EvidenceWindow},
		Window:   "only without recorded reads: " + knownWindowNoReads,
		Sites:    []string{"lin adoption (reads recorded)", "lin adoption (no reads)"},
		Fixtures: []string{"harness/lin.TestKnownAdoptionRace"},
		Doc:      "A controller's recheck GET answers the owner live, the owner's deletion starts, and the adoption lands."},
	{ID: KnownRemovalBeforeFinalizers, Upstream: "kubernetes#77988 (fix #129768 reverted by #133979): registry Store.Delete reads the object, then etcd3 conditionalDelete removes whatever version is current",
		Relaxes:  []string{PropNoRemovalWithFinalizers},
		Evidence: []Evidence{EvidenceAuditOrder},
		Sites:    []string{"lin removal"},
		Fixtures: []string{"harness/lin.TestDeleteFinalizerRace"},
		Doc:      "A DELETE that read a bare object removes it with finalizers a write added after the DELETE was sent (or, on a Pod deleted without grace, a GC finalizer another DELETE added)."},
	{ID: KnownVirtualNamespace, Upstream: "kubernetes#124378: GraphBuilder.addDependentToOwners gives a virtual node its dependent's namespace",
		Relaxes:  []string{PropNoSolidOwnerCollected, knownLinResolvable},
		Evidence: []Evidence{EvidenceModelState, EvidenceGraphChanges, EvidenceDeliveryRecord, EvidenceWindow},
		Window:   "from the object's create, " + knownWindowInformer,
		Sites:    []string{"model checkSolidOwner", "lin borrowedNamespace"},
		Fixtures: []string{"traces/races/virtual-namespace.trace", "harness/lin.TestVirtualNamespace", "harness/lin.TestVirtualNamespaceOnDeliveries",
			"harness/lin.TestVirtualNamespaceOnGraphChanges"},
		Doc: "attemptToDeleteItem runs on a cluster-scoped object's virtual node before the object's event arrives, and resolves its references to namespaced owners in the borrowed namespace."},
	{ID: KnownForegroundEnded, Upstream: "garbagecollector.go attemptToDeleteItem, processDeletingDependentsItem (found by cascade fuzz --target impl --write-delay and the all-policies preset)",
		Relaxes:  []string{PropNoSolidOwnerCollected, knownLinGCWrites},
		Evidence: []Evidence{EvidenceModelState, EvidenceRecordedReads, EvidenceWindow},
		Window:   knownWindowGCRead,
		Sites:    []string{"model checkSolidOwner", "lin stoppedWaiting", "lin waitEnded"},
		Fixtures: []string{"traces/races/foreground-ended.trace", "harness/lin.TestForegroundEndedBeforeDelete", "harness/lin.TestUnblockAfterWaitEnded/Background",
			"harness/lin.TestWaitingRefRemovedAfterWaitEnded", "harness/lin.TestForegroundEndedOnReads"},
		Doc: "A GC write decided while the owner waited for dependents lands after foregroundDeletion went from the owner, still being deleted and so solid; the resourceVersion precondition guards the dependent only."},
	{ID: KnownRetryWithoutRV, Upstream: "garbagecollector.go deleteObject (kubernetes#132632): a DELETE refused on its resourceVersion is retried without one when the ownerReferences are unchanged",
		Relaxes:  []string{PropForegroundWaits, PropNoSolidOwnerCollected, PropOrphanRespected},
		Evidence: []Evidence{EvidenceModelState, EvidenceAuditOrder},
		Sites:    []string{"model checkForegroundWaits", "model checkOrphanRespected", "lin retryRace"},
		Fixtures: []string{"traces/races/gc-background-overrides-foreground.trace", "traces/races/gc-retry-overrides-orphan.trace", "harness/lin.TestRetryWithoutRV"},
		// the retry came with the resourceVersion precondition it drops
		Releases:  ReleaseRange{From: ReleaseChanges[ChangeGCDeleteRV].Since},
		Component: ReleaseChanges[ChangeGCDeleteRV].Component,
		Doc:       "The retried DELETE misses a client write that landed between deleteObject's GET and the retry: a Foreground or Orphan deletion it overrides (the orphaned object's dependents are then collected), or a reference removed or added."},
	{ID: KnownForegroundOverridesOrphan, Upstream: "garbagecollector.go attemptToDeleteItem: the branch for an item whose owner waits for its dependents sends DeletePropagationForeground without looking at an orphan finalizer its GET read, unlike the default branch's \"if an existing orphan finalizer is already on the object, honor it\" (no upstream issue found; found by cascade check --universe trio)",
		Relaxes:  []string{PropOrphanRespected},
		Evidence: []Evidence{EvidenceModelState},
		Sites:    []string{"model checkOrphanRespected"},
		Fixtures: []string{"traces/races/foreground-overrides-orphan.trace"},
		Doc:      "An owner deletes its dependents in the foreground; a client deletes one of them, itself an owner, with Orphan; before the GC's graph sees that deletion (a graph that had would leave the item to attemptToOrphan), attemptToDeleteItem GETs the item, finds its owner waiting and sends a Foreground DELETE, which the API server applies to the deletion under way (kubernetes#32339): the orphan finalizer goes and the item's own dependents are collected."},
	{ID: KnownStaleOrphanItem, Upstream: "operations.go removeFinalizer GETs the owner by name (getObject) and patches its finalizers with the resourceVersion it read, comparing no UID, and attemptToOrphanWorker calls it for the queued node without a GET of its own (v1.37.2; no upstream issue found; found by a model review against the v1.37.2 sources)",
		Relaxes:  []string{PropOrphanRespected},
		Evidence: []Evidence{EvidenceModelState},
		Sites:    []string{"model checkOrphanRespected"},
		Fixtures: []string{"traces/races/stale-orphan-item.trace"},
		Doc:      "An owner is deleted with Orphan and its attemptToOrphan item queued; before the worker takes it, the owner goes (a client removes the orphan finalizer) and a new owner of the same name is created, given a dependent and deleted with Orphan. The stale item orphans the old owner's dependents, then its removeFinalizer GETs the name, finds the new owner and removes its orphan finalizer: the new owner is removed before its own attemptToOrphan ran, and the GC, finding its dependent's owner absent, collects the dependent."},
	{ID: KnownStaleOrphanPolicy, Upstream: "garbagecollector.go attemptToDeleteItem: \"if an existing orphan finalizer is already on the object, honor it\"",
		Relaxes:  []string{PropNeverSilentlyOrphaned},
		Evidence: []Evidence{EvidenceRecordedReads, EvidenceWindow},
		Window:   knownWindowGCRead + " (the model needs no excuse: its in-flight write records the orphan finalizer its decision saw, so checkSilentOrphan passes such a DELETE by rule)",
		Sites:    []string{"lin gcDelete"},
		Fixtures: []string{"harness/lin.TestStaleOrphanPolicy", "harness/lin.TestStaleOrphanPolicyOnReads"},
		Doc:      "A GC DELETE asking for Orphan, as its GET saw the finalizer, puts back the orphan finalizer attemptToOrphan removed since; harmless, attemptToOrphan runs again."},
	{ID: KnownStaleGraph, Upstream: "garbagecollector.go attemptToDeleteItem and unblockOwnerReferencesStrategicMergePatch read the GC's graph, behind the store",
		Relaxes:  []string{knownLinCycleUnblocked, knownLinGCWrites, PropOrphanRespected},
		Evidence: []Evidence{EvidenceModelState, EvidenceGraphChanges, EvidenceDeliveryRecord, EvidenceWindow},
		Window:   knownWindowStaleGraph,
		Sites:    []string{"model checkOrphanRespected", "lin cycleUnblocked", "lin unblockedFromGraph"},
		Fixtures: []string{"traces/races/unblock-puts-back-orphaned-reference.trace", "harness/lin.TestCycleUnblocked", "harness/lin.TestUnblockPutsBackReference",
			"harness/lin.TestCycleUnblockedOnDeliveries", "harness/lin.TestUnblockPutsBackReferenceOnDeliveries", "harness/lin.TestUnblockPutsBackReferenceOnGraphChanges"},
		Doc: "A GC decision reads dependents, references or deletion state from a graph that has not yet applied a recent write; the unblock patch, merged by UID, puts back a reference the orphaning removed, and the dependent is collected for it."},
	{ID: KnownStaleDuplicateRef, Upstream: "graph_builder.go referencesDiffs keys old references by UID (no upstream issue)",
		Relaxes:  []string{PropNoStuckFinalizer, PropGraphAgrees},
		Evidence: []Evidence{EvidenceModelState},
		Sites:    []string{"model checkStuckFinalizer", "model checkGraphAgrees"},
		Fixtures: []string{"traces/races/dedup-stale-blocking-ref.trace", "traces/scenarios/owner-dedup-on-update.trace"},
		Doc:      "When a write collapses several references to one UID, the graph keeps the stale ones, a blocking one included, and a foreground owner waits on it. checkGraphAgrees tolerates the stale references without a violation (a carve-out the entry governs: owner-dedup-on-update fails with it disabled); checkStuckFinalizer names the entry."},
	{ID: KnownForegroundCycle, Upstream: "garbagecollector.go processDeletingDependentsItem and attemptToDeleteItem's unblock (no upstream issue; found by stepped fuzzing of the model)",
		Relaxes:  []string{PropNoStuckFinalizer},
		Evidence: []Evidence{EvidenceModelState},
		Sites:    []string{"model checkStuckFinalizer"},
		Fixtures: []string{"traces/races/foreground-cycle-waiter.trace", "traces/races/foreground-self-block.trace"},
		Doc:      "A cycle whose members all delete their dependents in the foreground is never unblocked, nor is anything waiting on it."},
	{ID: KnownClusterScopedBlocker, Upstream: "garbagecollector.go namespacedOwnerOfClusterScopedObjectErr (no upstream issue; found by stepped fuzzing of the model)",
		Relaxes:  []string{PropNoStuckFinalizer},
		Evidence: []Evidence{EvidenceModelState},
		Sites:    []string{"model checkStuckFinalizer"},
		Fixtures: []string{"traces/races/cluster-scoped-blocker.trace", "traces/races/cluster-scoped-blocker-chain.trace", "traces/races/protected-blocker-retry.trace"},
		Doc:      "A foreground owner waits forever on a cluster-scoped blocking dependent naming a namespaced owner, which the GC gives up on, directly or through blocking dependents it drove into foreground deletion."},
	{ID: KnownStoppedMonitor, Upstream: "graph_builder.go syncMonitors closes a removed resource's monitor and leaves its nodes in the graph (no upstream issue reports the nodes kept; found by stepped fuzzing of the model once runs deleted CRDs; shown on the model and impl only: upstream's shared informer outlives the monitor, its handler still registered (kubernetes#114066; the fix, #142039, open since 2026-09, removes the handler), so the real GC may take the events after all, a model gap)",
		Relaxes:  []string{PropGraphAgrees},
		Evidence: []Evidence{EvidenceModelState},
		Sites:    []string{"model checkGraphAgrees"},
		Fixtures: []string{"traces/races/stopped-monitor-keeps-node.trace"},
		Doc:      "In the model and impl, a discovery sync that finds a CRD gone stops its resource's monitor and informer before the custom resources' deletion events reach the graph; the events go with the informer and their nodes stay in the graph for good. Upstream stops only the monitor: the shared informer runs on with the monitor's handler registered (client-go's dummyController), so the real GC most likely takes those events and removes the nodes. Not shown on the real binary; until the model keeps the informer, the entry excuses a gap of the model's, not a race of upstream's. kubernetes#142039 (open) removes the handler when the monitor stops, after which upstream would drop those events as the model does."},
	{ID: KnownOwnerChangeBeforeDelete, Upstream: "kubernetes#114603, fixed by #132632 in v1.34.0: garbagecollector.go deleteObject sent the UID precondition only",
		Relaxes:   []string{PropNoSolidOwnerCollected, knownLinResolvable},
		Evidence:  []Evidence{EvidenceModelState, EvidenceRecordedReads},
		Sites:     []string{"model checkSolidOwner", "lin gcDelete"},
		Fixtures:  []string{"traces/races/kubernetes-114603.trace", "traces/races/kubernetes-114603-skew.trace", "harness/lin.TestOwnerChangeBeforeDelete"},
		Releases:  ReleaseRange{Until: ReleaseChanges[ChangeGCDeleteRV].Since},
		Component: ReleaseChanges[ChangeGCDeleteRV].Component,
		Doc:       "attemptToDeleteItem GETs a dependent, finds its owners absent and decides to delete it; a client adds a live owner or removes the last reference before the DELETE lands, and the DELETE, without a resourceVersion precondition, collects it. The model sees it in the in-flight write's ownerReferences; harness/lin in the GC's recorded GET of the object and the write that changed its references after it."},
	{ID: KnownRelistUIDChange, Upstream: "kubernetes#133565 (RealFIFO: send DELETE events if an object has changed UID while disconnected, closed unmerged): client-go tools/cache RealFIFO.Replace (reconcileReplacement) and DeltaFIFO.Replace emit deletes only for keys missing from the list, and processDeltas hands a listed key the store holds on as OnUpdate(old, new); graph_builder.go processGraphChanges keys nodes by UID, inserts the new object's node and never removes the old one's",
		Relaxes:  []string{PropGarbageCollected, PropGraphAgrees},
		Evidence: []Evidence{EvidenceModelState, EvidenceGraphChanges, EvidenceAuditOrder},
		Sites:    []string{"model checkGarbageCollected", "model checkGraphAgrees", "fuzz checkLiveness (impl: graph changes)", "fuzz checkLiveness (audit: a name deleted and created again between a kube-apiserver restart and the GC informer's relist)"},
		Fixtures: []string{"traces/races/relist-uid-change.trace", "harness/fuzz.TestLivenessRelistReplacedOwner", "harness/fuzz.TestLivenessRelistFromAudit"},
		Doc:      "An owner is deleted and an object of the same kind, namespace and name created while the GC's watch of that resource is broken (an API server restart, a watch expired); the informer's relist finds the name listed and hands the new object on as an update from the old one, with no delete. The graph builder adds a node for the new UID and keeps the old one's for good, so the old owner's dependents look owned and are never sent to attemptToDelete: garbage is never collected, and the graph keeps a node whose object left storage. The model sees it in its GC's graph, which keeps an observed node its informer's cache dropped; impl's recorded graph changes show the node never removed; an audit log shows the owner's name taking a new UID while the GC's watch of the resource was broken."},
	{ID: KnownNamespaceDeleteRead, Upstream: "pkg/registry/core/namespace/storage/storage.go REST.Delete (every release from v1.29 to v1.37): it GETs the Namespace and takes the first DELETE's branch when that read shows no deletionTimestamp; the branch's GuaranteedUpdate then sets the GC finalizers its options call for on the current version, another DELETE's deletion included (no upstream issue found; found by cascade fuzz --target upstream on v1.33.13)",
		Relaxes:  []string{knownLinAPISemantics},
		Evidence: []Evidence{EvidenceAuditOrder},
		Sites:    []string{"lin delete"},
		Fixtures: []string{"harness/lin.TestNamespaceDeleteRead"},
		Doc:      "Two DELETEs of one Namespace sent before either landed both read it not yet Terminating; the one that lands second re-chooses orphan or foregroundDeletion on the deletion the first started, where a DELETE of a Terminating Namespace changes nothing."},
	{ID: KnownEmptiedFinalizersRemoval, Upstream: "k8s.io/apiserver registry Store.Update (every release from v1.31 to v1.37): an update that empties the finalizers of an object being deleted (kubernetes#77952's delete-during-update) checks its preconditions and ShouldDeleteDuringUpdate in GuaranteedUpdate, then deleteWithoutFinalizers calls Storage.Delete with the update's preconditions, none for a PATCH (defaultUpdatedObjectInfo.Preconditions), which removes whatever version is current; the flaw kubernetes#77988 reports for Store.Delete, on the update path (no upstream issue found; found by cascade fuzz --target upstream --write-delay 200ms --seed 32)",
		Relaxes:  []string{PropNoRemovalWithFinalizers},
		Evidence: []Evidence{EvidenceAuditOrder},
		Sites:    []string{"lin update"},
		Fixtures: []string{"harness/lin.TestUpdateRemovalAfterFinalizerAdded"},
		Doc:      "A write removes the last finalizers of the version its resourceVersion precondition names (the GC's removeFinalizer of foregroundDeletion, say); before its removal a DELETE puts a GC finalizer on (switching the deletion to orphan, kubernetes#32339), and the removal takes the object with that finalizer: the orphan deletion's dependents are then collected, not orphaned."},
}

// KnownRaceByID finds an entry.
func KnownRaceByID(id string) (*KnownRace, bool) {
	for i := range KnownRaces {
		if KnownRaces[i].ID == id {
			return &KnownRaces[i], true
		}
	}
	return nil, false
}

// KnownIn is the registry's word on an excuse a site gave: id itself
// when release r carries the race (KnownRace.Releases), and otherwise ""
// with the reason to add to the violation's message. Sites name races
// from the evidence they see; whether the race exists in the release
// judged is the registry's to say, here, once, so that a site that
// forgets its release cannot excuse what that release does not do.
func KnownIn(id string, r Release) (string, string) {
	k, ok := KnownRaceByID(id)
	if id == "" || !ok || k.PresentIn(r) {
		return id, ""
	}
	in := r.Or().String()
	if r.Or().Skewed() && k.Component != EveryComponent {
		in = k.Component.String() + " " + r.Or().Of(k.Component).String()
	}
	return "", fmt.Sprintf("known race %s would explain it, but the registry has it in releases %s, and %s is not one", id, k.Releases, in)
}

// Admit applies KnownIn to v, judged on m's release: a violation whose
// race that release does not carry stands unexcused. CheckTransition and
// CheckQuiescent apply it to what they return; a caller of a property's
// Check or CheckState of its own applies it itself.
func (m *Model) Admit(v *Violation) *Violation {
	if v == nil || v.Known == "" {
		return v
	}
	if k, why := KnownIn(v.Known, m.kubeRelease()); k == "" {
		v.Known, v.Message = "", v.Message+"; "+why
	}
	return v
}

// disabledKnown is the ID DisableKnownRace switched off, "" for none.
var disabledKnown atomic.Value

// Excuse returns id, the label a violation the race explains carries, or
// "" while the entry is disabled (DisableKnownRace): the violation then
// stands unexcused. Every known-race label goes through it. It panics on
// an id the registry does not hold.
func Excuse(id string) string {
	if _, ok := KnownRaceByID(id); !ok {
		panic(fmt.Sprintf("model.Excuse: %q is not in the known-race registry", id))
	}
	if d, _ := disabledKnown.Load().(string); d == id {
		return ""
	}
	return id
}

// DisableKnownRace switches entry id off until restore is called, so
// that a fixture can show that it fails without the excuse. For tests
// only; it affects every checker in the process.
func DisableKnownRace(id string) (restore func(), err error) {
	if _, ok := KnownRaceByID(id); !ok {
		return nil, fmt.Errorf("no known race %q", id)
	}
	disabledKnown.Store(id)
	return func() { disabledKnown.Store("") }, nil
}

// FixtureKind says which checker a fixture exercises: "trace" for
// traces/*/*.trace (the model), "lin" for harness/lin tests, "fuzz" for
// harness/fuzz tests (its liveness check of real clusters), "" for none.
func FixtureKind(f string) string {
	switch {
	case strings.HasPrefix(f, knownFixtureTrace) && strings.HasSuffix(f, ".trace"):
		return "trace"
	case strings.HasPrefix(f, knownFixtureLin+"Test"):
		return "lin"
	case strings.HasPrefix(f, knownFixtureFuzz+"Test"):
		return "fuzz"
	}
	return ""
}

// LinFixtureTest is the test name (with any subtest) of a harness/lin
// or harness/fuzz fixture.
func LinFixtureTest(f string) string {
	return strings.TrimPrefix(strings.TrimPrefix(f, knownFixtureLin), knownFixtureFuzz)
}

// SiteChecker is the checker a site belongs to: "model", "lin" or
// "fuzz" (harness/fuzz's liveness check).
func SiteChecker(site string) string {
	switch {
	case strings.HasPrefix(site, knownSiteModel):
		return "model"
	case strings.HasPrefix(site, knownSiteLin):
		return "lin"
	case strings.HasPrefix(site, knownSiteFuzz):
		return "fuzz"
	}
	return ""
}
