package lin

import (
	"slices"
	"strings"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// This file mirrors the API server's deletion choices on real objects:
// which GC finalizers a DELETE leaves on an object (model/apiserver.go
// deletionFinalizers, shouldOrphanDependents, shouldDeleteDependents,
// namespaceFinalizers; upstream generic/registry/store.go
// deletionFinalizersForGarbageCollection) and how an ownerReference
// resolves (model/properties.go solidOwner, danglingRef, neverCollected;
// upstream garbagecollector.go classifyReferences and isDangling).

// deletionFinalizers returns the finalizers a DELETE with opts leaves on
// o: o's own minus orphan and foregroundDeletion, plus the one the request
// or, failing that, o's existing finalizers or its kind's default call for.
func deletionFinalizers(o *history.Object, opts *history.DeleteOptions) []string {
	info := o.Kind.Info()
	orphan, fg := shouldOrphanDependents(o, opts), shouldDeleteDependents(o, opts)
	if info.Kind == "Namespace" {
		orphan, fg = namespaceFinalizers(o, opts)
	}
	var out []string
	for _, f := range o.Finalizers {
		if f != model.FinalizerOrphan && f != model.FinalizerForeground {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, model.FinalizerOrphan)
	}
	if fg {
		out = append(out, model.FinalizerForeground)
	}
	return out
}

// shouldOrphanDependents mirrors store.go's, including the precedence of
// an existing GC finalizer (first in list order) over the kind default.
func shouldOrphanDependents(o *history.Object, opts *history.DeleteOptions) bool {
	def := o.Kind.Info().DefaultPolicy
	if def == model.Unsupported {
		return false
	}
	if opts.Orphan != nil {
		return *opts.Orphan
	}
	switch opts.Propagation {
	case "Orphan":
		return true
	case "Background", "Foreground":
		return false
	}
	for _, f := range o.Finalizers {
		switch f {
		case model.FinalizerOrphan:
			return true
		case model.FinalizerForeground:
			return false
		}
	}
	return def == model.Orphan
}

// shouldDeleteDependents mirrors store.go's: orphanDependents=false means
// background, never foreground, in the generic store.
func shouldDeleteDependents(o *history.Object, opts *history.DeleteOptions) bool {
	if o.Kind.Info().DefaultPolicy == model.Unsupported || opts.Orphan != nil {
		return false
	}
	switch opts.Propagation {
	case "Foreground":
		return true
	case "Background", "Orphan":
		return false
	}
	for _, f := range o.Finalizers {
		switch f {
		case model.FinalizerForeground:
			return true
		case model.FinalizerOrphan:
			return false
		}
	}
	return false
}

// namespaceFinalizers is the Namespace registry's own choice, where
// orphanDependents=false means foreground.
func namespaceFinalizers(o *history.Object, opts *history.DeleteOptions) (orphan, fg bool) {
	switch {
	case opts.Orphan != nil:
		orphan, fg = *opts.Orphan, !*opts.Orphan
	case opts.Propagation != "":
		orphan, fg = opts.Propagation == "Orphan", opts.Propagation == "Foreground"
	default:
		orphan, fg = o.HasFinalizer(model.FinalizerOrphan), o.HasFinalizer(model.FinalizerForeground)
	}
	return orphan, fg
}

func sameSet(a, b []string) bool {
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

// graceful reports kinds whose DELETE may set deletionTimestamp without
// finalizers and remove the object later (a Pod's grace period).
func graceful(k model.KindID) bool { return k.Info().Kind == "Pod" }

// refState is how an ownerReference resolves in a state.
type refState uint8

const (
	// refUnresolvable: the GC never acts on the reference: its kind is
	// not served (a restMappingError, retried forever), or a
	// cluster-scoped dependent names a namespaced owner kind
	// (namespacedOwnerOfClusterScopedObjectErr, forgotten).
	refUnresolvable refState = iota
	// refDangling: no live object with the reference's kind, name and UID
	// in the dependent's namespace (namespaced owner kinds) or cluster
	// scope.
	refDangling
	// refWaiting: the owner is being deleted with foregroundDeletion
	// (waitingForDependentsDeletion).
	refWaiting
	// refSolid: the owner is live and not waiting, an owner being deleted
	// with orphan or a user finalizer included.
	refSolid
	// refUncertain: the owner's UID or content is unknown (an ambiguous
	// write); no rule judges on it.
	refUncertain
)

// ownerKey returns the store key an ownerReference of dependent d names,
// and false when the reference is unresolvable.
func ownerKey(d *history.Object, r *history.Ref) (history.Key, bool) {
	k, ok := model.KindByName(r.Kind)
	if !ok || apiGroupOf(r.APIVersion) != apiGroupOf(k.Info().APIVersion) {
		return history.Key{}, false
	}
	if !k.Info().Namespaced {
		return history.Key{Kind: k, Name: r.Name}, true
	}
	if d.Namespace == "" {
		return history.Key{}, false
	}
	return history.Key{Kind: k, Namespace: d.Namespace, Name: r.Name}, true
}

func apiGroupOf(apiVersion string) string {
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		return g
	}
	return ""
}

// resolve classifies reference r of dependent d in s and returns the
// owner's entry when there is one.
func resolve(s *store, d *history.Object, r *history.Ref) (refState, *entry) {
	k, ok := ownerKey(d, r)
	if !ok {
		return refUnresolvable, nil
	}
	o := s.get(k, keyHash(k))
	switch {
	case o == nil:
		return refDangling, nil
	case o.flags&uidUnknown != 0:
		return refUncertain, o
	case o.obj.UID != r.UID:
		return refDangling, o
	case !o.known():
		return refUncertain, o
	case o.obj.Deleting && o.obj.HasFinalizer(model.FinalizerForeground):
		return refWaiting, o
	}
	return refSolid, o
}

// protected reports whether the deletion-protection webhook may deny a
// DELETE of o (model/protection.go protectionDenies): o is not being
// deleted and carries the label with a value that can deny.
func protected(o *history.Object) bool {
	v := o.Labels[model.ProtectionLabel]
	return !o.Deleting && (v == model.ProtectAlways || v == model.ProtectCascading)
}

// webhookDenial reports a refusal by a validating admission webhook.
func webhookDenial(op *history.Op) bool {
	return (op.Code == 403 || op.Code == 422) && strings.Contains(op.Message, "admission webhook") &&
		strings.Contains(op.Message, "denied the request")
}
