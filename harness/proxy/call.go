package proxy

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// Verbs of a Call, as kube-apiserver's RequestInfo names them.
const (
	VerbList   = "list"
	VerbWatch  = "watch"
	VerbGet    = "get"
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbPatch  = "patch"
	VerbDelete = "delete"
	// VerbDeleteCollection is a DELETE of a collection.
	VerbDeleteCollection = "deletecollection"
	// VerbOther is a request that names no resource (discovery, /healthz).
	VerbOther = "other"
)

// GarbageCollectorClient is the client name of kube-controller-manager's
// garbage collector (its user agent's last segment), the one that sends
// its GETs, PATCHes and DELETEs. Its monitors read the controller
// manager's shared informers: the typed one of a resource that has one
// (SharedInformersClient, shared with the workload controllers), else
// the metadata one (MetadataInformersClient; custom resources)
// (k8s.io/controller-manager informerfactory.NewInformerFactory).
const GarbageCollectorClient = "generic-garbage-collector"

// SharedInformersClient is the client name of kube-controller-manager's
// typed shared informer factory, whose watches every controller's
// informers of built-in resources, the garbage collector's monitors
// included, read.
const SharedInformersClient = "shared-informers"

// MetadataInformersClient is the client name of kube-controller-manager's
// metadata informer factory: the garbage collector's monitors of the
// resources without a typed informer (custom resources, APIServices).
const MetadataInformersClient = "metadata-informers"

// Call is what a request asks, read from its method, path, query and
// Accept header the way kube-apiserver's RequestInfo resolver reads them
// (k8s.io/apiserver/pkg/endpoints/request).
type Call struct {
	// Verb is one of the Verb constants.
	Verb string `json:"verb"`
	// Group and Resource name the resource ("" group: the core group);
	// Subresource is a subresource such as "status" or "finalize".
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	// Path is the request's path, for calls that name no resource.
	Path string `json:"path,omitempty"`
	// Metadata is true when the client asked for PartialObjectMetadata
	// (the metadata client the garbage collector's informers use).
	Metadata bool `json:"metadata,omitempty"`
	// InitialEvents is true for a watch that asked for the current state
	// first (sendInitialEvents=true: a WatchList, the streaming form of
	// an informer's LIST).
	InitialEvents bool `json:"initialEvents,omitempty"`
	// ResourceVersionAsked is the request's resourceVersion parameter.
	ResourceVersionAsked string `json:"resourceVersionAsked,omitempty"`
}

// Write reports whether the call changes state.
func (c Call) Write() bool {
	switch c.Verb {
	case VerbCreate, VerbUpdate, VerbPatch, VerbDelete, VerbDeleteCollection:
		return true
	}
	return false
}

// Relist reports whether the call is an informer's (re)list: a LIST, or
// a watch that sends the initial state first.
func (c Call) Relist() bool {
	return c.Verb == VerbList || (c.Verb == VerbWatch && c.InitialEvents)
}

// Informer names the informer a LIST or WATCH feeds: its client, its
// resource and whether it reads metadata only, as
// "shared-informers/pods" or "metadata-informers/herds.cascade.dev#metadata".
// kube-controller-manager runs one informer per resource and form in each
// informer factory, so the name identifies one informer's stream of
// events.
func (c Call) Informer(client string) string {
	s := client + "/" + c.Resource
	if c.Group != "" {
		s += "." + c.Group
	}
	if c.Metadata {
		s += "#metadata"
	}
	return s
}

// processClient is the client name with its process (Request.Process)
// in front when that is not the proxy's first: "workloads:shared-informers".
func (r *Request) processClient() string {
	if r.Process == "" {
		return r.Client
	}
	return r.Process + ":" + r.Client
}

// parseCall reads what req asks.
func parseCall(req *http.Request) Call {
	q := req.URL.Query()
	c := Call{Path: req.URL.Path, ResourceVersionAsked: q.Get("resourceVersion"),
		Metadata: strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata")}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		c.Group, parts = parts[1], parts[3:]
	default:
		c.Verb = VerbOther
		return c
	}
	watchPath := false
	if len(parts) > 0 && parts[0] == "watch" { // the deprecated /watch/ paths
		watchPath, parts = true, parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		c.Namespace = parts[1]
		if len(parts) == 2 || parts[2] == "status" || parts[2] == "finalize" {
			// a Namespace itself: /api/v1/namespaces/NAME[/status]
			c.Resource, c.Name = "namespaces", parts[1]
			c.Namespace = ""
			if len(parts) == 3 {
				c.Subresource = parts[2]
			}
			parts = nil
		} else {
			parts = parts[2:]
		}
	}
	if len(parts) >= 1 {
		c.Resource = parts[0]
	}
	if len(parts) >= 2 {
		c.Name = parts[1]
	}
	if len(parts) >= 3 {
		c.Subresource = parts[2]
	}
	if c.Resource == "" {
		c.Verb = VerbOther
		return c
	}
	c.Path = ""
	watching := watchPath || isTrue(q, "watch")
	c.InitialEvents = watching && isTrue(q, "sendInitialEvents")
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watching:
			c.Verb = VerbWatch
		case c.Name == "":
			c.Verb = VerbList
		default:
			c.Verb = VerbGet
		}
	case http.MethodPost:
		c.Verb = VerbCreate
	case http.MethodPut:
		c.Verb = VerbUpdate
	case http.MethodPatch:
		c.Verb = VerbPatch
	case http.MethodDelete:
		c.Verb = VerbDelete
		if c.Name == "" {
			c.Verb = VerbDeleteCollection
		}
	default:
		c.Verb = VerbOther
	}
	return c
}

func isTrue(q url.Values, key string) bool {
	v := q.Get(key)
	return v == "true" || v == "1"
}

// clientName is the last segment of a kube-controller-manager user agent
// ("kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0000000/generic-garbage-collector"),
// the client name rest.AddUserAgent appended; the whole user agent when
// it has no such segment.
func clientName(ua string) string {
	if i := strings.LastIndexByte(ua, '/'); i >= 0 && strings.Contains(ua, " ") {
		return ua[i+1:]
	}
	return ua
}

// Controller decides when the traffic between kube-controller-manager
// and kube-apiserver passes the proxy. The proxy calls it for every
// request before passing it on and for every watch event before handing
// it to its stream; each call may block, which holds that request, or
// that stream's events (each stream's in order: its later events queue
// behind the one held), until it returns. Faults is one Controller; the
// stepped upstream target will be another (see the package doc).
type Controller interface {
	// Admit is called once per request before it is passed on; an error
	// refuses the request (the proxy answers 503 and records Err).
	Admit(ctx context.Context, r *Request) error
	// Deliver is called for each event of a watch stream, in order,
	// before it is handed on. Break ends the stream instead (with a 410
	// Expired error event, so that the informer lists again): that event
	// and every later one of the stream are dropped.
	Deliver(ctx context.Context, stream *Request, ev *Delivery) (Verdict, error)
	// Ended is called when a watch stream ends, for whatever reason.
	Ended(stream *Request)
}

// Verdict is what a Controller decided about a watch event.
type Verdict int

const (
	// Pass hands the event on.
	Pass Verdict = iota
	// Break ends the stream with a 410 Expired error event.
	Break
)

// Pending is implemented by Controllers that hold traffic of their own
// accord (Faults): the proxy is idle only when none is held.
type Pending interface {
	// Pending counts what the Controller is still to release or resume:
	// held requests and events, and informers whose stream it broke and
	// which have not watched again yet.
	Pending() int
}

// Observer is implemented by Controllers that follow what becomes of the
// requests they admitted (Stepper): the proxy calls Answered once for
// each request that is not a watch, with its answer or Err, after
// recording it.
type Observer interface {
	Answered(r Request)
}
