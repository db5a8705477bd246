package model

import (
	"fmt"
	"slices"
	"strings"
)

// Policy is a deletion propagation policy, or a registry strategy's
// default garbage-collection policy.
type Policy uint8

// Policies. NoPolicy means the request left propagationPolicy unset.
const (
	NoPolicy Policy = iota
	Background
	Foreground
	Orphan
	// Unsupported is rest.Unsupported: the kind is never garbage collected
	// and a delete never sets GC finalizers on it.
	Unsupported
)

func (p Policy) String() string {
	return [...]string{"", "Background", "Foreground", "Orphan", "Unsupported"}[p]
}

// ParsePolicy reads a propagationPolicy value.
func ParsePolicy(s string) (Policy, bool) {
	switch s {
	case "Background":
		return Background, true
	case "Foreground":
		return Foreground, true
	case "Orphan":
		return Orphan, true
	}
	return NoPolicy, false
}

// Principal is who sends a client request. PrincipalLimited may delete
// and update objects but lacks `update` on any `<owner>/finalizers`, so
// OwnerReferencesPermissionEnforcement refuses its blockOwnerDeletion.
type Principal uint8

// Principals.
const (
	PrincipalAdmin Principal = iota
	PrincipalLimited
)

// Result is the outcome of one API request.
type Result struct {
	Code    int    // HTTP status
	Reason  string // metav1.StatusReason for failures
	Message string
}

// OK reports a 2xx result.
func (r Result) OK() bool { return r.Code >= 200 && r.Code < 300 }

func (r Result) String() string {
	if r.OK() {
		return itoa(r.Code)
	}
	return itoa(r.Code) + " " + r.Reason + ": " + r.Message
}

func ok(code int) Result { return Result{Code: code} }

func fail(code int, reason, format string, args ...any) Result {
	return Result{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func notFound(k KindID, name string) Result {
	return fail(404, "NotFound", "%s %q not found", k.Info().Resource, name)
}

// Target names an object the way a request URL does.
type Target struct {
	Kind      KindID
	Namespace string
	Name      string
}

func (t Target) String() string {
	if t.Kind == NoKind {
		return t.Name // an unserved kind: Name holds the whole key
	}
	// A GC identity of a cluster-scoped kind may carry a namespace (a
	// virtual node inherits its dependent's); print it, even "default".
	if t.Namespace != "" && (t.Namespace != DefaultNamespace || !t.Kind.Info().Namespaced) {
		return t.Kind.Info().Short + "/" + t.Namespace + "/" + t.Name
	}
	// And a GC identity of a namespaced kind may have none: the virtual
	// node of a cluster-scoped dependent's reference, looked up at cluster
	// scope. kind//name keeps it from reading back as the default
	// namespace.
	if t.Namespace == "" && t.Kind.Info().Namespaced {
		return t.Kind.Info().Short + "//" + t.Name
	}
	return ObjKey(t.Kind, t.Namespace, t.Name)
}

// TargetOf returns the request target of an object.
func TargetOf(o *Object) Target { return Target{o.Kind, o.Namespace, o.Name} }

// DeleteOptions are the metav1.DeleteOptions the model distinguishes.
type DeleteOptions struct {
	Policy           Policy
	OrphanDependents *bool
	PreconditionUID  UID // 0: none
	PreconditionRV   int // 0: none
	DryRun           bool
}

// request is the context of one API request.
type request struct {
	by        Actor
	principal Principal
	// admit is false for deletes that bypass admission (apiextensions
	// deleting custom resources through its storage, not over HTTP).
	admit bool
}

// ---- create ----

// create stores a new object (generic registry Store.Create plus the
// validation in ValidateObjectMeta and admission).
func (m *Model) create(s *State, rq request, o Object) Result {
	info := o.Kind.Info()
	if info.Custom {
		crd := s.Lookup(crdKind(), "", info.CRDName)
		if crd == nil {
			return fail(404, "NotFound", "the server could not find the requested resource (post %s.cascade.dev)", info.Resource)
		}
		if crd.Deleting {
			// apiextensions' crdHandler wraps admission in
			// forbidCreateAdmission while the CRD terminates
			return fail(403, "Forbidden", "%s.cascade.dev %q is forbidden: create not allowed while custom resource definition is terminating", info.Resource, o.Name)
		}
	}
	if info.Namespaced {
		if r := m.namespaceAdmits(s, o.Namespace); !r.OK() {
			return r
		}
	}
	// Store.Create validates (BeforeCreate) and runs validating
	// admission before it writes to etcd, which is where an existing key
	// is found: an invalid create of a taken name is 422, not 409.
	if r := validateMeta(m.semantics(), &o, nil); !r.OK() {
		return r
	}
	if r := admitOwnerRefs(rq, &o, nil); !r.OK() {
		return r
	}
	if !CreateAnswers(s.Lookup(o.Kind, o.Namespace, o.Name) != nil).Has(AnswerOK) {
		return fail(409, "AlreadyExists", "%s %q already exists", info.Resource, o.Name)
	}
	// rest.BeforeCreate clears deletionTimestamp.
	o.Deleting = false
	if info.Kind == "Namespace" {
		// namespace strategy PrepareForCreate: the immutable name label
		o.Labels = setLabel(o.Labels, NamespaceNameLabel, o.Name)
	}
	o.UID = s.newUID(UIDInfo{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	o.RV = 1
	s.put(o)
	s.notify(Added, &o)
	if o.Kind == crdKind() {
		// apiextensions' naming controller (NamesAccepted) and then its
		// establishing controller (Established) each write the new
		// CRD's status before it serves its resources, which a client
		// waits for: two more events for every watcher of CRDs
		for range 2 {
			o.RV++
			s.put(o)
			s.notify(Modified, &o)
		}
	}
	return ok(201)
}

// namespaceAdmits is the NamespaceLifecycle admission plugin for objects
// in ns. A namespace the trace never created is taken to exist: it is the
// harness's own.
func (m *Model) namespaceAdmits(s *State, ns string) Result {
	nsKind, _ := KindByShort("ns")
	if o := s.Lookup(nsKind, "", ns); o != nil {
		if o.Deleting {
			return fail(403, "Forbidden", "unable to create new content in namespace %s because it is being terminated", ns)
		}
		return ok(200)
	}
	for _, u := range s.UIDs {
		if u.Kind == nsKind && u.Name == ns {
			return fail(404, "NotFound", "namespaces %q not found", ns)
		}
	}
	return ok(200)
}

func crdKind() KindID { return crdKindID }

// crdKindID is looked up once: the GC's lookups ask for it in every step.
var crdKindID = func() KindID { k, _ := KindByShort("crd"); return k }()

// ---- validation (apimachinery/pkg/api/validation/objectmeta.go) ----

// validateMeta checks finalizers (UpdateDenial) and ownerReferences of a
// new object version; old is nil on create.
func validateMeta(sem Semantics, o *Object, old *Object) Result {
	next := View{Kind: o.Kind, Deleting: o.Deleting, Finalizers: o.Finalizers}
	var prev *View
	if old != nil {
		prev = &View{Kind: old.Kind, Deleting: old.Deleting, Finalizers: old.Finalizers}
	}
	if deny := UpdateDenial(sem, prev, &next); deny.Message != "" {
		return fail(422, "Invalid", "%s", deny.Message)
	}
	controller := ""
	for _, r := range o.Owners {
		switch {
		case r.Kind == "":
			return fail(422, "Invalid", "metadata.ownerReferences.kind: must not be empty")
		case r.Name == "":
			return fail(422, "Invalid", "metadata.ownerReferences.name: must not be empty")
		case r.UID == 0:
			return fail(422, "Invalid", "metadata.ownerReferences.uid: must not be empty")
		case r.Kind == "Event":
			return fail(422, "Invalid", "metadata.ownerReferences: /v1, Kind=Event is disallowed from being an owner")
		}
		if r.Controller {
			if controller != "" {
				return fail(422, "Invalid", "metadata.ownerReferences: Only one reference can have Controller set to true. Found \"true\" in references for %s and %s/%s", controller, r.Kind, r.Name)
			}
			controller = r.Kind + "/" + r.Name
		}
	}
	return ok(200)
}

// admitOwnerRefs is OwnerReferencesPermissionEnforcement
// (plugin/pkg/admission/gc): setting blockOwnerDeletion=true on a new or
// changed reference requires update on the owner's finalizers.
func admitOwnerRefs(rq request, o *Object, old *Object) Result {
	if rq.principal != PrincipalLimited {
		return ok(200)
	}
	for _, r := range o.Owners {
		if !r.Block {
			continue
		}
		if old != nil {
			if prev, found := old.OwnerRefTo(r.UID); found && prev.Block {
				continue
			}
		}
		return fail(403, "Forbidden", "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: %s/%s", r.Kind, r.Name)
	}
	return ok(200)
}

// ---- update ----

// update applies mutate to the live object as a PATCH or PUT does, then
// runs update validation (ValidateObjectMetaAccessorUpdate) and admission.
// An update that empties the finalizers of an object being deleted removes
// it from storage (ShouldDeleteDuringUpdate / deleteWithoutFinalizers).
func (m *Model) update(s *State, rq request, t Target, uid UID, rv int, mutate func(*Object) Result) Result {
	cur := s.Lookup(t.Kind, t.Namespace, t.Name)
	if cur == nil {
		// The model's updates are merge patches: their metadata.uid is no
		// storage precondition, so even before kubernetes#132470 a patch
		// of a removed object answers 404 (Semantics.UpdateRemovedConflict
		// is a PUT's answer).
		return notFound(t.Kind, t.Name)
	}
	pre := Preconditions{UID: check(uid != 0, cur.UID == uid), RV: check(rv != 0, cur.RV == rv)}
	switch PreconditionAnswers(m.semantics(), VerbUpdate, true, pre, false).Code() {
	case 422:
		// A patch carrying metadata.uid fails validation as an attempt to
		// change an immutable field.
		return fail(422, "Invalid", "metadata.uid: field is immutable")
	case 409:
		return fail(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again")
	}
	old := *cur
	next := old
	if r := mutate(&next); !r.OK() {
		return r
	}
	// The PATCH and PUT handlers drop a reference equal to an earlier one
	// once the patch is applied, before validation
	// (dedupOwnerReferencesAndAddWarning in
	// k8s.io/apiserver/pkg/endpoints/handlers/patch.go and update.go), as
	// create does: making one of two references to a UID equal to the
	// other leaves one.
	next.Owners = dedupOwners(next.Owners)
	if r := validateMeta(m.semantics(), &next, &old); !r.OK() {
		return r
	}
	if r := admitOwnerRefs(rq, &next, &old); !r.OK() {
		return r
	}
	if equalObjects(&old, &next) {
		return ok(200) // a no-op patch writes nothing
	}
	if UpdateRemoves(&View{Kind: next.Kind, Deleting: next.Deleting, Finalizers: next.Finalizers}) {
		s.remove(next.UID)
		s.notify(Deleted, &next)
		return ok(200)
	}
	next.RV++
	s.put(next)
	s.notify(Modified, &next)
	return ok(200)
}

// dedupOwners is dedupOwnerReferences: it keeps the first of equal
// references (references to one UID that differ in a field all stay). It
// returns refs itself when nothing repeats.
func dedupOwners(refs []OwnerRef) []OwnerRef {
	for i := 1; i < len(refs); i++ {
		if !slices.Contains(refs[:i], refs[i]) {
			continue
		}
		out := slices.Clone(refs[:i])
		for _, r := range refs[i+1:] {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
		return out
	}
	return refs
}

func equalObjects(a, b *Object) bool {
	return a.UID == b.UID && a.Deleting == b.Deleting && a.Replicas == b.Replicas && a.Selector == b.Selector &&
		slices.Equal(a.Owners, b.Owners) && slices.Equal(a.Finalizers, b.Finalizers) && slices.Equal(a.Labels, b.Labels)
}

// ---- delete (generic/registry/store.go Store.Delete) ----

// delete runs one DELETE request.
func (m *Model) delete(s *State, rq request, t Target, opts DeleteOptions) Result {
	// rest.BeforeDelete: ValidateDeleteOptions comes first.
	if deny := DeleteOptionsDenial(opts); deny != "" {
		return fail(422, "Invalid", "%s", deny)
	}
	cur := s.Lookup(t.Kind, t.Namespace, t.Name)
	if cur == nil {
		return notFound(t.Kind, t.Name)
	}
	pre := Preconditions{UID: check(opts.PreconditionUID != 0, cur.UID == opts.PreconditionUID),
		RV: check(opts.PreconditionRV != 0, cur.RV == opts.PreconditionRV)}
	if !PreconditionAnswers(m.semantics(), VerbDelete, true, pre, false).Has(AnswerOK) {
		switch {
		case pre.UID == Fails && t.Kind.Info().Kind == "Namespace":
			return fail(409, "Conflict", "Precondition failed: UID in precondition: %s, UID in object meta: %s", s.UIDLabel(opts.PreconditionUID), s.UIDLabel(cur.UID))
		case pre.UID == Fails:
			return fail(409, "Conflict", "the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", s.UIDLabel(opts.PreconditionUID), s.UIDLabel(cur.UID))
		}
		return fail(409, "Conflict", "the ResourceVersion in the precondition (%d) does not match the ResourceVersion in record (%d). The object might have been modified", opts.PreconditionRV, cur.RV)
	}
	// terminatingNamespace is true only of a Namespace being deleted:
	// the View (a label lookup) is built only for one.
	if cur.Deleting && cur.Kind.Info().Kind == "Namespace" {
		if v := cur.View(); terminatingNamespace(&v) {
			// The Namespace registry's Delete (pkg/registry/core/namespace/
			// storage Delete) chooses the GC finalizers only on the first
			// DELETE; once deletionTimestamp is set it answers the Namespace
			// as it is while spec.finalizers remain, without calling the
			// admission webhooks (deleteValidation) and whatever the options
			// (traces/scenarios/namespace-second-delete-changes-nothing).
			return ok(200)
		}
	}
	if rq.admit {
		if deny := m.protectionDenies(s, cur); deny != "" {
			return fail(403, "Forbidden", "admission webhook \"vdeletion.cascade.dev\" denied the request: %s", deny)
		}
	}
	res := Delete(m.semantics(), &View{Kind: cur.Kind, Deleting: cur.Deleting, Finalizers: cur.Finalizers}, opts)
	// The object as the delete leaves it, unless it leaves storage: built
	// only where it is needed, as the GC's deletes mostly remove at once.
	written := func() Object {
		next := *cur
		next.Finalizers = res.Finalizers
		return next
	}
	if t.Kind == crdKind() && !cur.Deleting {
		next := written()
		// apiextensions' CRD REST Delete: the first delete only sets
		// deletionTimestamp and the cleanup finalizer (no GC finalizers)
		// and always carries a UID precondition; the cleanup controller
		// then removes the custom resources.
		next.Deleting = true
		if opts.DryRun {
			return ok(200)
		}
		next.RV++
		s.put(next)
		s.notify(Modified, &next)
		// apiextensions' finalizer controller (crd_finalizer.go sync)
		// reacts at once: before it deletes any custom resource it sets
		// the Terminating condition (InstanceDeletionInProgress) with
		// UpdateStatus, one more event for every watcher of CRDs
		next.RV++
		s.put(next)
		s.notify(Modified, &next)
		return ok(200)
	}
	if res.LosesRVPrecondition {
		return fail(409, "Conflict", "%s", DeleteRVConflict(cur.RV))
	}
	if res.Removed {
		if opts.DryRun {
			return ok(200)
		}
		// remove copies s.Objects (copy-on-write: states share them), so
		// cur still reads the object as it was after it
		gone := cur
		if res.TwoWrites {
			// A kind with a graceful strategy is deleted in two writes
			// even at grace period 0: rest.BeforeDelete finds
			// CheckGracefulDelete true, so Store.Delete first runs
			// updateForGracefulDeletionAndFinalizers, whose
			// GuaranteedUpdate stores deletionTimestamp (and the GC
			// finalizers' removal), and only then Storage.Delete. Watchers
			// see MODIFIED, then DELETED of that version. Once
			// deletionTimestamp is set (grace 0) BeforeDelete reports not
			// graceful and the update is skipped (errDeleteNow).
			updated := written()
			updated.Deleting = true
			updated.RV++
			s.notify(Modified, &updated)
			gone = &updated
		}
		s.remove(gone.UID)
		s.notify(Deleted, gone)
		return ok(200)
	}
	// markAsDeleting (non-graceful kinds): deletionTimestamp set once; a
	// second delete on a terminating object re-runs the finalizer choice
	// and may switch orphan/foregroundDeletion (see upstream-semantics 1.3).
	next := written()
	next.Deleting = true
	if opts.DryRun || equalObjects(cur, &next) {
		return ok(200)
	}
	next.RV++
	s.put(next)
	s.notify(Modified, &next)
	return ok(200)
}

// terminatingNamespace reports whether o is a Namespace being deleted that
// its spec.finalizers (FinalizerNamespace) still hold: a DELETE of it
// changes nothing.
func terminatingNamespace(o *View) bool {
	return o.Kind.Info().Kind == "Namespace" && o.Deleting && o.hasFinalizer(FinalizerNamespace)
}

// GracefulDelete reports whether kind k's registry strategy implements
// rest.RESTGracefulDeleteStrategy. Of the model's kinds only Pod does
// (pkg/registry/core/pod/strategy.go CheckGracefulDelete), and it always
// answers true. The model's pods are never scheduled, so their grace
// period is 0 and they go at once, but by the graceful path.
func GracefulDelete(k KindID) bool { return k == podKindID }

var podKindID = func() KindID { k, _ := KindByShort("pod"); return k }()

// deletionFinalizers is deletionFinalizersForGarbageCollection: drop both
// GC finalizers and add back the one the request and the object call for.
// Callers outside the model read it as Delete's Finalizers.
func deletionFinalizers(o *View, opts DeleteOptions) []string {
	info := o.Kind.Info()
	if terminatingNamespace(o) {
		return o.Finalizers // the Namespace registry chooses only on the first DELETE
	}
	orphan, fg := shouldOrphanDependents(o, opts), shouldDeleteDependents(o, opts)
	if info.Kind == "Namespace" {
		orphan, fg = namespaceFinalizers(o, opts)
	}
	var out []string
	for _, f := range o.Finalizers {
		if f != FinalizerOrphan && f != FinalizerForeground {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, FinalizerOrphan)
	}
	if fg {
		out = append(out, FinalizerForeground)
	}
	if info.Kind == "Namespace" && !o.Deleting && !slices.Contains(out, FinalizerNamespace) {
		out = append(out, FinalizerNamespace)
	}
	if SameFinalizers(out, o.Finalizers) {
		return o.Finalizers
	}
	return out
}

// shouldOrphanDependents mirrors store.go, including the precedence of an
// existing GC finalizer (first in list order wins) over the kind default.
func shouldOrphanDependents(o *View, opts DeleteOptions) bool {
	def := o.Kind.Info().DefaultPolicy
	if def == Unsupported {
		return false
	}
	if opts.OrphanDependents != nil {
		return *opts.OrphanDependents
	}
	switch opts.Policy {
	case Orphan:
		return true
	case Background, Foreground:
		return false
	}
	for _, f := range o.Finalizers {
		switch f {
		case FinalizerOrphan:
			return true
		case FinalizerForeground:
			return false
		}
	}
	return def == Orphan
}

// shouldDeleteDependents mirrors store.go. orphanDependents=false means
// background, never foreground, in the generic store.
func shouldDeleteDependents(o *View, opts DeleteOptions) bool {
	if o.Kind.Info().DefaultPolicy == Unsupported {
		return false
	}
	if opts.OrphanDependents != nil {
		return false
	}
	switch opts.Policy {
	case Foreground:
		return true
	case Background, Orphan:
		return false
	}
	for _, f := range o.Finalizers {
		switch f {
		case FinalizerForeground:
			return true
		case FinalizerOrphan:
			return false
		}
	}
	return false
}

// namespaceFinalizers is the Namespace registry's own choice
// (shouldHaveOrphanFinalizer / shouldHaveDeleteDependentsFinalizer):
// orphanDependents=false there means foreground.
func namespaceFinalizers(o *View, opts DeleteOptions) (orphan, fg bool) {
	switch {
	case opts.OrphanDependents != nil:
		orphan = *opts.OrphanDependents
	case opts.Policy != NoPolicy:
		orphan = opts.Policy == Orphan
	default:
		orphan = o.hasFinalizer(FinalizerOrphan)
	}
	switch {
	case opts.OrphanDependents != nil:
		fg = !*opts.OrphanDependents
	case opts.Policy != NoPolicy:
		fg = opts.Policy == Foreground
	default:
		fg = o.hasFinalizer(FinalizerForeground)
	}
	return orphan, fg
}

// setLabel returns labels with key set to value, sorted by key.
func setLabel(ls []Label, key, value string) []Label {
	out := slices.DeleteFunc(slices.Clone(ls), func(l Label) bool { return l.Key == key })
	out = append(out, Label{key, value})
	slices.SortFunc(out, func(a, b Label) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// SameFinalizers reports whether a and b hold the same finalizers, in
// any order (the API server's finalizer lists are sets in effect).
func SameFinalizers(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// ---- watch fan-out ----

// notify appends a watch event to every watcher of the object's kind. The
// GC watches every deletable resource it has a monitor for except events
// (DefaultIgnoredResources); the controller watches the kinds it adopts
// and adopts for.
func (s *State) notify(t EventType, o *Object) {
	if o.Kind.Info().Kind != "Event" && s.GC.monitors(o.Kind) {
		s.push(&s.GC.Watch, t, o)
	}
	if controllerWatches(o.Kind) {
		s.push(&s.Controller.Watch, t, o)
	}
}

// semantics is the Semantics the model's API server answers by: the
// model's release (Model.Release), with the bug switches that change an
// answer.
func (m *Model) semantics() Semantics {
	return Semantics{FinalizerAfterDeletion: m.Bugs.Has(BugFinalizerAfterDeletion)}.For(m.Release)
}
