package model

import (
	"fmt"
	"slices"
)

// Property names. They are sentences so that reports read plainly.
const (
	PropNoSolidOwnerCollected    = "no solid owner collected"
	PropOrphanRespected          = "orphan respected"
	PropNoRemovalWithFinalizers  = "no object removed while it has finalizers"
	PropNoFinalizerAfterDeletion = "no finalizer added after deletion started"
	PropProtectionHolds          = "protection holds"
	PropForegroundWaits          = "foreground waits for known blocking dependents"
	PropNeverSilentlyOrphaned    = "cascades are never silently orphaned"
	PropGarbageCollected         = "garbage is collected"
	PropNoStuckFinalizer         = "no GC finalizer is stuck"
	PropGraphAgrees              = "the graph agrees with the store"
	PropOrphaningHappens         = "orphaning happens"
	PropForegroundCompletes      = "a foreground cascade completes"
	PropCycleBroken              = "a cycle is broken"
)

// PropertyKind says when a property is evaluated.
type PropertyKind uint8

// Property kinds.
const (
	// Always: a safety property of every transition.
	Always PropertyKind = iota
	// Quiescent: a liveness property of every quiescent state, one where
	// every enabled internal step only stutters.
	Quiescent
	// Sometimes: a reachability property; some transition must witness it,
	// or the scope is too constrained to mean anything.
	Sometimes
)

func (k PropertyKind) String() string { return [...]string{"always", "quiescent", "sometimes"}[k] }

// Transition is one step with the states around it.
type Transition struct {
	Prev, Next *State
	// Step is the step taken, by pointer: a checker fills a Transition
	// per transition, and a Step is a few hundred bytes.
	Step   *Step
	Result Result

	// del and delW memoise gcDeleteTarget and gcDeleteWrite, which
	// several properties ask, for the duration of one CheckTransition
	// (delSet).
	del           *Object
	delW          *Write
	delOK, delSet bool
}

// Violation explains how a property failed. Known is the ID of the
// known-race registry entry (KnownRaces, through Excuse) when the
// failure is a documented race upstream never fixed.
type Violation struct {
	Property string
	Message  string
	Known    string
}

func (v *Violation) Error() string {
	if v.Known != "" {
		return v.Property + ": " + v.Message + " (known upstream race " + v.Known + ")"
	}
	return v.Property + ": " + v.Message
}

// Property is a named check.
type Property struct {
	Name string
	Kind PropertyKind
	Doc  string
	// Check is set for Always (on a transition) and Sometimes (true when
	// the transition witnesses it, reported through a non-nil Violation).
	Check func(m *Model, t *Transition) *Violation
	// CheckState is set for Quiescent properties.
	CheckState func(m *Model, s *State) *Violation
	// StoreOnly says that Check finds nothing in a transition whose next
	// state shares its previous state's object list (copy-on-write: the
	// step wrote nothing to the store), so CheckTransition and a model
	// checker may skip it there. Each such Check reads the store through
	// started, Get or finalizer comparisons that are then false.
	StoreOnly bool
	// Steps, when set, says which steps Check can find anything in:
	// Check finds nothing in a transition whose step Steps rejects. Steps
	// reads only the step's Actor, Op and Write: CheckTransition and
	// StepsAccept look its answer up by those.
	Steps func(st *Step) bool
}

// Properties is the catalogue of named properties.
var Properties = []Property{
	{Name: PropNoSolidOwnerCollected, Kind: Always, Check: checkSolidOwner, StoreOnly: true, Steps: isGCDeleteSend,
		Doc: "The GC never deletes an object that, when its DELETE lands, has an ownerReference resolving (same UID, kind and name, same namespace or a cluster-scoped owner) to a solid owner, as upstream's classifyReferences calls it: live and not being deleted with foregroundDeletion (an owner deleted with orphan, a user finalizer or a grace period is solid). A DELETE decided while the owner waited for dependents that lands after it stopped waiting is a known upstream race."},
	{Name: PropOrphanRespected, Kind: Always, Check: checkOrphanRespected, StoreOnly: true, Steps: isGCDeleteSend,
		Doc: "After a delete that orphans X, no object that referenced X at the time is deleted by the GC while it still references X. Two causes are known upstream: the GC had not observed the dependent when it orphaned (kubernetes#26120), and the orphan request switched a deletion already under way, which the DELETE path allows although kubernetes#32339 meant to forbid it, so a GC delete decided before the switch still lands."},
	{Name: PropNoRemovalWithFinalizers, Kind: Always, Check: checkRemovalWithFinalizers, StoreOnly: true, Steps: isDeleteStep,
		Doc: "A DELETE never removes an object from storage while it lists finalizers other than orphan and foregroundDeletion, which a DELETE's own propagation choice may drop (an explicit Background delete of an object waiting in foreground removes it at once, by design)."},
	{Name: PropNoFinalizerAfterDeletion, Kind: Always, Check: checkFinalizerAfterDeletion, StoreOnly: true, Steps: isNotDeleteStep,
		Doc: "Once deletion has started, only a DELETE request may add a finalizer (the API server re-choosing orphan/foregroundDeletion); updates may not."},
	{Name: PropProtectionHolds, Kind: Always, Check: checkProtection, StoreOnly: true, Steps: isNotAPIExtensions,
		Doc: "An object labelled delete-protection=Always never starts deletion; one labelled Cascading never starts deletion while it has active dependents. Storage-level deletes by apiextensions (a CRD taking its resources with it) bypass admission and are not counted."},
	{Name: PropForegroundWaits, Kind: Always, Check: checkForegroundWaits, StoreOnly: true, Steps: isGCStep,
		Doc: "The GC never removes foregroundDeletion from an owner while a live dependent with blockOwnerDeletion=true to it is in the GC's graph with that blocking reference."},
	{Name: PropNeverSilentlyOrphaned, Kind: Always, Check: checkSilentOrphan, StoreOnly: true, Steps: isGCDeleteSend,
		Doc: "A DELETE sent by the GC never puts the orphan finalizer on an object that lacked it: cascades do not turn into orphaning half way."},
	{Name: PropGarbageCollected, Kind: Quiescent, CheckState: checkGarbageCollected,
		Doc: "In a quiescent state no live object has ownerReferences that all resolve to absent owners, except where the GC by design never collects (a cluster-scoped object naming a namespaced owner kind; an owner kind nobody serves) or deletion protection refuses."},
	{Name: PropNoStuckFinalizer, Kind: Quiescent, CheckState: checkStuckFinalizer,
		Doc: "In a quiescent state no terminating object carries orphan, and one carrying foregroundDeletion still has a blocking dependent that is itself held by something outside the GC: a user finalizer, deletion protection, or such a chain (a cycle holds nothing)."},
	{Name: PropGraphAgrees, Kind: Quiescent, CheckState: checkGraphAgrees,
		Doc: "In a quiescent state every live object has an observed graph node with its ownerReferences and deletion state, every observed node is live, and a terminating object with foregroundDeletion is marked deletingDependents."},
	{Name: PropOrphaningHappens, Kind: Sometimes, Check: witnessOrphaning, StoreOnly: true, Steps: isAttemptToOrphan,
		Doc: "attemptToOrphan completes for some owner."},
	{Name: PropForegroundCompletes, Kind: Sometimes, Check: witnessForeground, StoreOnly: true,
		Doc: "Some owner in foreground deletion leaves storage."},
	{Name: PropCycleBroken, Kind: Sometimes, Check: witnessCycleBroken, Steps: isUnblockSend,
		Doc: "The GC sends the cycle-breaking patch that sets blockOwnerDeletion=false."},
}

// PropertyByName finds a property.
func PropertyByName(name string) (*Property, error) {
	for i := range Properties {
		if Properties[i].Name == name {
			return &Properties[i], nil
		}
	}
	var names []string
	for _, p := range Properties {
		names = append(names, fmt.Sprintf("%q", p.Name))
	}
	return nil, fmt.Errorf("unknown property %q (known: %v)", name, names)
}

// gcDeleteTarget returns the object a GC DELETE step sent against, as it
// was before the step, and whether the step was one.
func gcDeleteTarget(t *Transition) (*Object, bool) {
	if t.delSet {
		return t.del, t.delOK
	}
	return findDeleteTarget(t)
}

// deleteTarget is gcDeleteTarget for the write gcDeleteWrite found.
func deleteTarget(t *Transition, w *Write) (*Object, bool) {
	if w != nil {
		if o := t.Prev.Get(w.Item.UID); o != nil {
			return o, true
		}
	}
	return nil, false
}

func findDeleteTarget(t *Transition) (*Object, bool) { return deleteTarget(t, gcDeleteWrite(t)) }

// gcDeleteWrite is the in-flight GC delete a successful `gc delete`
// step sent, or nil.
func gcDeleteWrite(t *Transition) *Write {
	if t.delSet {
		return t.delW
	}
	return findDeleteWrite(t)
}

// isGCDeleteSend reports whether a step sends a GC DELETE: the Steps of
// the properties that look at what gcDeleteTarget finds, nothing for
// any other step.
func isGCDeleteSend(st *Step) bool {
	return st.Actor == ActorGC && st.Op == OpSend && st.Write == WriteDelete
}

// isNotAPIExtensions is the Steps of checkProtection, which does not
// count apiextensions' storage-level deletes.
func isNotAPIExtensions(st *Step) bool { return st.Actor != ActorAPIExtensions }

// isGCStep is the Steps of checkForegroundWaits: only the GC removes
// foregroundDeletion.
func isGCStep(st *Step) bool { return st.Actor == ActorGC }

func findDeleteWrite(t *Transition) *Write {
	if !isGCDeleteSend(t.Step) || !t.Result.OK() {
		return nil
	}
	for _, f := range t.Prev.GC.InFlight {
		if w := &f.Writes[0]; w.Op == WriteDelete && t.Prev.identMatches(&w.Item, t.Step) {
			return w
		}
	}
	return nil
}

// started reports whether o started deletion or left storage in t.
func started(t *Transition, o *Object) bool {
	n := t.Next.Get(o.UID)
	return !o.Deleting && (n == nil || n.Deleting)
}

// solidOwner returns an owner of o that classifyReferences calls solid
// in s (classifyRef): live, and not waiting for dependents, an owner
// being deleted with orphan or a user finalizer included.
func solidOwner(s *State, o *Object) *Object {
	for _, r := range o.Owners {
		if c, owner := classifyRef(s, o, r); c == RefSolid {
			return owner
		}
	}
	return nil
}

func checkSolidOwner(m *Model, t *Transition) *Violation {
	d, isDel := gcDeleteTarget(t)
	if !isDel || !started(t, d) {
		return nil
	}
	v := solidOwnerCollected(t, d)
	if v != nil && v.Known == "" {
		m.ownersChangedUnguarded(t, d, v)
	}
	return v
}

// ownersChangedUnguarded excuses v as kubernetes#114603 on a release
// without ChangeGCDeleteRV: the GC's DELETE carried no resourceVersion
// precondition, and the ownerReferences of d changed between the GET its
// decision read (the in-flight write's Owners) and the DELETE's landing.
func (m *Model) ownersChangedUnguarded(t *Transition, d *Object, v *Violation) {
	w := gcDeleteWrite(t)
	if k, _ := KnownRaceByID(KnownOwnerChangeBeforeDelete); w == nil || w.RV != 0 || !k.PresentIn(m.kubeRelease()) || slices.Equal(w.Owners, d.Owners) {
		return
	}
	if v.Known = Excuse(KnownOwnerChangeBeforeDelete); v.Known != "" {
		v.Message += fmt.Sprintf("; its ownerReferences changed after the GET the GC decided on, and the DELETE carried no resourceVersion precondition (%s, before %s)",
			ReleaseChanges[ChangeGCDeleteRV].PR, ReleaseChanges[ChangeGCDeleteRV].Since)
	}
}

func solidOwnerCollected(t *Transition, d *Object) *Violation {
	if owner := solidOwner(t.Prev, d); owner != nil {
		if !owner.Deleting {
			return &Violation{Property: PropNoSolidOwnerCollected, Message: fmt.Sprintf("gc deleted %s while its owner %s was live and not being deleted", d.Key(), owner.Key())}
		}
		v := &Violation{Property: PropNoSolidOwnerCollected, Message: fmt.Sprintf("gc deleted %s while its owner %s was being deleted without foregroundDeletion (solid, not waiting for dependents)", d.Key(), owner.Key())}
		if w := gcDeleteWrite(t); w != nil && slices.Contains(w.Waited, owner.UID) {
			// The owner waited for dependents when attemptToDeleteItem
			// decided, and stopped before the DELETE landed; the
			// resourceVersion precondition guards the dependent, not
			// its owner (as harness/lin's stoppedWaiting).
			if owner.HasFinalizer(FinalizerOrphan) {
				v.Known = Excuse(KnownPolicySwitch)
				v.Message += "; a DELETE switched the owner's foreground deletion to orphan after the GC decided"
			} else {
				v.Known = Excuse(KnownForegroundEnded)
				v.Message += "; the owner waited for dependents when the GC decided, and foregroundDeletion went before its DELETE landed"
			}
		}
		return v
	}
	if len(d.Owners) == 0 {
		// attemptToDeleteItem leaves an object without ownerReferences
		// alone; only a DELETE decided before a client removed the last
		// one, sent without the resourceVersion precondition, lands on
		// it (as harness/lin reports it)
		return &Violation{Property: PropNoSolidOwnerCollected, Message: fmt.Sprintf("gc deleted %s, which has no ownerReferences", d.Key())}
	}
	// attemptToDeleteItem gives up on a cluster-scoped object with a
	// reference to a namespaced kind (namespacedOwnerOfClusterScopedObjectErr):
	// it cannot tell whether that owner is solid. Only a DELETE decided
	// before a client added such a reference, sent without the
	// resourceVersion precondition, lands on it (as harness/lin reports
	// it: the GC never acts on an unresolvable reference).
	for _, r := range d.Owners {
		if k, ok := KindByName(r.Kind); ok {
			if _, scoped := OwnerScope(k, d.Namespace); !scoped {
				v := &Violation{Property: PropNoSolidOwnerCollected, Message: fmt.Sprintf("gc deleted %s through its reference to %s %s, which it cannot resolve", d.Key(), r.Kind, r.Name)}
				// A virtual node carries the namespace of the dependent it
				// was made from, cluster-scoped or not, and
				// attemptToDeleteItem run on it looks the object's owners
				// up there (kubernetes#124378): upstream's own race,
				// until the object's event gives the node its identity.
				if w := gcDeleteWrite(t); w != nil && w.Item.Namespace != "" {
					v.Known = Excuse(KnownVirtualNamespace)
					v.Message += fmt.Sprintf("; the GC decided on it as a virtual node in namespace %s", w.Item.Namespace)
				}
				return v
			}
		}
	}
	return nil
}

func checkOrphanRespected(m *Model, t *Transition) *Violation {
	d, isDel := gcDeleteTarget(t)
	if !isDel || !started(t, d) {
		return nil
	}
	for _, w := range t.Prev.Orphans {
		if w.Dep != d.UID {
			continue
		}
		// Only a reference that resolves to the owner is one the orphan
		// request protects. One that names it by UID but from another
		// namespace, or with other coordinates, resolves to nothing: the
		// GC collects the dependent as it would without the orphan
		// deletion (attemptToDeleteItem finds the owner absent).
		if !slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { return r.UID == w.Owner && resolves(t.Prev, d, r) }) {
			continue
		}
		v := &Violation{Property: PropOrphanRespected, Message: fmt.Sprintf("gc deleted %s because of %s, whose deletion orphaned it", d.Key(), t.Prev.UIDLabel(w.Owner))}
		switch {
		case w.Ran && !w.Seen:
			v.Known = Excuse(KnownUnobservedDependent)
			v.Message += "; the GC had not observed it when it orphaned"
		case w.Switched:
			v.Known = Excuse(KnownPolicySwitch)
			v.Message += "; the orphan request switched a deletion already under way"
		case w.Overridden == OverriddenByRetry:
			v.Known = Excuse(KnownRetryWithoutRV)
			v.Message += "; a GC DELETE decided before the orphan request, retried without its resourceVersion precondition, switched the orphan deletion to its own policy"
		case w.Overridden == PutBackByUnblock:
			v.Known = Excuse(KnownStaleGraph)
			v.Message += "; the GC's unblock patch, built from a graph that had not seen the orphaning, put the reference back"
		case w.Overridden == OverriddenByStaleItem:
			v.Known = Excuse(KnownStaleOrphanItem)
			v.Message += "; the GC's attemptToOrphan of an earlier owner of the same name took the orphan finalizer off it before its own attemptToOrphan ran"
		case w.Overridden == OverriddenByWaiting:
			v.Known = Excuse(KnownForegroundOverridesOrphan)
			v.Message += "; the GC's Foreground DELETE for an owner waiting on it, decided on a GET that read the orphan deletion, switched it to foreground"
		}
		return v
	}
	return nil
}

func isDeleteStep(st *Step) bool {
	return (st.Actor == ActorClient && st.Op == OpDelete) || (st.Actor == ActorGC && st.Op == OpSend && st.Write == WriteDelete)
}

func checkRemovalWithFinalizers(m *Model, t *Transition) *Violation {
	if !isDeleteStep(t.Step) {
		return nil
	}
	for i := range t.Prev.Objects {
		o := &t.Prev.Objects[i]
		for _, f := range o.Finalizers {
			if f != FinalizerOrphan && f != FinalizerForeground && t.Next.Get(o.UID) == nil {
				return &Violation{Property: PropNoRemovalWithFinalizers, Message: fmt.Sprintf("%s left storage by a delete while it had finalizer %q", o.Key(), f)}
			}
		}
	}
	return nil
}

// isNotDeleteStep is the Steps of checkFinalizerAfterDeletion.
func isNotDeleteStep(st *Step) bool { return !isDeleteStep(st) }

func checkFinalizerAfterDeletion(m *Model, t *Transition) *Violation {
	if isDeleteStep(t.Step) {
		return nil
	}
	for i := range t.Prev.Objects {
		o := &t.Prev.Objects[i]
		if !o.Deleting {
			continue
		}
		if n := t.Next.Get(o.UID); n != nil {
			for _, f := range n.Finalizers {
				if !o.HasFinalizer(f) {
					return &Violation{Property: PropNoFinalizerAfterDeletion, Message: fmt.Sprintf("%s gained finalizer %q while being deleted", o.Key(), f)}
				}
			}
		}
	}
	return nil
}

func checkProtection(m *Model, t *Transition) *Violation {
	if t.Step.Actor == ActorAPIExtensions {
		return nil
	}
	for i := range t.Prev.Objects {
		o := &t.Prev.Objects[i]
		if o.Deleting || len(o.Labels) == 0 {
			continue // ProtectionMayDeny needs the protection label
		}
		v := o.View()
		if !ProtectionMayDeny(&v) || !started(t, o) {
			continue
		}
		if ProtectionDenial(&v, activeDependents(t.Prev, o)) != "" {
			return &Violation{Property: PropProtectionHolds, Message: fmt.Sprintf("%s labelled %s=%s started deletion", o.Key(), ProtectionLabel, v.Protection)}
		}
	}
	return nil
}

func checkForegroundWaits(m *Model, t *Transition) *Violation {
	if t.Step.Actor != ActorGC {
		return nil
	}
	for i := range t.Prev.Objects {
		x := &t.Prev.Objects[i]
		if !x.Deleting || !x.HasFinalizer(FinalizerForeground) {
			continue
		}
		if n := t.Next.Get(x.UID); n != nil && n.HasFinalizer(FinalizerForeground) {
			continue
		}
		for j := range t.Prev.Objects {
			d := &t.Prev.Objects[j]
			// a blocking reference that resolves to x: one from another
			// namespace names nothing the dependent can have, and the GC
			// may drop its edge with the virtual node it made for it
			if !slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { return r.UID == x.UID && r.Block && resolves(t.Prev, d, r) }) {
				continue
			}
			if dn := t.Prev.GC.node(d.UID); dn != nil && !dn.Virtual {
				if gr, has := findRef(dn.Owners, x.UID); has && gr.Block {
					v := &Violation{Property: PropForegroundWaits, Message: fmt.Sprintf("gc removed foregroundDeletion from %s while %s, known to the GC, blocks it", x.Key(), d.Key())}
					if w := gcDeleteWrite(t); w != nil && w.Item.UID == x.UID && w.Policy != Foreground && w.RV != 0 && w.RV != x.RV {
						v.Known = Excuse(KnownRetryWithoutRV)
						v.Message += fmt.Sprintf("; the GC decided its %s delete before the foreground deletion began, and deleteObject retried it without the resourceVersion precondition", w.Policy)
					}
					return v
				}
			}
		}
	}
	return nil
}

func checkSilentOrphan(m *Model, t *Transition) *Violation {
	d, isDel := gcDeleteTarget(t)
	if !isDel || d.HasFinalizer(FinalizerOrphan) {
		return nil
	}
	if w := gcDeleteWrite(t); w != nil && w.Policy == Orphan {
		// Not silent, by rule rather than excuse: attemptToDeleteItem
		// asks for Orphan only to honour an orphan finalizer its GET saw,
		// the deleting client's choice, even if attemptToOrphan removed
		// it before the DELETE landed (deleteObject retries without the
		// resourceVersion precondition when the ownerReferences are
		// unchanged). The in-flight write records that decision; a
		// history does not, and harness/lin excuses the same DELETE as
		// KnownStaleOrphanPolicy within a window.
		return nil
	}
	if n := t.Next.Get(d.UID); n != nil && n.HasFinalizer(FinalizerOrphan) {
		return &Violation{Property: PropNeverSilentlyOrphaned, Message: fmt.Sprintf("gc's delete of %s put the orphan finalizer on it, orphaning its dependents mid-cascade", d.Key())}
	}
	return nil
}

// resolves reports whether a reference's coordinates name the object of
// its UID as the GC's lookup from the dependent would (live or not):
// same kind and name, and for a namespaced owner the dependent's
// namespace.
func resolves(s *State, d *Object, r OwnerRef) bool {
	if r.UID == 0 || int(r.UID) > len(s.UIDs) {
		return false
	}
	u := s.UIDs[r.UID-1]
	if u.Kind == NoKind || u.Kind.Info().Kind != r.Kind || u.Name != r.Name {
		return false
	}
	return u.Namespace == "" || u.Namespace == d.Namespace
}

// classifyRef classifies reference r of d as classifyReferences would on
// the store s (apiResource, OwnerScope, ClassifyOwner), without the GC's
// absentOwnerCache or graph: the truth the GC's view is judged against.
// The owner is returned when there is one.
func classifyRef(s *State, d *Object, r OwnerRef) (RefClass, *Object) {
	k, e := apiResource(s, r.Kind)
	if e != errNone {
		return RefUnresolvable, nil // restMappingError: retried forever
	}
	ns, ok := OwnerScope(k, d.Namespace)
	if !ok {
		return RefUnresolvable, nil
	}
	owner := s.Lookup(k, ns, r.Name)
	if owner == nil || owner.UID != r.UID {
		return RefDangling, nil
	}
	v := owner.View()
	return ClassifyOwner(&v), owner
}

func checkGarbageCollected(m *Model, s *State) *Violation {
	var excused *Violation // the first the registry excuses, if no other
	for i := range s.Objects {
		d := &s.Objects[i]
		if d.Deleting || len(d.Owners) == 0 || d.Kind.Info().Kind == "Event" {
			continue
		}
		garbage := true
		for _, r := range d.Owners {
			if c, _ := classifyRef(s, d, r); c != RefDangling {
				garbage = false
				break
			}
		}
		if garbage && m.protectionDenies(s, d) == "" {
			v := &Violation{Property: PropGarbageCollected, Message: fmt.Sprintf("%s is garbage (every owner is absent) but was never collected", d.Key())}
			for _, r := range d.Owners {
				if replacedByRelist(s, r.UID) {
					if v.Known = Excuse(KnownRelistUIDChange); v.Known != "" {
						v.Message += fmt.Sprintf("; the GC's graph keeps the node of its owner %s, which a relist replaced by a new object of the same name without a delete", s.UIDLabel(r.UID))
					}
					break
				}
			}
			if v.Known == "" {
				return v
			}
			if excused == nil {
				excused = v
			}
		}
	}
	return excused
}

func checkStuckFinalizer(m *Model, s *State) *Violation {
	for i := range s.Objects {
		x := &s.Objects[i]
		if !x.Deleting {
			continue
		}
		if x.HasFinalizer(FinalizerOrphan) {
			return &Violation{Property: PropNoStuckFinalizer, Message: fmt.Sprintf("%s is stuck with the orphan finalizer", x.Key())}
		}
		if x.HasFinalizer(FinalizerForeground) && !m.heldOutsideGC(s, x, nil) {
			v := &Violation{Property: PropNoStuckFinalizer, Message: fmt.Sprintf("%s is stuck with foregroundDeletion and nothing outside the GC holds it", x.Key())}
			if d := staleBlocker(s, x.UID); d != nil {
				v.Known = Excuse(KnownStaleDuplicateRef)
				v.Message += fmt.Sprintf("; the graph still has a blocking reference from %s that the API server's dedup collapsed", d.Key())
			} else if y := waitsOnForegroundCycle(s, x); y != nil && !m.Bugs.Has(BugNoCycleUnblock) {
				// Upstream's unblock patch breaks every cycle the GC
				// itself drives into foreground deletion; what is left is
				// the cycle it never gets to, and every foreground owner
				// waiting on a member of it. Without the unblock
				// (no-cycle-unblock) the same state is the bug's.
				v.Known = Excuse(KnownForegroundCycle)
				if y == x {
					v.Message += "; it blocks itself through dependents that are all deleting in the foreground"
				} else {
					v.Message += fmt.Sprintf("; it waits for %s, which blocks itself through dependents that are all deleting in the foreground", y.Key())
				}
			} else if d, via := clusterScopedBlocker(s, x.UID, nil); d != nil {
				v.Known = Excuse(KnownClusterScopedBlocker)
				if via != nil {
					v.Message += fmt.Sprintf("; it waits for %s, deleting in the foreground, which waits", via.Key())
				} else {
					v.Message += "; it waits"
				}
				v.Message += fmt.Sprintf(" for %s, a cluster-scoped object naming a namespaced owner, which the GC never deletes", d.Key())
			}
			return v
		}
	}
	return nil
}

// heldOutsideGC reports whether a foreground owner legitimately waits:
// one of its blocking dependents is held by a user finalizer, by deletion
// protection, or is itself a foreground owner so held.
func (m *Model) heldOutsideGC(s *State, x *Object, visiting []UID) bool {
	if slices.Contains(visiting, x.UID) {
		return false
	}
	visiting = append(visiting, x.UID)
	for i := range s.Objects {
		d := &s.Objects[i]
		// any blocking reference to x, as blockingDependents reads
		// them: with duplicate references to one UID, one blocking is
		// enough
		if !slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { return r.UID == x.UID && r.Block }) {
			continue
		}
		if !d.Deleting && m.protectionDenies(s, d) != "" {
			return true
		}
		// a dependent with a reference the GC cannot map to a resource
		// is never deleted: classifyReferences fails on it and the item
		// is retried for ever (restMappingError), so the reference, not
		// the GC, holds the owner
		if !d.Deleting && slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { _, e := apiResource(s, r.Kind); return e != errNone }) {
			return true
		}
		for _, f := range d.Finalizers {
			if d.Deleting && f != FinalizerOrphan && f != FinalizerForeground {
				return true
			}
		}
		if d.Deleting && d.HasFinalizer(FinalizerForeground) && m.heldOutsideGC(s, d, visiting) {
			return true
		}
	}
	return false
}

func checkGraphAgrees(m *Model, s *State) *Violation {
	for i := range s.Objects {
		o := &s.Objects[i]
		if o.Kind.Info().Kind == "Event" {
			continue
		}
		n := s.GC.node(o.UID)
		switch {
		case n == nil || n.Virtual:
			return &Violation{Property: PropGraphAgrees, Message: fmt.Sprintf("%s is live but the graph has not observed it", o.Key())}
		case !slices.Equal(n.Owners, o.Owners) && !(Excuse(KnownStaleDuplicateRef) != "" && staleAfterDedup(n.Owners, o.Owners)):
			return &Violation{Property: PropGraphAgrees, Message: fmt.Sprintf("the graph's ownerReferences of %s differ from the store's", o.Key())}
		case n.BeingDeleted != o.Deleting:
			return &Violation{Property: PropGraphAgrees, Message: fmt.Sprintf("the graph's beingDeleted of %s is %v, the store's deletionTimestamp says %v", o.Key(), n.BeingDeleted, o.Deleting)}
		case o.Deleting && o.HasFinalizer(FinalizerForeground) && !n.DeletingDependents:
			return &Violation{Property: PropGraphAgrees, Message: fmt.Sprintf("%s is in foreground deletion but its node is not deletingDependents (kubernetes#115570)", o.Key())}
		}
	}
	var excused *Violation // the first the registry excuses, if no other
	for _, n := range s.GC.Nodes {
		if !n.Virtual && s.Get(n.UID) == nil {
			v := &Violation{Property: PropGraphAgrees, Message: fmt.Sprintf("the graph still has %s, which left storage", identKey(n.Identity))}
			if replacedByRelist(s, n.UID) {
				if known := Excuse(KnownRelistUIDChange); known != "" {
					if excused == nil {
						v.Known = known
						v.Message += "; a relist replaced it by a new object of the same name without a delete"
						excused = v
					}
					continue
				}
			}
			if k, served := KindByName(n.Kind); served && k.Info().Custom && crdOutlived(s, k, n.UID) {
				if known := Excuse(KnownStoppedMonitor); known != "" {
					if excused == nil {
						v.Known = known
						v.Message += "; its resource's monitor stopped before the deletion event reached the graph"
						excused = v
					}
					continue
				}
			}
			return v
		}
	}
	return excused
}

// replacedByRelist reports whether the GC's graph keeps an observed node
// for uid whose object left storage and its informer's cache both, on a
// kind whose monitor runs: the informer dropped it without a delete
// event, which only a relist that found its name held by a new object
// does (WatchEvent.Replaces, KnownRelistUIDChange). A stopped monitor
// drops its cache too; that is KnownStoppedMonitor's (crdOutlived), not
// this.
func replacedByRelist(s *State, uid UID) bool {
	n := s.GC.node(uid)
	if n == nil || n.Virtual || s.Get(uid) != nil || s.GC.Watch.cached(uid) != nil {
		return false
	}
	k, served := KindByName(n.Kind)
	return served && (!k.Info().Custom || !crdOutlived(s, k, uid))
}

// crdOutlived reports whether the CRD that served the custom kind k when
// the object of UID u was created is gone: none is live, or the live one
// was created after the object (UIDs are allocated in creation order).
// Its monitor may then have stopped, or stopped and started again.
func crdOutlived(s *State, k KindID, u UID) bool {
	crd := s.Lookup(crdKind(), "", k.Info().CRDName)
	return crd == nil || crd.UID > u
}

// waitsOnForegroundCycle returns an object on a foreground cycle (see
// foregroundCycle) that x waits for: x itself, or one reached from x
// through blocking references from dependents that are deleting with
// foregroundDeletion. Such a member is never deleted, so neither is x,
// nor anything waiting on it: the cycle's unblock patch (attemptToDeleteItem)
// clears the blocking references of the member the GC deletes, which can
// leave that member waiting on the rest of the cycle without being on it.
// Nil when there is none.
func waitsOnForegroundCycle(s *State, x *Object) *Object {
	seen := []UID{}
	queue := []*Object{x}
	for len(queue) > 0 {
		y := queue[0]
		queue = queue[1:]
		if slices.Contains(seen, y.UID) {
			continue
		}
		seen = append(seen, y.UID)
		if foregroundCycle(s, y, y, nil) {
			return y
		}
		for i := range s.Objects {
			d := &s.Objects[i]
			if d.Deleting && d.HasFinalizer(FinalizerForeground) &&
				slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { return r.UID == y.UID && r.Block }) {
				queue = append(queue, d)
			}
		}
	}
	return nil
}

// foregroundCycle reports whether x reaches target through blocking
// references from dependents that are deleting with foregroundDeletion.
func foregroundCycle(s *State, target, x *Object, visiting []UID) bool {
	if slices.Contains(visiting, x.UID) {
		return false
	}
	visiting = append(visiting, x.UID)
	for i := range s.Objects {
		d := &s.Objects[i]
		if !d.Deleting || !d.HasFinalizer(FinalizerForeground) ||
			!slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { return r.UID == x.UID && r.Block }) {
			continue
		}
		if d.UID == target.UID || foregroundCycle(s, target, d, visiting) {
			return true
		}
	}
	return false
}

// clusterScopedBlocker returns a live cluster-scoped dependent that
// blocks owner and names some namespaced owner, or nil: classifyReferences
// stops at that reference's namespacedOwnerOfClusterScopedObjectErr, so
// the GC gives up on the dependent whatever its other references say.
//
// It also finds such a blocker behind a blocking dependent that is
// itself deleting in the foreground and waits on it, as the waiting
// branch of attemptToDeleteItem drives the dependents of a foreground
// owner into foreground deletion: via is the first such dependent (nil
// when owner waits on the blocker directly).
func clusterScopedBlocker(s *State, owner UID, visiting []UID) (blocker, via *Object) {
	if slices.Contains(visiting, owner) {
		return nil, nil
	}
	visiting = append(visiting, owner)
	for i := range s.Objects {
		d := &s.Objects[i]
		blocks := slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { return r.UID == owner && r.Block })
		switch {
		case !blocks:
		case !d.Deleting && d.Namespace == "" && slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { c, _ := classifyRef(s, d, r); return c == RefUnresolvable }):
			return d, nil
		case d.Deleting && d.HasFinalizer(FinalizerForeground):
			if b, _ := clusterScopedBlocker(s, d.UID, visiting); b != nil {
				return b, d
			}
		}
	}
	return nil, nil
}

// staleBlocker returns a dependent whose graph node still blocks owner
// with a reference staleAfterDedup tolerates, while the store's
// references to owner do not block.
func staleBlocker(s *State, owner UID) *Object {
	for i := range s.Objects {
		d := &s.Objects[i]
		n := s.GC.node(d.UID)
		if n == nil || n.Virtual || slices.Equal(n.Owners, d.Owners) || !staleAfterDedup(n.Owners, d.Owners) {
			continue
		}
		if slices.ContainsFunc(n.Owners, func(r OwnerRef) bool { return r.UID == owner && r.Block }) &&
			!slices.ContainsFunc(d.Owners, func(r OwnerRef) bool { return r.UID == owner && r.Block }) {
			return d
		}
	}
	return nil
}

// staleAfterDedup reports whether the graph's ownerReferences differ
// from the store's only by references to a UID that the graph lists more
// than once and that upstream's referencesDiffs does not see. That is
// upstream's own behaviour, not a model failure:
// graph_builder.go referencesDiffs keys the old references by UID, so the
// last old reference to a UID stands for all of them. When the API
// server's dedup (or any write) collapses [R1, R2] for one UID to [R2],
// referencesDiffs sees no difference and the node keeps [R1, R2], a
// stale R1 included, until some other change to the references.
func staleAfterDedup(graph, store []OwnerRef) bool {
	dup := func(u UID) bool {
		n := 0
		for _, r := range graph {
			if r.UID == u {
				n++
			}
		}
		return n > 1
	}
	keep := func(refs []OwnerRef) []OwnerRef {
		var out []OwnerRef
		for _, r := range refs {
			if !dup(r.UID) {
				out = append(out, r)
			}
		}
		return out
	}
	added, removed, changed := referencesDiffs(graph, store)
	return len(added)+len(removed)+len(changed) == 0 && slices.Equal(keep(graph), keep(store))
}

// isAttemptToOrphan is the Steps of witnessOrphaning.
func isAttemptToOrphan(st *Step) bool { return st.Op == OpAttemptToOrphan }

func witnessOrphaning(m *Model, t *Transition) *Violation {
	if !isAttemptToOrphan(t.Step) {
		return nil
	}
	for i := range t.Prev.Objects {
		x := &t.Prev.Objects[i]
		if x.HasFinalizer(FinalizerOrphan) {
			if n := t.Next.Get(x.UID); n == nil || !n.HasFinalizer(FinalizerOrphan) {
				return &Violation{Property: PropOrphaningHappens, Message: "orphaned the dependents of " + x.Key()}
			}
		}
	}
	return nil
}

func witnessForeground(m *Model, t *Transition) *Violation {
	if t.Step.Actor != ActorGC {
		return nil
	}
	for i := range t.Prev.Objects {
		x := &t.Prev.Objects[i]
		if x.Deleting && x.HasFinalizer(FinalizerForeground) && t.Next.Get(x.UID) == nil {
			return &Violation{Property: PropForegroundCompletes, Message: "foreground deletion of " + x.Key() + " completed"}
		}
	}
	return nil
}

// isUnblockSend reports whether a step sends a GC unblock patch.
func isUnblockSend(st *Step) bool {
	return st.Actor == ActorGC && st.Op == OpSend && st.Write == WriteUnblock
}

func witnessCycleBroken(m *Model, t *Transition) *Violation {
	if isUnblockSend(t.Step) && t.Result.OK() {
		return &Violation{Property: PropCycleBroken, Message: "unblocked " + t.Step.Target.String()}
	}
	return nil
}

// CheckTransition evaluates every Always property on a transition,
// skipping those that cannot find anything in it (StoreOnly, Steps).
func (m *Model) CheckTransition(t *Transition) []*Violation {
	var out []*Violation
	same := SameStore(t.Prev, t.Next)
	if !same {
		t.delW = findDeleteWrite(t)
		t.del, t.delOK = deleteTarget(t, t.delW)
		t.delSet = true
		defer func() { t.del, t.delW, t.delOK, t.delSet = nil, nil, false, false }()
	}
	for _, i := range alwaysFor(t.Step, same) {
		if v := m.Admit(Properties[i].Check(m, t)); v != nil {
			out = append(out, v)
		}
	}
	return out
}

// alwaysFor lists the indexes in Properties of the Always properties that
// can find something in a transition by st, in order: those whose Steps
// accept st and, when the transition left the store as it was (same),
// that are not StoreOnly. It looks the list up by st's Actor, Op and Write,
// all Steps read, rather than calling each Steps per transition.
func alwaysFor(st *Step, same bool) []int {
	if e := byStep(st); e != nil {
		return e.always[b2i(same)]
	}
	return alwaysIndexes(st, same)
}

// StepsAccept returns the set of properties, bit i for Properties[i],
// whose Steps accept st or that have no Steps: the others find nothing in
// a transition by st. It looks the set up by st's Actor, Op and Write.
func StepsAccept(st *Step) uint64 {
	if e := byStep(st); e != nil {
		return e.accept
	}
	return stepsAccept(st)
}

func stepsAccept(st *Step) uint64 {
	var set uint64
	for i := range Properties {
		if p := &Properties[i]; p.Steps == nil || p.Steps(st) {
			set |= 1 << i
		}
	}
	return set
}

// stepEntry is what alwaysFor and StepsAccept tabulate for a step.
type stepEntry struct {
	always [2][]int // alwaysIndexes with same false, true
	accept uint64   // stepsAccept
}

// byStep returns the table entry of st's Actor, Op and Write, or nil for
// values outside the table.
func byStep(st *Step) *stepEntry {
	if int(st.Actor) < len(stepTable) && int(st.Op) < len(stepTable[0]) && int(st.Write) < len(stepTable[0][0]) {
		return &stepTable[st.Actor][st.Op][st.Write]
	}
	return nil
}

var stepTable = func() (tab [ActorAPIExtensions + 1][OpCleanup + 1][WriteUnblock + 1]stepEntry) {
	if len(Properties) > 64 {
		panic("model: StepsAccept has room for 64 properties")
	}
	for a := range tab {
		for op := range tab[a] {
			for w := range tab[a][op] {
				st := &Step{Actor: Actor(a), Op: Op(op), Write: WriteOp(w)}
				tab[a][op][w] = stepEntry{always: [2][]int{alwaysIndexes(st, false), alwaysIndexes(st, true)}, accept: stepsAccept(st)}
			}
		}
	}
	return tab
}()

func alwaysIndexes(st *Step, same bool) []int {
	var out []int
	for i := range Properties {
		if p := &Properties[i]; p.Kind == Always && (!same || !p.StoreOnly) && (p.Steps == nil || p.Steps(st)) {
			out = append(out, i)
		}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SameStore reports whether two states share one object list, which
// under copy-on-write means that the store is the same (see StoreOnly).
func SameStore(a, b *State) bool { return sliceIs(a.Objects, b.Objects) }

// CheckQuiescent evaluates every Quiescent property on a state.
func (m *Model) CheckQuiescent(s *State) []*Violation {
	var out []*Violation
	for i := range Properties {
		if p := &Properties[i]; p.Kind == Quiescent {
			if v := m.Admit(p.CheckState(m, s)); v != nil {
				out = append(out, v)
			}
		}
	}
	return out
}
