package model

import (
	"errors"
	"fmt"
	"slices"
)

// Actor is who takes a step.
type Actor uint8

// Actors.
const (
	ActorClient Actor = iota
	ActorGC
	ActorController
	ActorAPIExtensions
)

func (a Actor) String() string {
	return [...]string{"client", "gc", "controller", "apiextensions"}[a]
}

// Op is what a step does.
type Op uint8

// Client operations (each one API request).
const (
	OpCreate Op = iota
	OpDelete
	OpAddFinalizer
	OpRemoveFinalizer
	OpAddOwner
	OpRemoveOwner
	OpLabel
	OpUnlabel
	OpScale
	// Internal steps.
	OpDeliver         // watch delivery (gc: the graph builder processes it)
	OpDeliverVirtual  // gc: process a virtual delete event
	OpCoalesce        // an informer relist skips the head event
	OpLose            // gc, BugLostFirstUpdate: cache updated, handler not called
	OpAttemptToDelete // gc work item up to its writes
	OpAttemptToOrphan // gc work item
	OpSync            // gc: discovery sync starts/stops custom-kind monitors
	OpSend            // gc: send the next decided write
	OpAdopt           // controller
	OpRelease         // controller: drop a controller reference that no longer matches
	OpCleanup         // apiextensions: CRD cleanup
)

// OwnerSpec is an ownerReference as a trace writes it: the owner's key
// (whose live UID is taken at apply time) or a symbolic UID.
type OwnerSpec struct {
	Kind       string // API kind name; may name an unserved kind
	Namespace  string // where to look the owner up for its UID
	Name       string
	UIDSym     string // uid=SYM: a symbolic UID instead of the live one
	Controller bool
	Block      bool
	// ControllerUnset and BlockUnset leave the field out of the reference
	// (controller=unset, block=unset) instead of sending false.
	ControllerUnset, BlockUnset bool
}

// Step is one transition. Client fields are unresolved specs: owner keys
// and symbolic UIDs are resolved against the state the step applies to.
type Step struct {
	Actor     Actor
	Op        Op
	Principal Principal
	Target    Target
	// UIDLabel disambiguates GC work items whose keys collide (name
	// reuse): the UIDLabel of the item meant.
	UIDLabel string

	// create
	Labels     []Label
	Selector   Label
	Replicas   int
	Finalizers []string
	Owners     []OwnerSpec

	// delete
	Delete   DeleteOptions
	IfUIDSym string // delete if-uid=LABEL

	// updates
	Finalizer string
	Owner     OwnerSpec
	Label     Label
	IfRV      int

	// controller adopt
	By Target
	// gc send: the write being sent (for printing)
	Write WriteOp
}

// Internal reports whether the step belongs to an internal actor and is
// not a fault.
func (st Step) Internal() bool {
	return st.Actor != ActorClient && st.Op != OpCoalesce && st.Op != OpLose
}

// ErrNotEnabled is wrapped by Apply when a step cannot be taken in a state.
var ErrNotEnabled = errors.New("step not enabled")

func notEnabled(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotEnabled}, args...)...)
}

// Apply takes one step from s. It never modifies s. A step that cannot be
// taken returns an error wrapping ErrNotEnabled; an API request that fails
// is not an error: its Result says how it failed.
func (m *Model) Apply(s *State, st Step) (*State, Result, error) { return m.ApplyStep(s, &st) }

// ApplyStep is Apply without copying the Step (a few hundred bytes) on
// the way: a model checker applies millions. It does not modify *st.
func (m *Model) ApplyStep(s *State, st *Step) (*State, Result, error) {
	n := s.Clone()
	r, err := m.apply(n, st)
	if err != nil {
		return nil, Result{}, err
	}
	return n, r, nil
}

func (m *Model) apply(s *State, st *Step) (Result, error) {
	switch st.Actor {
	case ActorClient:
		return m.applyClient(s, st)
	case ActorGC:
		return m.applyGC(s, st)
	case ActorController:
		return m.applyController(s, st)
	case ActorAPIExtensions:
		c := s.Lookup(st.Target.Kind, "", st.Target.Name)
		if st.Op != OpCleanup || c == nil || !slices.Contains(crdCleanups(s), c.UID) {
			return Result{}, notEnabled("nothing to clean up for %s", st.Target)
		}
		return m.crdCleanup(s, c.UID), nil
	}
	return Result{}, fmt.Errorf("unknown actor %d", st.Actor)
}

// gcPrecondition checks whether the GC step st may be taken in s, for a
// delivery, relist skip, lost update, discovery sync, virtual delete
// event or work item (attemptToDelete, attemptToOrphan): checked is false
// for any other op. Those steps check it first, and once it holds they
// always succeed. It returns what applyGC needs to take the step: the
// queue's kind or the item's UID.
func (m *Model) gcPrecondition(s *State, st *Step) (checked bool, k KindID, uid UID, err error) {
	g := &s.GC
	switch st.Op {
	case OpDeliver:
		k, err = headFor(&g.Watch, st.Target)
	case OpCoalesce:
		if k, err = headFor(&g.Watch, st.Target); err == nil && !g.Watch.canCoalesce(k) {
			err = notEnabled("a relist cannot skip the next %s event", st.Target)
		}
	case OpLose:
		if k, err = headFor(&g.Watch, st.Target); err == nil && (!m.Bugs.Has(BugLostFirstUpdate) || g.Watch.queue(k)[0].Type != Modified) {
			err = notEnabled("gc lose needs bug %s and a pending update", BugLostFirstUpdate)
		}
	case OpSync:
		if start, stop := syncNeeded(s); len(start)+len(stop) == 0 {
			err = notEnabled("gc sync: the monitored resources are up to date")
		}
	case OpDeliverVirtual:
		if len(g.VirtualEvents) == 0 || !s.identMatches(&g.VirtualEvents[0], st) {
			err = notEnabled("next virtual delete event is not for %s", st.Target)
		}
	case OpAttemptToDelete:
		if uid, err = s.findItem(g.AttemptToDelete, st); err == nil && inFlight(g, uid) != nil {
			err = notEnabled("%s is being processed: its writes are in flight", st.Target)
		}
	case OpAttemptToOrphan:
		uid, err = s.findItem(g.AttemptToOrphan, st)
	default:
		return false, 0, 0, nil
	}
	return true, k, uid, err
}

// headFor checks that the head event of the target's kind queue is about
// the target and returns the kind.
func headFor(w *Watcher, t Target) (KindID, error) {
	q := w.queue(t.Kind)
	if len(q) == 0 {
		return 0, notEnabled("no pending %s event", t.Kind.Info().Short)
	}
	if h := &q[0].Obj; h.Namespace != t.Namespace || h.Name != t.Name {
		return 0, notEnabled("next %s event is for %s, not %s", t.Kind.Info().Short, h.Key(), t)
	}
	return t.Kind, nil
}

func (m *Model) applyGC(s *State, st *Step) (Result, error) {
	g := &s.GC
	if checked, k, uid, err := m.gcPrecondition(s, st); checked {
		if err != nil {
			return Result{}, err
		}
		switch st.Op {
		case OpDeliver:
			m.gcDeliver(s, k)
		case OpCoalesce:
			s.coalesce(&g.Watch, k)
		case OpLose:
			s.pop(&g.Watch, k)
		case OpSync:
			m.gcSync(s)
		case OpDeliverVirtual:
			m.gcDeliverVirtual(s)
		case OpAttemptToOrphan:
			m.attemptToOrphan(s, uid)
		case OpAttemptToDelete:
			m.attemptToDelete(s, uid)
		}
		return ok(200), nil
	}
	switch st.Op {
	case OpSend:
		var f *InFlight
		for i := range g.InFlight {
			if s.identMatches(&g.InFlight[i].Writes[0].Item, st) {
				if f != nil {
					return Result{}, notEnabled("%s names several in-flight items; add uid=", st.Target)
				}
				f = &g.InFlight[i]
			}
		}
		if f == nil {
			return Result{}, notEnabled("the gc has no write in flight for %s", st.Target)
		}
		if w := &f.Writes[0]; w.Op != st.Write {
			return Result{}, notEnabled("the next write for %s is %s, not %s", st.Target, writeVerb(w.Op), writeVerb(st.Write))
		}
		return m.sendWrite(s, f.UID), nil
	}
	return Result{}, fmt.Errorf("gc cannot %d", st.Op)
}

func (m *Model) applyController(s *State, st *Step) (Result, error) {
	w := &s.Controller.Watch
	switch st.Op {
	case OpDeliver:
		k, err := headFor(w, st.Target)
		if err != nil {
			return Result{}, err
		}
		s.pop(w, k)
		return ok(200), nil
	case OpCoalesce:
		k, err := headFor(w, st.Target)
		if err != nil {
			return Result{}, err
		}
		if !w.canCoalesce(k) {
			return Result{}, notEnabled("a relist cannot skip the next %s event", st.Target)
		}
		s.coalesce(w, k)
		return ok(200), nil
	case OpAdopt, OpRelease:
		for _, c := range claims(s) {
			o, d := w.cached(c.Owner), w.cached(c.Dep)
			if TargetOf(d) != st.Target || TargetOf(o) != st.By || c.Release != (st.Op == OpRelease) {
				continue
			}
			if c.Release {
				return m.release(s, c), nil
			}
			return m.adopt(s, c), nil
		}
		verb := "adopt"
		if st.Op == OpRelease {
			verb = "release"
		}
		return Result{}, notEnabled("controller would not %s %s by %s", verb, st.Target, st.By)
	}
	return Result{}, fmt.Errorf("controller cannot %d", st.Op)
}

// identKey is the trace key of a GC identity.
func identKey(id Identity) string {
	k := id.Kind
	if kid, ok := KindByName(id.Kind); ok {
		if (!kid.Info().Namespaced && id.Namespace != "") || (kid.Info().Namespaced && id.Namespace == "") {
			return identTarget(id).String() // spelled apart from the default namespace (Target.String)
		}
		k = kid.Info().Short
	} else {
		// a kind nobody serves has no known scope: its namespace, the
		// dependent's, is always written, kind//name when it has none,
		// so that a real target can tell the two apart
		if id.Namespace == "" {
			return k + "//" + id.Name
		}
		return k + "/" + id.Namespace + "/" + id.Name
	}
	if id.Namespace == "" || id.Namespace == DefaultNamespace {
		return k + "/" + id.Name
	}
	return k + "/" + id.Namespace + "/" + id.Name
}

// identMatches reports whether a step names an identity.
func (s *State) identMatches(id *Identity, st *Step) bool {
	if st.UIDLabel != "" && st.UIDLabel != s.UIDLabel(id.UID) {
		return false
	}
	return s.identKeyIs(id, &st.Target)
}

// lastSegmentsDiffer reports whether a and b differ after their last
// slash (all of either that has none). Every key spelling ends in "/"
// followed by the name, so keys whose names so differ are different.
// Comparing from the end, names like "p-1" and "p-2" are told apart at
// the first byte (the GC compares them for every queued item).
func lastSegmentsDiffer(a, b string) bool {
	i, j := len(a)-1, len(b)-1
	for ; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if a[i] != b[j] {
			return true
		}
		if a[i] == '/' {
			return false
		}
	}
	// a name that ran out ends its segment, as the key's "/" before it
	switch {
	case i >= 0:
		return a[i] != '/'
	case j >= 0:
		return b[j] != '/'
	}
	return false
}

// findItem resolves a step's key to the one queued UID it names.
func (s *State) findItem(set []Identity, st *Step) (UID, error) {
	var found UID
	n := 0
	for i := range set {
		if s.identMatches(&set[i], st) {
			found = set[i].UID
			n++
		}
	}
	switch n {
	case 0:
		return 0, notEnabled("%s is not queued", st.Target)
	case 1:
		return found, nil
	}
	return 0, notEnabled("%s names several queued items; add uid=", st.Target)
}

func inFlight(g *GC, uid UID) *InFlight {
	for i := range g.InFlight {
		if g.InFlight[i].UID == uid {
			return &g.InFlight[i]
		}
	}
	return nil
}

func writeVerb(op WriteOp) string {
	return [...]string{"delete", "patch", "unblock"}[op]
}

// Options choose which non-deterministic internal behaviours Enabled
// offers beyond the actors' own steps.
type Options struct {
	// Coalesce lets informer relists skip events (OpCoalesce).
	Coalesce bool
}

// Enabled lists the internal and fault steps that can be taken in s, in a
// canonical order. Client steps are the caller's to choose. Apply takes
// every GC delivery, relist skip, lost update, discovery sync, virtual
// delete event and work item it lists: each is listed from the queue,
// event or need its precondition checks (TestEnabledGCStepsTake), so the
// model checker may count such a step's transition without applying it.
func (m *Model) Enabled(s *State, opts Options) []Step { return m.AppendEnabled(nil, s, opts) }

// AppendEnabled appends what Enabled lists to out, so that a caller
// enumerating many states can reuse one buffer.
func (m *Model) AppendEnabled(out []Step, s *State, opts Options) []Step {
	// Steps are a few hundred bytes each: they are filled in place
	// (nextStep) rather than built and copied in.
	g := &s.GC
	if g.Watch.Queues != nil {
		for k, q := range g.Watch.Queues {
			if len(q) > 0 {
				t := TargetOf(&q[0].Obj)
				nextStep(&out, ActorGC, OpDeliver, t)
				if opts.Coalesce && g.Watch.canCoalesce(KindID(k)) {
					nextStep(&out, ActorGC, OpCoalesce, t)
				}
				if m.Bugs.Has(BugLostFirstUpdate) && q[0].Type == Modified {
					nextStep(&out, ActorGC, OpLose, t)
				}
			}
		}
	}
	if len(g.VirtualEvents) > 0 {
		s.fillItemStep(nextSlot(&out), OpDeliverVirtual, &g.VirtualEvents[0], nil)
	}
	if start, stop := syncNeeded(s); len(start)+len(stop) > 0 {
		nextStep(&out, ActorGC, OpSync, Target{})
	}
	// fillItemStep looks for a colliding key only in a set that has one.
	set := g.AttemptToOrphan
	if !keysCollide(set) {
		set = nil
	}
	for i := range g.AttemptToOrphan {
		s.fillItemStep(nextSlot(&out), OpAttemptToOrphan, &g.AttemptToOrphan[i], set)
	}
	set = g.AttemptToDelete
	if !keysCollide(set) {
		set = nil
	}
	for i := range g.AttemptToDelete {
		if id := &g.AttemptToDelete[i]; inFlight(g, id.UID) == nil {
			s.fillItemStep(nextSlot(&out), OpAttemptToDelete, id, set)
		}
	}
	collide := false // as keysCollide, over the items being written
	for i := range g.InFlight {
		for j := i + 1; j < len(g.InFlight) && !collide; j++ {
			a, b := &g.InFlight[i].Writes[0].Item, &g.InFlight[j].Writes[0].Item
			collide = a.UID != b.UID && identKeysEqual(a, b)
		}
	}
	for i := range g.InFlight {
		id := &g.InFlight[i].Writes[0].Item
		st := nextStep(&out, ActorGC, OpSend, identTarget(*id))
		st.Write = g.InFlight[i].Writes[0].Op
		for j := 0; collide && j < len(g.InFlight); j++ { // as fillItemStep
			if o := &g.InFlight[j].Writes[0].Item; o.UID != id.UID && identKeysEqual(o, id) {
				st.UIDLabel = s.UIDLabel(id.UID)
			}
		}
	}
	w := &s.Controller.Watch
	if w.Queues != nil {
		for k, q := range w.Queues {
			if len(q) > 0 {
				t := TargetOf(&q[0].Obj)
				nextStep(&out, ActorController, OpDeliver, t)
				if opts.Coalesce && w.canCoalesce(KindID(k)) {
					nextStep(&out, ActorController, OpCoalesce, t)
				}
			}
		}
	}
	for _, c := range claims(s) {
		if !m.controls(w.cached(c.Owner).Kind) {
			continue
		}
		op := OpAdopt
		if c.Release {
			op = OpRelease
		}
		nextStep(&out, ActorController, op, TargetOf(w.cached(c.Dep))).By = TargetOf(w.cached(c.Owner))
	}
	for _, c := range crdCleanups(s) {
		nextStep(&out, ActorAPIExtensions, OpCleanup, TargetOf(s.Get(c)))
	}
	return out
}

// nextStep appends to *out the step of actor a, op and target t, every
// other field zero, and returns it for the caller to fill further.
func nextStep(out *[]Step, a Actor, op Op, t Target) *Step {
	st := nextSlot(out)
	setStep(st, a, op, t)
	return st
}

// setStep overwrites *st with the step of actor a, op and target t, every
// other field zero. Clearing *st and setting the fields in place compiles
// to about half the stores of assigning a Step literal, which is built in
// a zeroed temporary and then copied (a Step is a few hundred bytes).
func setStep(st *Step, a Actor, op Op, t Target) {
	*st = Step{}
	st.Actor, st.Op, st.Target = a, op, t
}

// nextSlot appends a Step to *out, to be overwritten in place.
func nextSlot(out *[]Step) *Step {
	if n := len(*out); n < cap(*out) {
		*out = (*out)[:n+1]
	} else {
		*out = append(*out, Step{})
	}
	return &(*out)[len(*out)-1]
}

// fillItemStep overwrites *st with a GC step naming an identity, with
// uid= when another item of set has the same key.
func (s *State) fillItemStep(st *Step, op Op, id *Identity, set []Identity) {
	setStep(st, ActorGC, op, identTarget(*id))
	for i := range set {
		if o := &set[i]; o.UID != id.UID && identKeysEqual(o, id) {
			st.UIDLabel = s.UIDLabel(id.UID)
		}
	}
}

// keysCollide reports whether two identities of a set with different
// UIDs have the same trace key (what fillItemStep looks for).
func keysCollide(set []Identity) bool {
	for i := range set {
		for j := i + 1; j < len(set); j++ {
			if set[i].UID != set[j].UID && identKeysEqual(&set[i], &set[j]) {
				return true
			}
		}
	}
	return false
}

// identTarget converts an identity to a Target. An unserved kind has no
// KindID; its Target carries the whole key in Name.
func identTarget(id Identity) Target {
	k, found := KindByName(id.Kind)
	if !found {
		return Target{Kind: NoKind, Name: identKey(id)}
	}
	return Target{Kind: k, Namespace: id.Namespace, Name: id.Name}
}
