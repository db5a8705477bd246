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
// finalizers as a history reads them. The model keeps a Namespace's
// "kubernetes" finalizer among its finalizers, a real Namespace keeps it
// in spec.finalizers, which the history's objects leave out: o is read
// with it still held (as the history assumes spec.finalizers,
// namespaceSpecs: no namespace controller runs), so a DELETE of a
// Terminating Namespace changes nothing, and the result leaves it out
// again.
func DeleteResult(sem model.Semantics, o *Object, opts *DeleteOptions) model.DeleteResult {
	v := model.View{Kind: o.Kind, Finalizers: o.Finalizers, Deleting: o.Deleting}
	ns := o.Kind.Info().Kind == "Namespace"
	if ns && !slices.Contains(o.Finalizers, model.FinalizerNamespace) {
		v.Finalizers = append(slices.Clone(o.Finalizers), model.FinalizerNamespace)
	}
	r := model.Delete(sem, &v, ModelDeleteOptions(opts))
	if ns && slices.Contains(r.Finalizers, model.FinalizerNamespace) {
		r.Finalizers = slices.DeleteFunc(slices.Clone(r.Finalizers), func(f string) bool { return f == model.FinalizerNamespace })
	}
	return r
}

// ModelDeleteOptions reads a DELETE's options as the model's: its
// propagation policy and orphanDependents (a propagationPolicy the model
// does not know reads as none), and whether it carries a resourceVersion
// precondition, as PreconditionRV 1 (model.Delete reads only that one is
// set: DeleteResult.LosesRVPrecondition).
func ModelDeleteOptions(opts *DeleteOptions) model.DeleteOptions {
	var mopts model.DeleteOptions
	if opts != nil {
		mopts.OrphanDependents = opts.Orphan
		mopts.Policy, _ = model.ParsePolicy(opts.Propagation)
		if opts.PreconditionRV != "" {
			mopts.PreconditionRV = 1
		}
	}
	return mopts
}
