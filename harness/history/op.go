// Package history is the recorded history of one conformance run: every
// write request any actor made to the objects of the run (the driver's
// clients, the garbage collector, workload controllers), each with the
// interval in which the API server applied it and what it answered.
//
// The same Op type comes from three recorders: the API server's audit log
// on envtest targets (FromAudit), the driver's own client-side recording,
// and a watch that observes the writes of actors the harness cannot see
// on a kubeconfig target (verb Observed). harness/lin checks a history for
// linearizability against the model's API-server semantics and for the
// legality of every GC and controller write.
package history

import (
	"github.com/cascade-k8s/cascade/model"
)

// Verb is what a request did.
type Verb string

// The verbs of a history. Reads are not operations: the checker judges
// writes, and the driver's reads (state dumps) happen only when quiet.
// The controllers' GETs are kept apart, as read evidence (Read,
// ReadsFromAudit).
const (
	Create Verb = "create"
	Update Verb = "update" // PUT, the status subresource included
	Patch  Verb = "patch"
	Delete Verb = "delete"
	// Observed is a write seen only through a watch event (kubeconfig
	// targets): its actor and request are unknown, Got is the state the
	// event showed (Removed for a DELETED event).
	Observed Verb = "observed"
)

// Ref is one ownerReference as the server holds it.
type Ref struct {
	APIVersion string
	Kind       string
	Name       string
	UID        string
	Controller bool
	Block      bool // blockOwnerDeletion
	// ControllerUnset and BlockUnset: the field was absent (nil), which
	// reads as false but is a different reference to the API server's
	// dedup.
	ControllerUnset, BlockUnset bool
}

// Object is an API object reduced to what deletion reads and writes.
type Object struct {
	Kind       model.KindID
	Namespace  string // real namespace, "" for cluster-scoped kinds
	Name       string // real name
	UID        string
	RV         uint64 // resourceVersion: kube-apiserver's are etcd revisions, global and increasing
	Owners     []Ref
	Finalizers []string
	Labels     map[string]string
	Deleting   bool // deletionTimestamp set
	Replicas   int  // spec.replicas of workloads (-1 when the kind has none)
}

// DeleteOptions are a DELETE's options as sent.
type DeleteOptions struct {
	Propagation     string // "", Orphan, Background, Foreground
	Orphan          *bool  // the deprecated orphanDependents
	PreconditionUID string
	PreconditionRV  string
}

// Op is one write request of a history.
type Op struct {
	// Actor names who sent it: "client-N" for the driver's clients, "gc"
	// for a garbage collector (upstream's or impl's), "controller/NAME"
	// for workload controllers and impl's adopter, "cluster" for a write
	// observed only by watch.
	Actor string
	// ClientID is the op's lane in porcupine (one per actor), zero-based.
	ClientID int

	Verb        Verb
	Kind        model.KindID
	Namespace   string // real namespace, "" for cluster-scoped kinds
	Name        string // real name
	Subresource string // "status", "scale", ... or ""

	// Sent is the object a create or update sent (UID and RV as sent,
	// often empty) or, for a JSON merge or strategic merge patch, the
	// patch read as an object: partial, only its UID and RV (the patch's
	// preconditions) are meaningful. Delete holds the options of a delete;
	// Body the raw request body of an update or patch, for display;
	// PatchType its content type.
	Sent      *Object
	Delete    *DeleteOptions
	Body      []byte
	PatchType string

	// Code is the HTTP status; 0 when no response came (timeout, broken
	// connection): the request may or may not have been applied. Observed
	// ops carry 200.
	Code    int
	Reason  string // metav1.StatusReason of a refusal
	Message string // the refusal's metav1.Status message
	// Got is the object the server returned for a successful write (its
	// state right after the write) or, for an Observed op, the state the
	// watch showed. Removed says the write removed the object from the
	// store: a DELETE of an object without finalizers, the last finalizer
	// removed from an object being deleted, a DELETED watch event, or a
	// DELETE answered at the revision of the object's DELETED event
	// (Observer.Ops: the answer may show finalizers, kubernetes#77988).
	Got     *Object
	Removed bool

	// Call and Return bound the instant the server applied the request,
	// in Unix nanoseconds: when it received it and when it answered (audit
	// RequestReceived and ResponseComplete's StageTimestamp). A
	// client-side recording uses the client's send and receive times,
	// which enclose the server's. An ambiguous op may have been applied
	// after Return (the server may still act on a request whose client
	// gave up), so the checker treats its Return as unbounded.
	Call, Return int64
}

// Ambiguous reports whether the op's outcome is unknown: no response,
// or a server error after which the write may still have been applied.
func (op *Op) Ambiguous() bool { return op.Code == 0 || op.Code >= 500 }

// OK reports whether the server accepted the op.
func (op *Op) OK() bool { return op.Code >= 200 && op.Code < 300 }
