package gc

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/impl/bugs"
)

// EventType is the type of an informer event as the graph builder sees it.
type EventType string

// Event types (graph_builder.go addEvent, updateEvent, deleteEvent).
const (
	Added    EventType = "add"
	Modified EventType = "update"
	Deleted  EventType = "delete"
)

// event is one item of graphChanges.
type event struct {
	// virtual: constructed by a worker (enqueueVirtualDeleteEvent) after a
	// live GET found the item absent, not delivered by an informer.
	virtual bool
	typ     EventType
	obj     *metav1.PartialObjectMetadata
	// old is the informer's previous version of obj for updates: in Auto
	// mode the informer's oldObj, in Stepped mode the version the graph
	// builder was last given (a skipped event was never in the store).
	old *metav1.PartialObjectMetadata
	// replaces (Stepped mode) is the UID of the object of the same name
	// the graph builder was last given, when a relist skipped that
	// object's delete: client-go's stores are keyed by namespace/name, so
	// Replace hands this event on as an update from it, never its delete
	// (kubernetes#133565). "" for none.
	replaces types.UID
	gvk      schema.GroupVersionKind
	gvr      schema.GroupVersionResource
	// listed: an add from the informer's initial list. The reflector's
	// streaming list (WatchListClient) collects the initial events in a
	// map-backed store and replaces with its List(), so they reach the
	// handler in no fixed order (see Stepper.head).
	listed bool
}

// identity is identityFromEvent.
func (ev *event) identity() Identity {
	return Identity{APIVersion: ev.gvk.GroupVersion().String(), Kind: ev.gvk.Kind,
		Namespace: ev.obj.Namespace, Name: ev.obj.Name, UID: ev.obj.UID}
}

func beingDeleted(o metav1.Object) bool { return o.GetDeletionTimestamp() != nil }

func hasFinalizer(o metav1.Object, f string) bool { return slices.Contains(o.GetFinalizers(), f) }

// processGraphChanges applies one event to the graph (graph_builder.go
// processGraphChanges). It is the graph's only writer but for
// attemptToOrphanItem, which takes detached nodes and their orphanQueued
// flags: Auto mode calls it from one goroutine, Stepped mode from the
// caller's Deliver.
func (gc *GarbageCollector) processGraphChanges(ctx context.Context, ev *event) {
	log := ctrllog.FromContext(ctx)
	if f := gc.opts.OnGraphChange; f != nil && !ev.virtual {
		// deferred first, so it runs once the lock is released
		c := GraphChange{UID: ev.obj.UID, ResourceVersion: ev.obj.ResourceVersion, Deleted: ev.typ == Deleted}
		if ev.old != nil && ev.old.UID != ev.obj.UID {
			c.Replaced = ev.old.UID
		}
		defer f(c)
	}
	g := &gc.graph
	g.mu.Lock()
	defer g.mu.Unlock()

	uid := ev.obj.UID
	existing := g.nodes[uid]
	if existing != nil && !ev.virtual && existing.virtual {
		// The first informer event about a node built from references:
		// dependents whose references disagree with the observed
		// coordinates are re-examined (the bad child -> good parent order;
		// addDependentToOwners covers the other order).
		observed := ev.identity()
		if observed != existing.identity {
			_, invalid := g.partitionDependents(existing.dependentUIDs(), observed)
			for _, d := range invalid {
				if observed.Namespace != "" && d.identity.Namespace != observed.Namespace {
					gc.reportInvalidNamespaceOwnerRef(d, observed.UID)
				}
				gc.attemptToDelete.Add(d.identity)
			}
			log.V(2).Info("replacing virtual item with observed item", "virtual", existing.identity, "observed", observed)
			existing.identity = observed
		}
		existing.virtual = false // markObserved
		existing.created = createdOrder(ev.obj.ResourceVersion)
	}

	switch {
	case ev.typ != Deleted && existing == nil:
		n := &node{
			identity:           ev.identity(),
			owners:             ev.obj.OwnerReferences,
			dependents:         map[types.UID]uint64{},
			created:            createdOrder(ev.obj.ResourceVersion),
			beingDeleted:       beingDeleted(ev.obj),
			deletingDependents: beingDeleted(ev.obj) && hasFinalizer(ev.obj, metav1.FinalizerDeleteDependents),
		}
		g.nodes[uid] = n // insertNode
		gc.addDependentToOwners(ctx, n, n.owners)
		// The informer may have folded a creation and a deletion into one
		// event, so transitions are checked for new nodes too.
		gc.processTransitions(ctx, ev.old, ev.obj, n)

	case ev.typ != Deleted:
		added, removed, changed := referencesDiffs(existing.owners, ev.obj.OwnerReferences)
		if len(added)+len(removed)+len(changed) > 0 {
			gc.addUnblockedOwnersToDeleteQueue(removed, changed)
			existing.owners = ev.obj.OwnerReferences
			gc.addDependentToOwners(ctx, existing, added)
			g.removeDependentFromOwners(existing, removed)
		}
		if beingDeleted(ev.obj) {
			existing.beingDeleted = true // markBeingDeleted: one way
		}
		gc.processTransitions(ctx, ev.old, ev.obj, existing)

	default: // Deleted
		if existing == nil {
			log.V(5).Info("item doesn't exist in the graph, this shouldn't happen", "uid", uid)
			return
		}
		if ev.virtual && !gc.bugs.Has(bugs.UIDOnlyIdentity) && !gc.keepOnVirtualDelete(existing, ev.identity()) {
			return
		}
		g.removeNode(existing)
		if existing.orphanQueued {
			g.detached[uid] = existing
		}
		deps := existing.dependentUIDs()
		if len(deps) > 0 {
			gc.absent.Add(ev.identity())
		}
		for _, du := range deps {
			if d := g.nodes[du]; d != nil {
				gc.attemptToDelete.Add(d.identity)
			}
		}
		for _, o := range existing.owners {
			// let attemptToDeleteItem see whether a foreground owner's
			// dependents are all gone now
			if on := g.nodes[o.UID]; on != nil && on.deletingDependents {
				gc.attemptToDelete.Add(on.identity)
			}
		}
	}
}

// keepOnVirtualDelete handles a virtual delete event whose coordinates may
// not be the node's (kubernetes#92743). It returns true when the node is
// to be removed as usual; otherwise it has done what the event calls for:
// cache the verified identity as absent and requeue the dependents that
// use it, and for a virtual node verified under its own identity switch
// to an alternate identity other dependents use.
func (gc *GarbageCollector) keepOnVirtualDelete(existing *node, deleted Identity) (remove bool) {
	g := &gc.graph
	if existing.virtual {
		matching, nonmatching := g.partitionDependents(existing.dependentUIDs(), deleted)
		if len(nonmatching) == 0 {
			return true
		}
		if len(matching) > 0 {
			gc.absent.Add(deleted)
			for _, d := range matching {
				gc.attemptToDelete.Add(d.identity)
			}
		}
		if existing.identity == deleted {
			if alt, ok := getAlternateOwnerIdentity(nonmatching, deleted); ok {
				existing.identity = alt
				gc.attemptToDelete.AddRateLimited(existing.identity)
			}
		}
		return false
	}
	if existing.identity == deleted {
		return true
	}
	// an observed node outlives a virtual delete of other coordinates
	matching, _ := g.partitionDependents(existing.dependentUIDs(), deleted)
	if len(matching) > 0 {
		gc.absent.Add(deleted)
		for _, d := range matching {
			gc.attemptToDelete.Add(d.identity)
		}
	}
	return false
}

// removeNode deletes n from uidToNode and from its owners' dependents.
func (g *graph) removeNode(n *node) {
	delete(g.nodes, n.identity.UID)
	g.removeDependentFromOwners(n, n.owners)
}

func (g *graph) removeDependentFromOwners(n *node, owners []metav1.OwnerReference) {
	for _, r := range owners {
		if on := g.nodes[r.UID]; on != nil {
			delete(on.dependents, n.identity.UID)
		}
	}
}

// addDependentToOwners (graph_builder.go) links n to its owners. An owner
// not in the graph becomes a virtual node in n's namespace, queued so that
// attemptToDelete verifies it against the API server. A reference whose
// owner node lives in another namespace, or whose coordinates disagree
// with the owner node's, or that names a virtual cluster-scoped owner
// from another namespace (kubernetes#98040), sends n itself to
// attemptToDelete to have its references verified. Caller holds the lock.
func (gc *GarbageCollector) addDependentToOwners(ctx context.Context, n *node, owners []metav1.OwnerReference) {
	g := &gc.graph
	log := ctrllog.FromContext(ctx)
	potentiallyInvalid := false
	for _, ref := range owners {
		on := g.nodes[ref.UID]
		if on == nil {
			on = &node{identity: ownerIdentity(ref, n.identity.Namespace), dependents: map[types.UID]uint64{}, virtual: true}
			log.V(5).Info("add virtual item", "identity", on.identity)
			g.nodes[ref.UID] = on
			on.dependents[n.identity.UID] = n.created
			gc.attemptToDelete.Add(on.identity)
			continue
		}
		on.dependents[n.identity.UID] = n.created
		if potentiallyInvalid {
			continue
		}
		ownerNamespaced := on.identity.Namespace != ""
		switch {
		case ownerNamespaced && on.identity.Namespace != n.identity.Namespace:
			if !on.virtual {
				log.V(2).Info("item references an owner but does not match namespaces", "item", n.identity, "owner", on.identity)
				gc.reportInvalidNamespaceOwnerRef(n, ref.UID)
			}
			potentiallyInvalid = true
		case !refMatches(ref, on.identity):
			potentiallyInvalid = true
		case !ownerNamespaced && on.identity.Namespace != n.identity.Namespace && on.virtual:
			potentiallyInvalid = true
		}
	}
	if potentiallyInvalid {
		gc.attemptToDelete.Add(n.identity)
	}
}

// addUnblockedOwnersToDeleteQueue: an owner waiting in foreground is
// re-examined when a blocking reference to it is removed or unblocked.
func (gc *GarbageCollector) addUnblockedOwnersToDeleteQueue(removed []metav1.OwnerReference, changed []refPair) {
	g := &gc.graph
	for _, r := range removed {
		if blocks(r) {
			if on := g.nodes[r.UID]; on != nil {
				gc.attemptToDelete.Add(on.identity)
			}
		}
	}
	for _, c := range changed {
		if blocks(c.old) && !blocks(c.new) {
			if on := g.nodes[c.new.UID]; on != nil {
				gc.attemptToDelete.Add(on.identity)
			}
		}
	}
}

// deletionStartsWithFinalizer is level-triggered since kubernetes#81081:
// it fires when new is being deleted with finalizer f and old was not
// both. The edge-triggered-transitions bug restores the older edge on the
// deletionTimestamp alone, so a second delete that only adds f to an
// object already being deleted goes unnoticed (kubernetes#77081).
func (gc *GarbageCollector) deletionStartsWithFinalizer(old, new metav1.Object, f string) bool {
	if !beingDeleted(new) || !hasFinalizer(new, f) {
		return false
	}
	if old == nil {
		return true
	}
	if gc.bugs.Has(bugs.EdgeTriggeredTransitions) {
		return !beingDeleted(old)
	}
	return !beingDeleted(old) || !hasFinalizer(old, f)
}

// processTransitions starts orphaning, or foreground deletion: every
// dependent (not only blocking ones) and the node itself go to
// attemptToDelete.
func (gc *GarbageCollector) processTransitions(ctx context.Context, old, new *metav1.PartialObjectMetadata, n *node) {
	var oldObj metav1.Object
	if old != nil {
		oldObj = old
	}
	if gc.deletionStartsWithFinalizer(oldObj, new, metav1.FinalizerOrphanDependents) {
		n.orphanQueued = true
		gc.attemptToOrphan.Add(n.identity)
		return
	}
	if gc.deletionStartsWithFinalizer(oldObj, new, metav1.FinalizerDeleteDependents) {
		ctrllog.FromContext(ctx).V(2).Info("item is waiting for its dependents to be deleted", "item", n.identity)
		// a node that was virtual may not have the flag yet
		n.deletingDependents = true
		for _, du := range n.dependentUIDs() {
			if d := gc.graph.nodes[du]; d != nil {
				gc.attemptToDelete.Add(d.identity)
			}
		}
		gc.attemptToDelete.Add(n.identity)
	}
}

// reportInvalidNamespaceOwnerRef emits the OwnerRefInvalidNamespace
// Warning about dependent n, whose reference to ownerUID names a
// namespaced owner that is not in n's namespace.
func (gc *GarbageCollector) reportInvalidNamespaceOwnerRef(n *node, ownerUID types.UID) {
	for _, r := range n.owners {
		if r.UID != ownerUID {
			continue
		}
		ref := &corev1.ObjectReference{Kind: n.identity.Kind, APIVersion: n.identity.APIVersion,
			Namespace: n.identity.Namespace, Name: n.identity.Name, UID: n.identity.UID}
		invalid := ownerIdentity(r, n.identity.Namespace)
		gc.recorder.Eventf(ref, corev1.EventTypeWarning, "OwnerRefInvalidNamespace",
			"ownerRef %s does not exist in namespace %q", invalid, n.identity.Namespace)
		return
	}
}
