package proxy

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
)

// Request is one request of kube-controller-manager as the proxy passed
// it on, with its answer. A watch is a Request too: Answered is when its
// stream ended, and its events are Deliveries naming it as their Stream.
type Request struct {
	// ID numbers the proxy's requests from 1, in the order they came.
	ID int64 `json:"id"`
	// Client is the controller-manager client that sent it: the last
	// segment of its user agent ("generic-garbage-collector",
	// "shared-informers", "replicaset-controller", ...).
	Client string `json:"client"`
	// UserAgent is the whole user agent, as passed on.
	UserAgent string `json:"userAgent"`
	// Process is the kube-controller-manager process that sent it: ""
	// for the one of the proxy's URL, else the name given to Listen
	// (WorkloadsProcess on upstream-stepped). Two processes run the same
	// binary with the same identity, so their user agents are the same.
	Process string `json:"process,omitempty"`
	Call
	// Received is when the proxy got the request, Sent when it passed it
	// on (later than Received when a Controller held it) and Answered
	// when the answer, or a watch's last event, was handed back.
	Received time.Time `json:"received"`
	Sent     time.Time `json:"sent,omitzero"`
	Answered time.Time `json:"answered,omitzero"`
	// Code is the answer's HTTP status (0: none, the request failed on
	// its way or was refused; see Err).
	Code int `json:"code"`
	// Reason is the reason of an answer that is a Status (a refusal:
	// "Conflict", "NotFound", ...), "" otherwise.
	Reason string `json:"reason,omitempty"`
	// ResourceVersion is the answer's metadata.resourceVersion: the
	// object's after a GET or a write, the list's after a LIST ("" for a
	// DELETE answered with a Status: the object is gone, and its
	// DELETED event carries the deletion's resourceVersion).
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// UID is the answered object's metadata.uid (GET and writes; a
	// DELETE's Status's details.uid), and for
	// a create Name is filled from the answer when the request had none.
	UID string `json:"uid,omitempty"`
	// Deleting is true when the answered object has a deletionTimestamp
	// (a GET's answer: what a controller's RecheckDeletionTimestamp saw).
	Deleting bool `json:"deleting,omitempty"`
	// Items is the number of items a LIST answered.
	Items int `json:"items,omitempty"`
	// RemovedOwners are the UIDs of the owner references a PATCH's body
	// deletes (a strategic merge patch's "$patch": "delete" entries,
	// RemovedOwners): for a GC PATCH of a dependent, the owners whose
	// references it removes.
	RemovedOwners []string `json:"removedOwners,omitempty"`
	// Err says why there is no answer: the request was refused by the
	// Controller, failed on its way, or kube-controller-manager went away.
	Err string `json:"err,omitempty"`
}

// Delivery is one watch event handed to one watch stream of
// kube-controller-manager: the evidence of what an informer could have
// seen, and when.
type Delivery struct {
	// Stream is the ID of the watch Request the event belongs to.
	Stream int64 `json:"stream"`
	// Client is the stream's client (Request.Client), Informer its
	// informer (Call.Informer).
	Client   string `json:"client"`
	Informer string `json:"informer"`
	// Type is the event's type: ADDED, MODIFIED, DELETED, BOOKMARK, or
	// ERROR (an error kube-apiserver sent, or the 410 Expired with which
	// the informer-relist fault ended the stream).
	Type string `json:"type"`
	// Namespace, Name, UID and ResourceVersion are the event's object's
	// (a bookmark's carries only a resourceVersion).
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Initial marks a WatchList stream's initial events, the informer's
	// list, and InitialEventsEnd the bookmark that ends them (annotation
	// k8s.io/initial-events-end); the events after it are live.
	Initial          bool `json:"initial,omitempty"`
	InitialEventsEnd bool `json:"initialEventsEnd,omitempty"`
	// Received is when the event came from kube-apiserver, Delivered
	// when the proxy wrote it to kube-controller-manager's stream (zero:
	// never, the stream ended first, as a relist fault ends it).
	Received  time.Time `json:"received"`
	Delivered time.Time `json:"delivered,omitzero"`
	// Fault names the fault that ended the stream instead of handing the
	// event on ("relist"), "" for none.
	Fault string `json:"fault,omitempty"`
	// Shape is what the model has of the event's object (uid,
	// generation, labels, ownerReferences, finalizers,
	// deletionTimestamp), not recorded: a MODIFIED event of the same
	// shape as the object's last on its stream changed only what the
	// model does not have (a controller's status update), and the
	// Stepper hands it on unheld.
	Shape string `json:"-"`
}

// Held is how long the proxy held the event.
func (d Delivery) Held() time.Duration {
	if d.Delivered.IsZero() {
		return 0
	}
	return d.Delivered.Sub(d.Received)
}

// Held is how long the proxy held the request before passing it on.
func (r Request) Held() time.Duration {
	if r.Sent.IsZero() {
		return 0
	}
	return r.Sent.Sub(r.Received)
}

// Evidence is what the proxy recorded: every request with its answer and
// every watch event with the moment it was handed on, each in the order
// recorded (a request when it was answered, an event when it was handed
// on or dropped).
type Evidence struct {
	Requests   []Request  `json:"requests"`
	Deliveries []Delivery `json:"deliveries"`
	// GraphBuilder is not the proxy's: the harness adds the lines
	// kube-controller-manager's graph builder logged for the events it
	// began to apply over the same span (history.Processed), the other
	// half of what the kcm's IO boundary shows of its informers.
	GraphBuilder []history.Processed `json:"graph_builder,omitempty"`
}

// Relists counts the watch streams the informer-relist fault ended.
func (e Evidence) Relists() int {
	n := 0
	for _, d := range e.Deliveries {
		if d.Fault == "relist" && d.Type == "ERROR" {
			n++
		}
	}
	return n
}

// WriteFile writes the evidence to path as JSON lines: one object per
// request ({"request": ...}) and per delivery ({"delivery": ...}), in the
// order they were recorded.
func (e Evidence) WriteFile(path string) error {
	if err := history.WriteJSONLines(path, e.lines()); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	return nil
}

// line is one JSON line of WriteFile.
type line struct {
	at       time.Time
	Request  *Request  `json:"request,omitempty"`
	Delivery *Delivery `json:"delivery,omitempty"`
	// GraphBuilder is one of Evidence.GraphBuilder's lines.
	GraphBuilder *history.Processed `json:"graph_builder,omitempty"`
}

// lines merges requests, deliveries and the graph builder's lines by the
// time each was recorded (a line's klog stamp).
func (e Evidence) lines() []line {
	var out []line
	for i := range e.Requests {
		r := &e.Requests[i]
		out = append(out, line{at: r.Answered, Request: r})
	}
	for i := range e.Deliveries {
		d := &e.Deliveries[i]
		at := d.Delivered
		if at.IsZero() {
			at = d.Received
		}
		out = append(out, line{at: at, Delivery: d})
	}
	for i := range e.GraphBuilder {
		p := &e.GraphBuilder[i]
		out = append(out, line{at: time.Unix(0, p.At), GraphBuilder: p})
	}
	slices.SortStableFunc(out, func(a, b line) int { return a.at.Compare(b.at) })
	return out
}

// record is the proxy's evidence, guarded by mu.
type record struct {
	mu         sync.Mutex
	requests   []Request
	deliveries []Delivery
	// streaks are the GC's failed writes in a row per object, over
	// requests (Proxy.GCFailStreak).
	streaks failStreaks
}

func (r *record) request(q Request) {
	r.mu.Lock()
	r.requests = append(r.requests, q)
	if r.streaks == nil {
		r.streaks = failStreaks{}
	}
	r.streaks.add(q)
	r.mu.Unlock()
}

func (r *record) delivery(d Delivery) {
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
}

// snapshot copies the record; with take it also empties it.
func (r *record) snapshot(take bool) Evidence {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := Evidence{Requests: slices.Clone(r.requests), Deliveries: slices.Clone(r.deliveries)}
	if take {
		r.requests, r.deliveries, r.streaks = nil, nil, nil
	}
	return e
}

// heldMin is the least hold Summary counts as held: the proxy's own
// relay, with each event written and flushed in turn, takes up to about
// 10 ms on a loaded machine (measured: 8 and 11 ms at most over two runs
// without faults).
const heldMin = 20 * time.Millisecond

// Summary describes the evidence on one line: the watch events handed on
// and how many a fault held, the streams a relist fault ended, and the
// garbage collector's writes and how many were held.
func (e Evidence) Summary() string {
	var events, heldEvents, writes, heldWrites int
	var maxEvent, maxWrite time.Duration
	for _, d := range e.Deliveries {
		if d.Delivered.IsZero() || d.Fault != "" {
			continue
		}
		events++
		if h := d.Held(); h >= heldMin {
			heldEvents++
			maxEvent = max(maxEvent, h)
		}
	}
	for _, r := range e.Requests {
		if r.Client != GarbageCollectorClient || !r.Write() {
			continue
		}
		writes++
		if h := r.Held(); h >= heldMin {
			heldWrites++
			maxWrite = max(maxWrite, h)
		}
	}
	return fmt.Sprintf("%d requests, %d watch events handed on (%d held over 20ms, longest %s), %d watches ended for a relist, %d GC writes (%d held over 20ms, longest %s)",
		len(e.Requests), events, heldEvents, maxEvent.Round(time.Millisecond), e.Relists(), writes, heldWrites, maxWrite.Round(time.Millisecond))
}

// GCDeliveries converts the evidence into what harness/lin reads
// (lin.Options.Deliveries): every object event handed to an informer the
// garbage collector's monitors read (SharedInformersClient,
// MetadataInformersClient), in the order handed on. Bookmarks, errors,
// events never handed on and events whose resourceVersion is not a
// number are left out.
func (e Evidence) GCDeliveries() []history.Delivery {
	var out []history.Delivery
	for _, d := range e.Deliveries {
		if d.Client != SharedInformersClient && d.Client != MetadataInformersClient || d.Delivered.IsZero() || d.UID == "" {
			continue
		}
		switch d.Type {
		case "ADDED", "MODIFIED", "DELETED":
		default:
			continue
		}
		rv, err := strconv.ParseUint(d.ResourceVersion, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, history.Delivery{UID: d.UID, RV: rv, Deleted: d.Type == "DELETED", At: d.Delivered.UnixNano()})
	}
	slices.SortStableFunc(out, func(a, b history.Delivery) int { return cmp.Compare(a.At, b.At) })
	return out
}

// GCRequests converts the garbage collector's GETs and writes of single
// objects of the model's kinds into what harness/lin reads
// (lin.Options.GCRequests), in the order the proxy got them: the bound,
// on the clock of GCDeliveries, of when the GC decided a write. Requests
// of a subresource, without a name, without an answer, or of a resource
// the model does not know are left out.
func (e Evidence) GCRequests() []history.GCRequest {
	var out []history.GCRequest
	for _, r := range e.Requests {
		if r.Client != GarbageCollectorClient || r.Name == "" || r.Subresource != "" || r.Answered.IsZero() || r.Code == 0 {
			continue
		}
		switch r.Verb {
		case VerbGet, VerbCreate, VerbUpdate, VerbPatch, VerbDelete:
		default:
			continue
		}
		k, ok := history.KindOf(r.Group, r.Resource)
		if !ok {
			continue
		}
		g := history.GCRequest{Verb: r.Verb, Kind: k, Namespace: r.Namespace, Name: r.Name, Code: r.Code, UID: r.UID,
			Received: r.Received.UnixNano(), Answered: r.Answered.UnixNano()}
		if !k.Info().Namespaced {
			g.Namespace = ""
		}
		out = append(out, g)
	}
	slices.SortStableFunc(out, func(a, b history.GCRequest) int { return cmp.Compare(a.Received, b.Received) })
	return out
}
