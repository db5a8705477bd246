package history

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/model"
)

// Read is one GET of a single object by a controller or the garbage
// collector: read evidence, not an operation of the history. harness/lin
// does not linearize reads; it consults them to tell a controller that
// rechecked an owner before adopting (upstream's RecheckDeletionTimestamp
// in pkg/controller/controller_ref_manager.go, whose canAdoptFunc in the
// ReplicaSet, ReplicationController and Deployment controllers is an
// uncached GET of the owner by the controller's own client) from one that
// did not (the adopt-without-recheck bug, kubernetes#42639), and to bound
// when a GC worker read its graph (the GETs of attemptToDeleteItem and
// isDangling come before it).
type Read struct {
	// Actor is the reader, as Op.Actor: "controller/NAME" or "gc".
	Actor     string
	Kind      model.KindID
	Namespace string // real namespace, "" for cluster-scoped kinds
	Name      string
	// Code is the HTTP status; Got the object answered when it is 200.
	Code int
	Got  *Object
	// Call and Return bound the instant the server read the object
	// (audit RequestReceived and ResponseComplete's StageTimestamp).
	Call, Return int64
}

// Key is the key of the object read.
func (r *Read) Key() Key { return Key{r.Kind, r.Namespace, r.Name} }

// String renders the read on one line.
func (r *Read) String() string {
	s := fmt.Sprintf("%s get %s -> %d", r.Actor, r.Key(), r.Code)
	if r.Got != nil {
		s += " uid " + r.Got.UID
		if r.Got.Deleting {
			s += " deleting"
		}
	}
	return s
}

// ReadsFromAudit returns the controllers' and the GC's GETs of single
// objects in scope from the API server's audit records, in record order:
// every completed "get" (not list or watch) whose actor (AuditActor) is a
// controller, kube-controller-manager's or impl's adopter, or a garbage
// collector, with the object it answered. The audit policy
// (controlplane.AuditPolicy) records the model's kinds at level
// RequestResponse, GETs included, so on an envtest target these are all
// the GETs they made: a recheck that is not here did not happen.
//
// An error names the record: a GET in scope recorded without its bodies,
// or an answer that does not decode.
func ReadsFromAudit(records []controlplane.AuditRecord, s Scope) ([]Read, error) {
	var out []Read
	for i, rec := range records {
		if rec.Stage != controlplane.StageResponseComplete || rec.Verb != "get" || rec.Subresource != "" || rec.Name == "" {
			continue
		}
		k, served := KindOf(rec.APIGroup, rec.Resource)
		if !served || !s.Contains(k, rec.Namespace, rec.Name) {
			continue
		}
		actor := AuditActor(rec)
		if actor != ActorGC && !strings.HasPrefix(actor, "controller/") {
			continue
		}
		r := Read{Actor: actor, Kind: k, Namespace: rec.Namespace, Name: rec.Name, Code: rec.Code,
			Call: rec.RequestReceived.UnixNano(), Return: rec.StageTimestamp.UnixNano()}
		if !k.Info().Namespaced {
			r.Namespace = ""
		}
		if rec.Code == 200 {
			if rec.Level != "RequestResponse" {
				return nil, fmt.Errorf("history: audit record %d (%s): recorded at level %s, without the object read (the audit policy must log %s at level RequestResponse)",
					i, rec, rec.Level, rec.Resource)
			}
			resp, err := decodeResponse(k, rec.ResponseObject)
			if err != nil {
				return nil, fmt.Errorf("history: audit record %d (%s): %w", i, rec, err)
			}
			r.Got = resp.obj
		}
		out = append(out, r)
	}
	return out, nil
}

// GCRequestsFromAudit reads the garbage collector's GETs and writes of
// single objects in scope from an audit log, in the order the API server
// received them: what the proxy's record gives on the upstream target
// (proxy.Evidence.GCRequests), for a target without the proxy whose GC
// the audit log tells apart (impl's). Received is the API server's
// receipt, later than the GC sent the request, and Answered its last
// stage, earlier than the GC had the answer, so each bounds the GC's own
// instant in the direction lin uses it: a decision came before a GET was
// received, and a read after a GET it followed was answered. UID is the
// answered object's, when the answer names one.
func GCRequestsFromAudit(records []controlplane.AuditRecord, s Scope) []GCRequest {
	var out []GCRequest
	for _, rec := range records {
		if rec.Stage != controlplane.StageResponseComplete || rec.Subresource != "" || rec.Name == "" || AuditActor(rec) != ActorGC {
			continue
		}
		switch rec.Verb {
		case "get", "create", "update", "patch", "delete":
		default:
			continue
		}
		k, served := KindOf(rec.APIGroup, rec.Resource)
		if !served || !s.Contains(k, rec.Namespace, rec.Name) {
			continue
		}
		r := GCRequest{Verb: rec.Verb, Kind: k, Namespace: rec.Namespace, Name: rec.Name, Code: rec.Code,
			Received: rec.RequestReceived.UnixNano(), Answered: rec.StageTimestamp.UnixNano()}
		if !k.Info().Namespaced {
			r.Namespace = ""
		}
		var answer struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		if rec.Code/100 == 2 && json.Unmarshal(rec.ResponseObject, &answer) == nil {
			r.UID = answer.Metadata.UID
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b GCRequest) int { return cmp.Compare(a.Received, b.Received) })
	return out
}

// GraphChange is one informer event a garbage collector's graph builder
// applied (processGraphChanges): evidence of what the GC's graph held
// when, which only an in-process GC can give (impl's
// gc.Options.OnGraphChange; kube-controller-manager's graph is out of
// sight). A worker that began reading the graph after At read a graph
// with this version of the object in it.
type GraphChange struct {
	UID string
	// RV is the version of the object the event carried.
	RV uint64
	// Deleted says the event removed the object from the graph.
	Deleted bool
	// Replaced is the UID of the informer's previous version when it was
	// another object's (a relist handed a name's new object on as an
	// update from the old one, gc.GraphChange.Replaced); "" otherwise.
	Replaced string
	// Reset marks the start of a GC with an empty graph (impl's
	// gc.GraphChange.Reset; a restart of the GC), with At set and the
	// other fields empty: the changes before it are of a graph that no
	// worker after it reads.
	Reset bool
	// At is when the graph builder had applied it, in Unix nanoseconds
	// of the same clock as the audit log's (one machine).
	At int64
}

// Processed is one event kube-controller-manager's graph builder began
// to apply, as its log shows it: processGraphChanges logs
// "GraphBuilder process object" (at level 5, which the harness turns on
// for graph_builder.go alone) before it changes the graph, in the one
// goroutine that applies every informer's events. The log order is
// therefore the order in which the graph took events in across
// informers, which the proxy's delivery record (Delivery) cannot show:
// each informer hands its events on from goroutines of its own
// (kubernetes#26120 item 1). The line names no resourceVersion; lin
// pairs each object's lines with its deliveries in order (the informer
// and the graph builder's queue keep each object's events in order).
type Processed struct {
	UID string
	// Deleted says the event was a delete event, Virtual that the graph
	// builder made it itself (a virtual node's delete event, never
	// delivered).
	Deleted, Virtual bool
	// Seq is the line's place in the log, counted from the process's
	// first line the harness read: only the order matters.
	Seq int
	// At is the line's klog stamp, in Unix nanoseconds (microseconds,
	// truncated): the graph builder began the event at or after At.
	At int64
}

// Delivery is one watch event handed to one of the garbage collector's
// informers of the real kube-controller-manager, as cascade's API proxy
// recorded it (harness/proxy, the upstream target): the GC's monitors
// read the typed shared informers and the metadata informers, so an
// event handed to either is handed to the GC. It is upstream's
// counterpart of GraphChange, one step earlier: the GC could not have
// seen this version of the object before At; after At its graph may
// have it (the graph builder applies events in order, out of sight).
type Delivery struct {
	UID string
	// RV is the version of the object the event carried.
	RV uint64
	// Deleted says the event was a DELETED one.
	Deleted bool
	// At is when the proxy handed the event on, in Unix nanoseconds of
	// the same clock as the audit log's (one machine).
	At int64
}

// GCRequest is one GET or write of the real garbage collector as
// cascade's API proxy recorded it (harness/proxy, the upstream target):
// on the proxy's clock, the clock of Delivery.At. The audit log stamps
// the same request when kube-apiserver got it, after the proxy passed
// it on, so only these times compare with the delivery record without a
// gap between the two: the GC sent the request before Received.
type GCRequest struct {
	// Verb is the API verb: "get", "create", "update", "patch",
	// "delete".
	Verb      string
	Kind      model.KindID
	Namespace string // real namespace, "" for cluster-scoped kinds
	Name      string
	// Code is the answer's HTTP status; UID the answered object's.
	Code int
	UID  string
	// Received is when the proxy got the request, Answered when it
	// handed the answer back, in Unix nanoseconds.
	Received, Answered int64
}

// Key is the key of the object the request named.
func (r *GCRequest) Key() Key { return Key{r.Kind, r.Namespace, r.Name} }
