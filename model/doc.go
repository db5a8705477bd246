// Package model is cascade's executable specification of Kubernetes
// deletion: the API server's delete and update semantics for
// ownerReferences and finalizers, the three propagation policies, the
// garbage collector of kube-controller-manager v1.36 (graph builder,
// attemptToDelete, attemptToOrphan, absentOwnerCache), an adopting
// controller, and OpenKruise-style deletion protection evaluated as an
// admission webhook inside the delete.
//
// The model is a deterministic state machine over value-like states. Every
// change happens through one Step, which names its actor: a client request
// (each request is atomic, as the API server's storage makes it), a watch
// delivery to the GC or the controller, a GC work item, or a GC write that
// the work item decided on. Splitting a work item's live GETs from its
// write is what exposes the time-of-check/time-of-use races upstream has
// had (kubernetes#114603).
//
// Vocabulary follows pkg/controller/garbagecollector so that Kubernetes
// people can read the code next to upstream's: solid, dangling and
// waitingForDependentsDeletion owners; virtual nodes; beingDeleted and
// deletingDependents; absentOwnerCache; attemptToDelete and attemptToOrphan.
//
// The semantic code reads and writes States of plain Go values; where the
// memory of a step's new slices comes from (the heap, or the checker's
// arenas) is behind one interface, memory (memory.go, store.go).
//
// The package imports only the standard library.
package model
