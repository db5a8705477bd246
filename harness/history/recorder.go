package history

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/model"
)

// Recorder records, client side, the writes that clients built from its
// Wrap'ped configurations send: the history of a target without an audit
// log (any cluster reached through a kubeconfig). It sees only its own
// clients; an Observer adds what the others did.
type Recorder struct {
	scope Scope

	mu         sync.Mutex
	ops        []Op
	errs       []error
	unanswered []unanswered // the ops of ops that got no answer
	// refused counts the writes whose connection was refused (neverSent):
	// not in the history, since no server received them
	refused int
}

// NewRecorder returns a recorder of the writes to objects in scope.
func NewRecorder(s Scope) *Recorder { return &Recorder{scope: s} }

// Wrap returns a copy of cfg whose transport records every write request
// (create, update, patch, delete, subresources included) to an object of
// a model kind in scope as an op of actor, with the request and response
// bodies, the status code and the client's send and receive times. Reads
// and dry runs pass through unrecorded. The copy asks for JSON, so that responses can
// be decoded whatever the client's default.
//
// A request whose user agent is the driver's client N
// ("cascade-driver/client-N", set on a copy of the returned configuration)
// is recorded as actor "client-N" instead, so that one wrapped
// configuration serves all of the driver's clients.
func (r *Recorder) Wrap(cfg *rest.Config, actor string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &recordingTransport{r: r, actor: actor, next: next}
	})
	return c
}

// Ops returns the recorded ops ordered by Call, lanes assigned.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	ops := slices.Clone(r.ops)
	r.mu.Unlock()
	return Merge(ops)
}

// Err reports the requests in scope that could not be recorded faithfully
// (an undecodable body, a deletecollection, a create of a subresource such
// as pods/eviction); nil if none. A history with such gaps cannot be
// checked soundly.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

func (r *Recorder) add(op Op, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.ops = append(r.ops, op)
}

type recordingTransport struct {
	r     *Recorder
	actor string
	next  http.RoundTripper
	// onlyUnanswered records only the requests that get no answer,
	// leaving answers undecoded (a Tap: the audit log has the answered)
	onlyUnanswered bool
	// user, when set, names the actor of each request by its user agent
	// as the audit log would for this user (AuditActor), instead of actor
	user string
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	target, ok := parsePath(req.URL.Path)
	var verb Verb
	switch req.Method {
	case http.MethodPost:
		verb = Create
	case http.MethodPut:
		verb = Update
	case http.MethodPatch:
		verb = Patch
	case http.MethodDelete:
		verb = Delete
	default:
		return t.next.RoundTrip(req) // reads
	}
	if !ok {
		return t.next.RoundTrip(req)
	}
	if verb == Create && (target.name != "" || target.subresource != "") {
		// A POST to a subresource (pods/binding, pods/eviction) changes
		// the object in a way a history cannot express.
		if t.r.scope.Contains(target.kind, target.namespace, target.name) {
			t.r.add(Op{}, fmt.Errorf("history: %s %s: a create of a subresource of an object in scope cannot be checked", req.Method, req.URL.Path))
		}
		return t.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	if verb == Delete && target.name == "" {
		// It may remove objects in scope: any of a namespace in scope, or
		// of a cluster-scoped kind (whose names a selector may match).
		inScope := t.r.scope.Contains(target.kind, target.namespace, "")
		if !target.kind.Info().Namespaced {
			inScope = t.r.scope.Contains(target.kind, "", t.r.scope.Prefix+"-")
		}
		if inScope {
			t.r.add(Op{}, fmt.Errorf("history: %s %s: deletecollection of objects in scope cannot be checked", req.Method, req.URL.Path))
		}
		return t.next.RoundTrip(req)
	}
	actor := t.actor
	if a := AuditActor(controlplane.AuditRecord{UserAgent: req.Header.Get("User-Agent")}); strings.HasPrefix(a, "client-") {
		actor = a
	}
	if t.user != "" {
		actor = AuditActor(controlplane.AuditRecord{Username: t.user, UserAgent: req.Header.Get("User-Agent")})
	}
	op := Op{Actor: actor, Verb: verb, Kind: target.kind, Namespace: target.namespace, Name: target.name,
		Subresource: target.subresource}
	if verb == Update || verb == Patch {
		op.Body = body
		op.PatchType = req.Header.Get("Content-Type")
		if verb == Update {
			op.PatchType = ""
		}
	}
	if err := op.sent(body); err != nil {
		t.r.add(op, fmt.Errorf("history: %s %s: request body: %w", req.Method, req.URL.Path, err))
		return t.next.RoundTrip(req)
	}
	if !t.r.scope.Contains(op.Kind, op.Namespace, op.Name) || dryRun(req.URL.RequestURI(), verb, body) {
		return t.next.RoundTrip(req)
	}
	if verb == Delete {
		opts, err := decodeDeleteOptions(body, req.URL.RequestURI())
		if err != nil {
			t.r.add(op, fmt.Errorf("history: %s %s: %w", req.Method, req.URL.Path, err))
			return t.next.RoundTrip(req)
		}
		op.Delete = opts
	}

	id := newAuditID()
	req = req.Clone(req.Context())
	req.Header.Set(AuditIDHeader, id)
	op.Call = time.Now().UnixNano()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		if neverSent(err) {
			// Not a write at all: no server received it.
			t.r.addRefused()
			return resp, err
		}
		// No response: the server may or may not have applied it.
		op.Return = time.Now().UnixNano()
		t.r.addUnanswered(op, id, !t.onlyUnanswered)
		return resp, err
	}
	if t.onlyUnanswered {
		return resp, nil
	}
	respBody, readErr := io.ReadAll(resp.Body)
	resp.Body.Close()
	op.Return = time.Now().UnixNano()
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if readErr != nil {
		t.r.addUnanswered(op, id, true) // the response was cut short: ambiguous (Code 0)
		return resp, readErr
	}
	if err := op.outcome(resp.StatusCode, respBody, nil); err != nil {
		t.r.add(op, fmt.Errorf("history: %s %s -> %d: response body: %w", req.Method, req.URL.Path, resp.StatusCode, err))
		return resp, nil
	}
	t.r.add(op, nil)
	return resp, nil
}

// urlTarget is what a request path names.
type urlTarget struct {
	kind                         model.KindID
	namespace, name, subresource string
}

// parsePath reads an API path the way the API server's RequestInfo
// resolver does (k8s.io/apiserver/pkg/endpoints/request):
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]] or the same under
// /apis/GROUP/VERSION. /api/v1/namespaces/NAME[/status|/finalize] is a
// Namespace. ok is false for paths naming no model kind.
func parsePath(path string) (urlTarget, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group = parts[1]
		parts = parts[3:]
	default:
		return urlTarget{}, false
	}
	var t urlTarget
	if len(parts) >= 2 && parts[0] == "namespaces" {
		t.namespace = parts[1]
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	if len(parts) == 0 {
		return urlTarget{}, false
	}
	k, ok := KindOf(group, parts[0])
	if !ok {
		return urlTarget{}, false
	}
	t.kind = k
	if len(parts) > 1 {
		t.name = parts[1]
	}
	if len(parts) > 2 {
		t.subresource = parts[2]
	}
	if !k.Info().Namespaced {
		// for /api/v1/namespaces/NAME the "namespace" is the name
		t.namespace = ""
	}
	return t, true
}

// neverSent reports whether a round trip failed before its request left:
// the connection to the server could not be opened (connection refused,
// as while kube-apiserver restarts), so no server received the write and
// it had no effect. It is not recorded at all, where a write whose
// connection broke after it was opened is recorded as maybe applied.
// net/http retries a non-idempotent request on a new connection only when
// it wrote nothing on the old one, so a refused dial, even on a retry,
// means the write was never sent.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(op.Err, syscall.ECONNREFUSED)
}
