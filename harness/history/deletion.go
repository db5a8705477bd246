package history

import (
	"slices"

	"github.com/cascade-k8s/cascade/model"
)

// DeletionFinalizers returns the finalizers a DELETE with opts leaves on
// o, as the API server chooses them: the model's choice
// (model.Delete; upstream generic/registry/store.go
// deletionFinalizersForGarbageCollection, shouldOrphanDependents and
// shouldDeleteDependents, and the Namespace registry's own choice): o's
// own finalizers minus orphan and foregroundDeletion, plus the one the
// request or, failing that, o's existing finalizers or its kind's
// default call for. The object leaves storage at once when none remain
// (and, for a graceful kind, no grace period is left).
func DeletionFinalizers(o *Object, opts *DeleteOptions) []string {
	return DeleteResult(model.Semantics{}, o, opts).Finalizers
}

// DeleteResult is model.Delete of a DELETE with opts on o, its
// finalizers as a history reads them: the model keeps a Namespace's
// "kubernetes" finalizer among its finalizers, a real Namespace keeps it
// in spec.finalizers, which the history does not read (so a Namespace's
// finalizers may be empty while Removed is false).
func DeleteResult(sem model.Semantics, o *Object, opts *DeleteOptions) model.DeleteResult {
	v := model.View{Kind: o.Kind, Finalizers: o.Finalizers, Deleting: o.Deleting}
	r := model.Delete(sem, &v, ModelDeleteOptions(opts))
	if o.Kind.Info().Kind == "Namespace" && slices.Contains(r.Finalizers, model.FinalizerNamespace) {
		r.Finalizers = slices.DeleteFunc(slices.Clone(r.Finalizers), func(f string) bool { return f == model.FinalizerNamespace })
	}
	return r
}

// ModelDeleteOptions reads a DELETE's options as the model's: its
// propagation policy and orphanDependents (a propagationPolicy the model
// does not know reads as none).
func ModelDeleteOptions(opts *DeleteOptions) model.DeleteOptions {
	var mopts model.DeleteOptions
	if opts != nil {
		mopts.OrphanDependents = opts.Orphan
		mopts.Policy, _ = model.ParsePolicy(opts.Propagation)
	}
	return mopts
}
