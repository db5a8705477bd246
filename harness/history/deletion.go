package history

import (
	"slices"

	"github.com/cascade-k8s/cascade/model"
)

// DeletionFinalizers returns the finalizers a DELETE with opts leaves on
// o, as the API server chooses them: the model's choice
// (model.DeletionFinalizers; upstream generic/registry/store.go
// deletionFinalizersForGarbageCollection, shouldOrphanDependents and
// shouldDeleteDependents, and the Namespace registry's own choice): o's
// own finalizers minus orphan and foregroundDeletion, plus the one the
// request or, failing that, o's existing finalizers or its kind's
// default call for. The object leaves storage at once when none remain
// (and, for a graceful kind, no grace period is left).
func DeletionFinalizers(o *Object, opts *DeleteOptions) []string {
	mo := model.Object{Kind: o.Kind, Finalizers: o.Finalizers, Deleting: o.Deleting}
	if o.Kind.Info().Kind == "Namespace" && !slices.Contains(o.Finalizers, model.FinalizerNamespace) {
		// spec.finalizers, as the history assumes them (namespaceSpecs):
		// still held, so a DELETE of a Terminating Namespace changes
		// nothing
		mo.Finalizers = append(slices.Clone(o.Finalizers), model.FinalizerNamespace)
	}
	var mopts model.DeleteOptions
	if opts != nil {
		mopts.OrphanDependents = opts.Orphan
		mopts.Policy, _ = model.ParsePolicy(opts.Propagation)
	}
	// The model keeps a Namespace's "kubernetes" finalizer among its
	// finalizers; a real Namespace keeps it in spec.finalizers, which the
	// history's objects leave out.
	return slices.DeleteFunc(slices.Clone(model.DeletionFinalizers(&mo, mopts)), func(f string) bool {
		return f == model.FinalizerNamespace && o.Kind.Info().Kind == "Namespace"
	})
}
