package history

import (
	"github.com/cascade-k8s/cascade/model"
)

// DeletionFinalizers returns the finalizers a DELETE with opts leaves on
// o, as the API server chooses them (model/apiserver.go
// deletionFinalizers; upstream generic/registry/store.go
// deletionFinalizersForGarbageCollection, shouldOrphanDependents and
// shouldDeleteDependents, and the Namespace registry's own choice): o's
// own finalizers minus orphan and foregroundDeletion, plus the one the
// request or, failing that, o's existing finalizers or its kind's
// default call for. The object leaves storage at once when none remain
// (and, for a graceful kind, no grace period is left).
func DeletionFinalizers(o *Object, opts *DeleteOptions) []string {
	if opts == nil {
		opts = &DeleteOptions{}
	}
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
func shouldOrphanDependents(o *Object, opts *DeleteOptions) bool {
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
func shouldDeleteDependents(o *Object, opts *DeleteOptions) bool {
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
func namespaceFinalizers(o *Object, opts *DeleteOptions) (orphan, fg bool) {
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
