package model

import (
	"slices"
	"strings"
)

// UID identifies an object incarnation. The model allocates UIDs in order
// of creation; 0 means "none". Traces never print raw UIDs: see UIDLabel.
type UID uint32

// Label is one label key=value.
type Label struct{ Key, Value string }

// OwnerRef is a metav1.OwnerReference reduced to what deletion reads. Kind
// is the API kind as written, which may name a kind nobody serves.
type OwnerRef struct {
	Kind       string
	Name       string
	UID        UID
	Controller bool
	Block      bool // blockOwnerDeletion
	// ControllerUnset and BlockUnset record a field left out (nil) rather
	// than false. Every reader takes an unset field for false, as
	// upstream's do; the API server's dedup and the GC's referencesDiffs
	// compare the fields, so nil and false references differ there.
	ControllerUnset, BlockUnset bool
}

// Object is one API object as the store holds it.
//
// Slices inside a stored Object are never mutated in place: every change
// builds a new slice. States can therefore share them, and Clone is a
// shallow copy of the top-level slices.
type Object struct {
	UID        UID
	Kind       KindID
	Namespace  string // "" for cluster-scoped kinds
	Name       string
	Owners     []OwnerRef
	Finalizers []string
	Labels     []Label // sorted by key
	Selector   Label   // adopters adopt ownerless objects carrying this label
	Replicas   int
	Deleting   bool // deletionTimestamp != nil
	// RV is this object's resourceVersion. Real resourceVersions are global
	// and opaque; the model keeps a per-object counter, which is all that
	// preconditions can observe and which keeps unrelated writes from
	// making states distinct.
	RV int
}

// Key returns the object's trace key: kind/name in the default namespace
// or for cluster-scoped kinds, kind/namespace/name otherwise.
func (o *Object) Key() string { return ObjKey(o.Kind, o.Namespace, o.Name) }

// ObjKey formats a trace key.
func ObjKey(k KindID, ns, name string) string {
	if ns == "" || ns == DefaultNamespace {
		return k.Info().Short + "/" + name
	}
	return k.Info().Short + "/" + ns + "/" + name
}

// DefaultNamespace is the namespace of keys written without one.
const DefaultNamespace = "default"

// HasFinalizer reports whether the object lists f.
func (o *Object) HasFinalizer(f string) bool { return slices.Contains(o.Finalizers, f) }

// Label returns the value of a label and whether it is set.
func (o *Object) Label(key string) (string, bool) {
	for _, l := range o.Labels {
		if l.Key == key {
			return l.Value, true
		}
	}
	return "", false
}

// OwnerRefTo returns the object's ownerReference with the given UID.
func (o *Object) OwnerRefTo(uid UID) (OwnerRef, bool) {
	for _, r := range o.Owners {
		if r.UID == uid {
			return r, true
		}
	}
	return OwnerRef{}, false
}

// Identity is the GC's objectReference: coordinates plus namespace.
type Identity struct {
	Kind      string
	Namespace string
	Name      string
	UID       UID
}

// identityOf returns the identity the GC derives from an observed object
// (identityFromEvent).
func identityOf(o *Object) Identity {
	return Identity{Kind: o.Kind.Info().Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
}

// EventType is a watch event's type.
type EventType uint8

// Watch event types.
const (
	Added EventType = iota
	Modified
	Deleted
)

// WatchEvent is one notification in a watcher's queue: the object as it
// was after the change (its final state for Deleted).
type WatchEvent struct {
	Type EventType
	Obj  Object
	// Replaces is the UID of the object of the same kind, namespace and
	// name that the informer's store last held, when a relist (OpCoalesce)
	// skipped that object's delete: client-go's stores are keyed by
	// namespace/name, so Replace hands this event on as an update from
	// the old object (RealFIFO.Replace, processDeltas), never as a delete
	// of it (kubernetes#133565, closed unmerged). 0 for none.
	Replaces UID
}

// Watcher is an informer: per-kind FIFO queues of pending notifications
// and a cache of the last version delivered. Queues are per kind because
// upstream runs one informer per resource and nothing orders events of
// different resources (kubernetes#26120).
type Watcher struct {
	// Queues is indexed by KindID; nil means every queue is empty. It is
	// shared between states: writers go through setQueue.
	Queues *[NumKinds][]WatchEvent
	Cache  []Object // sorted by UID
}

// queue returns the pending events of kind k.
func (w *Watcher) queue(k KindID) []WatchEvent {
	if w.Queues == nil {
		return nil
	}
	return w.Queues[k]
}

// Events lists every pending event, queue by queue in kind order.
func (w *Watcher) Events() []WatchEvent {
	var out []WatchEvent
	for _, q := range w.queues() {
		out = append(out, q...)
	}
	return out
}

// queues returns all queues (a zero array when none is pending).
func (w *Watcher) queues() *[NumKinds][]WatchEvent {
	if w.Queues == nil {
		return &[NumKinds][]WatchEvent{}
	}
	return w.Queues
}

// Watcher slices are copy-on-write: a queue only ever grows by appending
// to a clipped copy and shrinks by reslicing, and the cache is replaced,
// never written in place. Cloning a Watcher is therefore a plain copy.

// Node is a vertex of the GC's dependency graph (graph.go node).
type Node struct {
	Identity
	Owners             []OwnerRef // as last observed
	Dependents         []UID      // sorted
	Virtual            bool       // built from an ownerReference, never observed
	BeingDeleted       bool
	DeletingDependents bool
}

// WriteOp is a GC request decided by a work item and sent later.
type WriteOp uint8

// GC writes.
const (
	WriteDelete      WriteOp = iota // deleteObject
	WritePatchOwners                // remove dangling/waiting ownerReferences
	WriteUnblock                    // set blockOwnerDeletion=false (cycle breaking)
)

// Write is a request the GC decided on from its live GETs and has not
// sent yet. Sending it is a separate step so that other actors can change
// the object between the GET and the write.
type Write struct {
	Op     WriteOp
	Item   Identity
	Policy Policy     // WriteDelete
	RV     int        // WriteDelete: latest.ResourceVersion precondition (0: none)
	Owners []OwnerRef // WriteDelete: ownersAtResourceVersion; WriteUnblock: refs to unblock
	Remove []UID      // WritePatchOwners: ownerReference UIDs to drop
	// Waited (WriteDelete) lists the owners classifyReferences found
	// waiting for dependents when the GC decided the delete: ghost state
	// that lets no solid owner collected tell an owner that stopped
	// waiting before the DELETE landed (a known upstream race) from one
	// the GC should have seen as solid.
	Waited []UID
}

// GC is the garbage collector's in-memory state.
type GC struct {
	Watch           Watcher
	Nodes           []Node     // uidToNode, sorted by UID
	VirtualEvents   []Identity // virtual delete events queued on graphChanges
	AttemptToDelete []Identity // work queue as a set, sorted by UID, of the identities last queued
	AttemptToOrphan []Identity // (a queued node stays nameable after removal)
	// Detached keeps the dependents of nodes removed from the graph while
	// queued for attemptToOrphan, sorted by UID: upstream's queue holds
	// the *node, and removeNode leaves its dependents as they were, so
	// attemptToOrphanWorker still orphans them (a second DELETE, say
	// Background, removing an owner whose orphan deletion the GC had
	// queued; found by cascade fuzz --target impl --write-delay).
	Detached []Detached
	InFlight []InFlight // decided writes, sorted by item UID
	Absent   []Identity // absentOwnerCache, sorted
	// Monitored has a bit per custom kind the GC has a monitor (informer)
	// for. Built-in kinds are always monitored; a custom kind is monitored
	// from the GC's first discovery sync after its CRD appears (gc.Sync,
	// every 30s upstream) until the sync after it goes.
	Monitored uint32
}

// monitors reports whether the GC has an informer for kind k.
func (g *GC) monitors(k KindID) bool {
	return !k.Info().Custom || g.Monitored&(1<<k) != 0
}

// Detached is a node removed from the graph while queued for
// attemptToOrphan, as that work item still sees it: its dependents when
// it was removed.
type Detached struct {
	UID        UID
	Dependents []UID // sorted
}

// detached finds a detached node by UID.
func (g *GC) detached(uid UID) (int, bool) {
	return slices.BinarySearchFunc(g.Detached, uid, func(d Detached, u UID) int { return cmpUID(d.UID, u) })
}

// detach keeps the dependents of a node removed while queued for
// attemptToOrphan (GC.Detached).
func (s *State) detach(uid UID, deps []UID) {
	g := &s.GC
	j, ok := g.detached(uid)
	d := Detached{UID: uid, Dependents: deps}
	if ok {
		g.Detached = slices.Clone(g.Detached)
		g.Detached[j] = d
		return
	}
	g.Detached = slices.Insert(slices.Clone(g.Detached), j, d)
}

// InFlight is a work item whose writes are decided but not all sent.
type InFlight struct {
	UID    UID
	Writes []Write
}

// Controller is the adopting controller's informer state.
type Controller struct {
	Watch Watcher
}

// OrphanWatch records that Dep referenced Owner when Owner's orphan
// deletion was accepted. Seen records whether the GC's graph knew Dep as
// a dependent when attemptToOrphan ran (false: the kubernetes#26120 race).
// Switched records that the orphan request came after Owner's deletion
// had already started under another policy. Overridden records how a GC
// DELETE then took the orphan finalizer away from Owner, or a GC patch
// put Dep's reference to Owner back, if one did.
type OrphanWatch struct {
	Owner, Dep          UID
	Ran, Seen, Switched bool
	Overridden          Override
}

// Override is how a GC DELETE switched an orphan deletion under way to
// another policy (ghost state for orphan respected).
type Override uint8

// Overrides.
const (
	NotOverridden Override = iota
	// OverriddenByRetry: deleteObject's DELETE failed its
	// resourceVersion precondition and its retry without one, decided
	// before the orphan request, switched it (KnownRetryWithoutRV).
	OverriddenByRetry
	// OverriddenByWaiting: attemptToDeleteItem's waiting branch, whose
	// GET had read the orphan deletion, asked for Foreground
	// (KnownForegroundOverridesOrphan).
	OverriddenByWaiting
	// PutBackByUnblock: not the owner's deletion but Dep's reference to
	// Owner, which the orphaning had removed: the GC's unblock patch,
	// built from a graph that had not seen the removal, put it back
	// (KnownStaleGraph).
	PutBackByUnblock
	// OverriddenByStaleItem: attemptToOrphan's removeFinalizer for an
	// earlier owner of the same name, queued before that owner went,
	// took the orphan finalizer off Owner before Owner's own
	// attemptToOrphan ran (KnownStaleOrphanItem).
	OverriddenByStaleItem
)

// UIDInfo is what the model remembers of a UID it handed out.
type UIDInfo struct {
	Kind      KindID // NoKind for a symbolic UID that names no object
	Namespace string
	Name      string
	Symbol    string // symbolic UIDs from traces, e.g. uid=stale
	Nth       int    // incarnation of this key, from 1
}

// State is one state of the whole system.
type State struct {
	Objects    []Object // the API store, sorted by UID
	UIDs       []UIDInfo
	GC         GC
	Controller Controller
	// Orphans and Events are ghost state for properties and dumps:
	// OwnerRefInvalidNamespace events are real API objects upstream, kept
	// here as their message text.
	Orphans []OrphanWatch
	Events  []string
	// Budget is opaque to the model; the checker uses it to remember which
	// scope operations a path has used.
	Budget uint64

	// mem is where steps from this state allocate (see memory); nil
	// means the heap.
	mem memory
}

// NewState returns the empty initial state.
func NewState() *State {
	s := &State{}
	return s
}

// Get returns the live object with this UID.
func (s *State) Get(uid UID) *Object { return objectByUID(s.Objects, uid) }

// Lookup returns the live object of a kind, namespace and name.
func (s *State) Lookup(k KindID, ns, name string) *Object {
	for i := range s.Objects {
		o := &s.Objects[i]
		if o.Kind == k && sameString(o.Name, name) && sameString(o.Namespace, ns) {
			return o
		}
	}
	return nil
}

func cmpUID(a, b UID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// UIDLabel names a UID the way traces do: the key of the object it was
// made for, with #n for later incarnations of the same key, or its symbol.
func (s *State) UIDLabel(u UID) string {
	if u == 0 || int(u) > len(s.UIDs) {
		return "none"
	}
	in := s.UIDs[u-1]
	if in.Kind == NoKind {
		return in.Symbol
	}
	k := ObjKey(in.Kind, in.Namespace, in.Name)
	if in.Nth > 1 {
		k += "#" + itoa(in.Nth)
	}
	return k
}

// UIDBySymbol finds a symbolic UID.
func (s *State) UIDBySymbol(sym string) (UID, bool) {
	for i, in := range s.UIDs {
		if in.Kind == NoKind && in.Symbol == sym {
			return UID(i + 1), true
		}
	}
	return 0, false
}

// UIDByLabel resolves a label printed by UIDLabel.
func (s *State) UIDByLabel(label string) (UID, bool) {
	for i := range s.UIDs {
		if s.UIDLabel(UID(i+1)) == label {
			return UID(i + 1), true
		}
	}
	return 0, false
}

// node returns the graph node for a UID.
func (g *GC) node(uid UID) *Node {
	if i, ok := nodeIndex(g.Nodes, uid); ok {
		return &g.Nodes[i]
	}
	return nil
}

// Node returns the graph node for a UID, or nil.
func (g *GC) Node(uid UID) *Node { return g.node(uid) }

// KeepStaleNode records, from evidence outside the model, that the GC's
// graph keeps an observed node for id, an object that left storage,
// which its informer dropped without a delete event: a real GC's
// recorded graph changes, or an audit log showing id's name taking a new
// UID while the GC's watch of its resource was broken. The quiescent
// properties read it as they read the model's own graph
// (KnownRelistUIDChange). For states the harness builds from a real
// cluster, whose GC graph the model does not otherwise hold.
func (s *State) KeepStaleNode(id Identity) {
	s.ownNodes() // the nodes may be shared with the state s was copied from
	s.putNode(Node{Identity: id})
}

// removeNode drops the node with this UID (UIDs are unique in the
// graph); the caller owns the nodes (ownNodes).
func (g *GC) removeNode(uid UID) {
	if i, ok := nodeIndex(g.Nodes, uid); ok {
		g.Nodes = slices.Delete(g.Nodes, i, i+1)
	}
}

func hasUID(set []UID, u UID) bool {
	_, ok := slices.BinarySearch(set, u)
	return ok
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// formatLabels renders labels as k=v,k2=v2.
func formatLabels(ls []Label) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Key + "=" + l.Value
	}
	return strings.Join(parts, ",")
}
