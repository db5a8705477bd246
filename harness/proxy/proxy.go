// Package proxy is an API proxy between the real, unmodified
// kube-controller-manager and kube-apiserver: every request of the
// controller manager passes through it, so that the harness sees each
// watch event the moment it is handed to an informer and each read and
// write with its answer (the evidence), and can hold, drop or break that
// traffic (the faults, and later stepping).
//
//	kube-controller-manager ──http (loopback, JSON)──▶ proxy ──https, kcm's client cert──▶ kube-apiserver
//	      informers ◀── watch events, one stream each ──┘  │
//	                                      Controller: Admit each request, Deliver each event
//	                                      record: Requests, Deliveries (Evidence)
//
// The controller manager's kubeconfig names the proxy (plain HTTP on
// 127.0.0.1, no credentials); the proxy passes each request on with the
// controller manager's own identity (the envtest user
// system:kube-controller-manager's client certificate) and its User-Agent
// unchanged, so kube-apiserver's audit log attributes each request to the
// controller manager and its client ("generic-garbage-collector",
// "shared-informers", ...) as it would without the proxy.
//
// # JSON, not protobuf
//
// The proxy reads JSON only. It asks for JSON answers by rewriting every
// request's Accept header (dropping the protobuf and CBOR alternatives:
// the metadata client of the garbage collector's GETs and of its
// metadata informers asks for
// "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;...,
// application/json;as=PartialObjectMetadataList;..." whatever the content
// type flag says), and the controller manager runs with
// --kube-api-content-type=application/json (ControllerManagerArgs) so that
// its request bodies are JSON too. Decoding protobuf would need the Go
// types of every resource the controller manager watches, custom
// resources included (which are JSON on the wire anyway); JSON needs
// only the metadata the evidence records, costs nothing measurable at the
// harness's object counts, and keeps a recorded body readable. Both
// encodings carry the same objects: nothing the controllers decide
// depends on it.
//
// # Watches and WatchList
//
// A watch is relayed event by event, never buffered whole: a reader
// decodes kube-apiserver's newline-delimited JSON events into the
// stream's queue as they come, and a writer hands each one to the
// controller manager, and flushes it, once the Controller lets it pass.
// WatchList streams (sendInitialEvents=true, which client-go's reflector
// uses for an informer's initial list when its WatchListClient feature is
// on) are left on: their initial ADDED events and the bookmark that ends
// them (annotation k8s.io/initial-events-end) are events like any other,
// recorded with InitialEventsEnd set, so the evidence shows an informer's
// list as the events it consisted of.
//
// # Stepping
//
// Stepper is the Controller of the stepped upstream target
// (upstream-stepped, harness/target): its Deliver holds each informer's
// stream of events about a trace's objects until the trace says `gc
// deliver KEY` (the stream's queue is the informer's queue of held events,
// in order; the head of one informer's stream is released while the
// others wait), its Admit holds the garbage collector's GETs until `gc
// attemptToDelete KEY` and its PATCH or DELETE until `gc delete|patch
// KEY`, and it observes each answer (Observer) so that a step returns the
// real one. Requests and events the model does not expect are the
// stepped target's divergences (Divergence).
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Options configures New.
type Options struct {
	// Upstream is kube-apiserver and the identity to reach it with:
	// kube-controller-manager's (its host, CA and client certificate).
	Upstream *rest.Config
	// Controller, when set, holds, refuses or breaks traffic (Faults;
	// nil: everything passes at once).
	Controller Controller
	// Wrap, when set, wraps the transport to kube-apiserver (a
	// history.Tap recording the controller manager's writes that get no
	// answer).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Proxy is a running proxy. Close it when done.
type Proxy struct {
	opts     Options
	upstream http.RoundTripper
	host     string // kube-apiserver's scheme://host
	srv      *http.Server
	lis      net.Listener
	rec      record
	ids      atomic.Int64
	// held counts requests waiting in Admit and events queued on a
	// stream and not yet handed on or dropped
	held    atomic.Int64
	closed  chan struct{}
	serving sync.WaitGroup
	// others are the servers of Listen's further listeners
	mu     sync.Mutex
	others []*http.Server
}

// WorkloadsProcess is the process name (Request.Process) of the second
// kube-controller-manager of upstream-stepped, which runs the workload
// controllers (harness/target: SteppedWorkloadControllers) and talks to
// the proxy through a listener of its own (Listen).
const WorkloadsProcess = "workloads"

// New starts a proxy on a free port of 127.0.0.1 forwarding to
// opts.Upstream.
func New(opts Options) (*Proxy, error) {
	if opts.Upstream == nil {
		return nil, errors.New("proxy: no upstream configuration")
	}
	cfg := rest.CopyConfig(opts.Upstream)
	// the controller manager's own limits apply; the proxy adds none
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, -1, nil
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: transport to %s: %w", cfg.Host, err)
	}
	if opts.Wrap != nil {
		rt = opts.Wrap(rt)
	}
	host := strings.TrimRight(cfg.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	p := &Proxy{opts: opts, upstream: rt, host: host, lis: lis, closed: make(chan struct{})}
	p.srv = p.serve(lis, p)
	return p, nil
}

func (p *Proxy) serve(lis net.Listener, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		_ = srv.Serve(lis)
	}()
	return srv
}

// Listen starts serving a further kube-controller-manager process on a
// free port of 127.0.0.1 and returns the URL its kubeconfig names. Its
// requests and watch streams are the proxy's like the first process's,
// with the same upstream identity, and carry Request.Process = process,
// so that a Controller can hold one process's events and not the
// other's, and the evidence tells them apart (its informers are named
// "process:client/resource").
func (p *Proxy) Listen(process string) (string, error) {
	if process == "" {
		return "", errors.New("proxy: a further listener needs a process name")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("proxy: listen: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.others = append(p.others, p.serve(lis, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p.serveProcess(w, req, process)
	})))
	return "http://" + lis.Addr().String(), nil
}

// URL is the address kube-controller-manager's kubeconfig names.
func (p *Proxy) URL() string { return "http://" + p.lis.Addr().String() }

// Evidence returns a copy of everything recorded so far.
func (p *Proxy) Evidence() Evidence { return p.rec.snapshot(false) }

// Take returns everything recorded since the last Take (or the start) and
// forgets it: one run's evidence at a time.
func (p *Proxy) Take() Evidence { return p.rec.snapshot(true) }

// Idle reports whether the proxy holds nothing: no request waits to be
// passed on, no watch event to be handed on, and the Controller (when it
// implements Pending) has nothing pending.
func (p *Proxy) Idle() bool {
	if p.held.Load() > 0 {
		return false
	}
	if pc, ok := p.opts.Controller.(Pending); ok {
		return pc.Pending() == 0
	}
	return true
}

// Close stops serving and ends every stream; requests in flight fail.
func (p *Proxy) Close() error {
	select {
	case <-p.closed:
		return nil
	default:
	}
	close(p.closed)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.mu.Lock()
	srvs := append([]*http.Server{p.srv}, p.others...)
	p.mu.Unlock()
	var errs []error
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, srv.Close())
		}
	}
	p.serving.Wait()
	return errors.Join(errs...)
}

// ServeHTTP passes one request of kube-controller-manager on.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p.serveProcess(w, req, "")
}

func (p *Proxy) serveProcess(w http.ResponseWriter, req *http.Request, process string) {
	ua := req.Header.Get("User-Agent")
	r := &Request{ID: p.ids.Add(1), Client: clientName(ua), UserAgent: ua, Process: process, Call: parseCall(req), Received: time.Now()}
	if r.Verb == VerbPatch {
		r.RemovedOwners = readPatch(req)
	}
	if c := p.opts.Controller; c != nil {
		p.held.Add(1)
		err := c.Admit(req.Context(), r)
		p.held.Add(-1)
		if err != nil {
			r.Err, r.Answered = "held back: "+err.Error(), time.Now()
			p.done(r)
			http.Error(w, "cascade proxy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	out, err := p.outgoing(req)
	if err != nil {
		r.Err, r.Answered = err.Error(), time.Now()
		p.done(r)
		http.Error(w, "cascade proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	r.Sent = time.Now()
	resp, err := p.upstream.RoundTrip(out)
	if err != nil {
		r.Err, r.Answered = err.Error(), time.Now()
		p.done(r)
		http.Error(w, "cascade proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	r.Code = resp.StatusCode
	if r.Verb == VerbWatch && resp.StatusCode == http.StatusOK {
		p.relay(w, req.Context(), r, resp)
		return
	}
	p.answer(w, r, resp)
}

// done records a request that is not a watch as answered and tells a
// Controller that observes answers (Observer).
func (p *Proxy) done(r *Request) {
	p.rec.request(*r)
	if o, ok := p.opts.Controller.(Observer); ok {
		o.Answered(*r)
	}
}

// hopHeaders are the headers a proxy does not pass on (RFC 9110 7.6.1),
// and Accept-Encoding: the transport to kube-apiserver asks for gzip
// itself and hands the proxy the body decompressed.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Accept-Encoding", "Authorization"}

// outgoing is req as the proxy sends it to kube-apiserver: the same
// method, path, query, headers (User-Agent included) and body, with JSON
// asked for (jsonAccept) and the hop-by-hop headers left out.
func (p *Proxy) outgoing(req *http.Request) (*http.Request, error) {
	out, err := http.NewRequestWithContext(req.Context(), req.Method, p.host+req.URL.RequestURI(), req.Body)
	if err != nil {
		return nil, err
	}
	out.ContentLength = req.ContentLength
	if req.ContentLength == 0 {
		out.Body = nil
	}
	out.Header = req.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Set("Accept", jsonAccept(req.Header.Get("Accept")))
	return out, nil
}

// jsonAccept is an Accept header without its protobuf and CBOR media
// types, so that kube-apiserver answers in JSON: what is left of accept,
// or application/json when nothing is.
func jsonAccept(accept string) string {
	var keep []string
	for _, t := range strings.Split(accept, ",") {
		t = strings.TrimSpace(t)
		mt, _, _ := strings.Cut(t, ";")
		if mt == "" || strings.Contains(mt, "protobuf") || strings.Contains(mt, "cbor") {
			continue
		}
		keep = append(keep, t)
	}
	if len(keep) == 0 {
		return "application/json"
	}
	return strings.Join(keep, ", ")
}

// copyHeaders copies an answer's headers, less the hop-by-hop ones and
// the length (the proxy may write the body in pieces).
func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, h := range append(hopHeaders, "Content-Length", "Content-Encoding") {
		dst.Del(h)
	}
}
