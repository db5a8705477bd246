package proxy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Stepper is the Controller of the stepped upstream target
// (upstream-stepped): while it holds, no watch event about an object in
// its scope reaches either kube-controller-manager process (the GC's, and
// the workload controllers', WorkloadsProcess), and no read or write of
// the garbage collector (GCHeld) or of a workload controller
// (ControllerHeld) about such an object, and no discovery request of the
// GC (Sync), reaches kube-apiserver until a step releases it. Traffic
// about other objects (other runs, system objects, the GC's own Events),
// every request of other clients, and events that change nothing the
// model has (Delivery.Shape) pass at once, so the controller managers'
// informers stay synced.
//
// Each informer stream's events stay in order: the event a step can
// release is the head of an informer's stream (the model's watch queues
// are per kind, and so are kube-controller-manager's informers). Held GC
// requests wait each in its own worker goroutine of the GC, so a step can
// release any of them: with several GC workers (--concurrent-gc-syncs)
// every queued work item waits in a worker on its first GET, and the
// trace, not the work queue's order, decides which goes first.
type Stepper struct {
	mu      sync.Mutex
	holding bool
	scope   func(namespace, name string) bool
	events  []*heldEvent   // heads of streams, held, oldest first
	reqs    []*heldRequest // GC requests, held, oldest first
	open    *Window
	answers map[int64]Request
	// shapes are the Shape of each object's last event handed to each
	// informer (shapeKey)
	shapes map[string]string
	// listed is, per informer (informerKey), the ID of the last stream
	// whose initial events ended (a WatchList's bookmark handed on)
	listed map[string]int64
	// pre are, per informer, the objects of its first list's events,
	// handed on with the list while holding and not yet named by a
	// step (Sync)
	pre map[string][]string
	// relisting are the informers Relist broke and that have not listed
	// again yet
	relisting map[string]bool
	// arrived is told of every GC request in scope the Stepper receives
	// while holding, in order (SetArrivals)
	arrived func(Request)
	// syncing lets the GC's discovery requests pass (Sync)
	syncing bool
	// discovered is when the GC last sent a discovery request
	discovered time.Time
	changed    chan struct{} // closed and replaced on every change
}

type heldEvent struct {
	stream  *Request
	ev      Delivery
	release chan struct{}
	verdict Verdict // what Deliver answers once released
}

type heldRequest struct {
	r       Request
	release chan struct{}
}

// Window says which GC requests in scope pass while a step runs: those
// that arrive while it is open and that Admits accepts (nil: none).
type Window struct {
	Admits func(Request) bool
	// Admitted are the requests it let through, in order.
	Admitted []Request
}

// NewStepper returns a Stepper that lets everything through until Hold.
func NewStepper() *Stepper {
	return &Stepper{answers: map[int64]Request{}, shapes: map[string]string{}, listed: map[string]int64{}, pre: map[string][]string{}, relisting: map[string]bool{}, changed: make(chan struct{})}
}

// GCHeld reports whether a request is one a holding Stepper holds when
// its object is in scope: a GET or write of the garbage collector, other
// than of Events (which the GC's event recorder writes with the GC's
// client, and which no trace steps).
func GCHeld(r *Request) bool {
	if r.Client != GarbageCollectorClient || r.Resource == "events" {
		return false
	}
	switch r.Verb {
	case VerbGet, VerbUpdate, VerbPatch, VerbDelete:
		return true
	}
	return false
}

// ControllerHeld reports whether a request is one a holding Stepper
// holds when its object is in scope: a GET, CREATE, PATCH or DELETE of a
// workload controller of the second kube-controller-manager
// (WorkloadsProcess), other than of Events: its recheck GET of an owner
// before adopting (RecheckDeletionTimestamp), its adoption and release
// PATCHes, and the Pods a ReplicaSet controller would create or delete.
// Its informers' LISTs and WATCHes pass, and so do its UPDATEs: the
// workload controllers update only what the model does not have (status,
// the Deployment controller's revision annotations), and an UPDATE held
// would hold every later sync of its object (a work queue never syncs
// one key twice at once). Their watch events pass unheld too (Shape).
func ControllerHeld(r *Request) bool {
	if r.Process != WorkloadsProcess || r.Resource == "events" {
		return false
	}
	switch r.Verb {
	case VerbGet, VerbCreate, VerbPatch, VerbDelete:
		return true
	}
	return false
}

func held(r *Request) bool { return GCHeld(r) || ControllerHeld(r) }

func (s *Stepper) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// SetScope sets which objects' traffic is held: f(namespace, name)
// reports whether an object belongs to the run ("" namespace: a
// cluster-scoped object).
func (s *Stepper) SetScope(f func(namespace, name string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scope = f
}

// Hold starts or stops holding. Stopping releases everything held.
func (s *Stepper) Hold(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding = on
	if !on {
		for _, e := range s.events {
			s.handedOn(e.stream, &e.ev)
			close(e.release)
		}
		for _, r := range s.reqs {
			close(r.release)
		}
		s.events, s.reqs, s.open = nil, nil, nil
		clear(s.pre)
	}
	s.broadcast()
}

// SetArrivals has f told of every GC request (GCHeld) about an object
// in scope that arrives while the Stepper holds, in the order they
// arrive, before any window or hold takes it; f runs under the
// Stepper's lock and must not call it.
func (s *Stepper) SetArrivals(f func(Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrived = f
}

func (s *Stepper) inScope(ns, name string) bool {
	return s.scope != nil && s.scope(ns, name)
}

// Admit implements Controller.
func (s *Stepper) Admit(ctx context.Context, r *Request) error {
	discovery := gcDiscovery(r)
	if !held(r) && !discovery {
		return nil
	}
	s.mu.Lock()
	if discovery {
		s.discovered = time.Now()
		s.broadcast()
	}
	if !s.holding || (discovery && s.syncing) || (!discovery && !s.inScope(r.Namespace, r.Name)) {
		s.mu.Unlock()
		return nil
	}
	if s.arrived != nil && GCHeld(r) {
		s.arrived(*r)
	}
	// a window is a GC step's: it admits none of the controllers' requests
	if s.open != nil && s.open.Admits != nil && GCHeld(r) && s.open.Admits(*r) {
		s.open.Admitted = append(s.open.Admitted, *r)
		s.broadcast()
		s.mu.Unlock()
		return nil
	}
	h := &heldRequest{r: *r, release: make(chan struct{})}
	s.reqs = append(s.reqs, h)
	s.broadcast()
	s.mu.Unlock()
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.reqs = slices.DeleteFunc(s.reqs, func(x *heldRequest) bool { return x == h })
		s.broadcast()
		s.mu.Unlock()
		return ctx.Err()
	}
}

// Deliver implements Controller.
func (s *Stepper) Deliver(ctx context.Context, stream *Request, ev *Delivery) (Verdict, error) {
	if ev.Type == "BOOKMARK" || ev.Type == "ERROR" || stream.Resource == "events" {
		if ev.InitialEventsEnd {
			s.mu.Lock()
			s.listed[informerKey(stream)] = stream.ID
			delete(s.relisting, informerKey(stream))
			s.broadcast()
			s.mu.Unlock()
		}
		return Pass, nil
	}
	s.mu.Lock()
	// an event that changes nothing the model has of its object (a
	// workload controller's status update's MODIFIED; a relist's ADDED
	// of an object the informer holds as it is) is no event of the
	// model's: it passes. A CRD's status writes (apiextensions' naming
	// and establishing controllers) are the model's events.
	unchanged := (ev.Type == "MODIFIED" || ev.Initial && ev.Type == "ADDED") && ev.Shape != "" &&
		stream.Group != "apiextensions.k8s.io" && s.shapes[shapeKey(stream, ev)] == ev.Shape
	if !s.holding || unchanged || !s.inScope(ev.Namespace, ev.Name) {
		s.handedOn(stream, ev)
		s.mu.Unlock()
		return Pass, nil
	}
	if s.firstList(stream, ev) {
		s.mu.Unlock()
		return Pass, nil
	}
	h := &heldEvent{stream: stream, ev: *ev, release: make(chan struct{})}
	s.events = append(s.events, h)
	s.broadcast()
	s.mu.Unlock()
	select {
	case <-h.release:
		return h.verdict, nil
	case <-ctx.Done():
		s.mu.Lock()
		s.events = slices.DeleteFunc(s.events, func(x *heldEvent) bool { return x == h })
		s.broadcast()
		s.mu.Unlock()
		return Pass, ctx.Err()
	}
}

// Ended implements Controller.
func (s *Stepper) Ended(*Request) {}

// Answered implements Observer.
func (s *Stepper) Answered(r Request) {
	if !held(&r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[r.ID] = r
	s.broadcast()
}

// Pending implements Pending: what the Stepper holds.
func (s *Stepper) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events) + len(s.reqs)
}

// await waits, for at most bound, until cond (called with s.mu held)
// holds; it reports whether it did.
func (s *Stepper) await(ctx context.Context, bound time.Duration, cond func() bool) (bool, error) {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-ch:
		}
	}
}

// Divergence is a step the real kube-controller-manager did not take as
// the model did: what the model expected and what the proxy observed.
type Divergence struct {
	Step, Expected, Observed string
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("kube-controller-manager diverges from the model at %q: the model expects %s; observed %s", d.Step, d.Expected, d.Observed)
}

// HeldEvents describes the events held, oldest first.
func (s *Stepper) HeldEvents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		out = append(out, describeEvent(e.stream, e.ev))
	}
	return out
}

// HeldRequests describes the GC requests held, oldest first.
func (s *Stepper) HeldRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.reqs {
		out = append(out, DescribeRequest(r.r))
	}
	return out
}

func describeEvent(stream *Request, ev Delivery) string {
	return fmt.Sprintf("%s %s %s", ev.Informer, ev.Type, objectKey(stream.Call, ev.Namespace, ev.Name))
}

func objectKey(c Call, ns, name string) string {
	res := c.Resource
	if c.Group != "" {
		res += "." + c.Group
	}
	if ns == "" {
		return res + "/" + name
	}
	return res + "/" + ns + "/" + name
}

// DescribeRequest is a request as divergences name it: verb and object.
func DescribeRequest(r Request) string {
	s := strings.ToUpper(r.Verb) + " " + objectKey(r.Call, r.Namespace, r.Name)
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	return s
}

// ReleaseEvent hands on the held head event of the garbage collector's
// informer of resource (and group), which must be about namespace/name,
// waiting at most bound for it to be held; a different object's event at
// the head, or none, is a *Divergence (Step left for the caller to fill).
func (s *Stepper) ReleaseEvent(ctx context.Context, bound time.Duration, group, resource, namespace, name string) error {
	return s.releaseEvent(ctx, bound, "", group, resource, namespace, name)
}

// ReleaseControllerEvent is ReleaseEvent for the informer of the
// workload controllers' kube-controller-manager (WorkloadsProcess).
func (s *Stepper) ReleaseControllerEvent(ctx context.Context, bound time.Duration, group, resource, namespace, name string) error {
	return s.releaseEvent(ctx, bound, WorkloadsProcess, group, resource, namespace, name)
}

func (s *Stepper) releaseEvent(ctx context.Context, bound time.Duration, process, group, resource, namespace, name string) error {
	if listed, err := s.listedBefore(process, group, resource, namespace, name); listed || err != nil {
		return err
	}
	h, err := s.head(ctx, bound, process, group, resource, namespace, name, "")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.events = slices.DeleteFunc(s.events, func(x *heldEvent) bool { return x == h })
	s.handedOn(h.stream, &h.ev)
	close(h.release)
	s.broadcast()
	s.mu.Unlock()
	return nil
}

// head waits at most bound for the held head event of a process's
// informer of resource (and group) and returns it; a different object's
// event at the head, or none, is a *Divergence expecting an event of
// namespace/name (for what: "" or " to skip by a relist").
func (s *Stepper) head(ctx context.Context, bound time.Duration, process, group, resource, namespace, name, what string) (*heldEvent, error) {
	var h *heldEvent
	ok, err := s.await(ctx, bound, func() bool {
		for _, e := range s.events {
			if e.stream.Process == process && e.stream.Resource == resource && e.stream.Group == group {
				h = e
				return true
			}
		}
		return false
	})
	want := fmt.Sprintf("an event of %s%s", objectKey(Call{Group: group, Resource: resource}, namespace, name), what)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &Divergence{Expected: want, Observed: "no event held for that informer within " + bound.String() + heldSummary(s.HeldEvents())}
	}
	if h.ev.Namespace != namespace || h.ev.Name != name {
		return nil, &Divergence{Expected: want + " at the head of its informer", Observed: describeEvent(h.stream, h.ev)}
	}
	return h, nil
}

func heldSummary(held []string) string {
	if len(held) == 0 {
		return " (nothing held)"
	}
	return " (held: " + strings.Join(held, "; ") + ")"
}

// WaitRequest waits at most bound for a held GC request match accepts and
// returns it (ok false: none came).
func (s *Stepper) WaitRequest(ctx context.Context, bound time.Duration, match func(Request) bool) (r Request, ok bool, err error) {
	ok, err = s.await(ctx, bound, func() bool {
		for _, h := range s.reqs {
			if match(h.r) {
				r = h.r
				return true
			}
		}
		return false
	})
	return r, ok, err
}

// HeldIDs are the IDs of the GC requests held now.
func (s *Stepper) HeldIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, h := range s.reqs {
		out = append(out, h.r.ID)
	}
	return out
}

// ReleaseAll passes on every held GC request match accepts, without
// waiting for answers, and returns them.
func (s *Stepper) ReleaseAll(match func(Request) bool) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	s.reqs = slices.DeleteFunc(s.reqs, func(h *heldRequest) bool {
		if !match(h.r) {
			return false
		}
		close(h.release)
		out = append(out, h.r)
		return true
	})
	s.broadcast()
	return out
}

// Release passes the held request id on and waits at most bound for its
// answer.
func (s *Stepper) Release(ctx context.Context, bound time.Duration, id int64) (Request, error) {
	s.mu.Lock()
	i := slices.IndexFunc(s.reqs, func(h *heldRequest) bool { return h.r.ID == id })
	if i < 0 {
		s.mu.Unlock()
		return Request{}, fmt.Errorf("request %d is not held", id)
	}
	close(s.reqs[i].release)
	s.reqs = slices.Delete(s.reqs, i, i+1)
	s.broadcast()
	s.mu.Unlock()
	return s.Answer(ctx, bound, id)
}

// Answer waits at most bound for the answer of request id.
func (s *Stepper) Answer(ctx context.Context, bound time.Duration, id int64) (Request, error) {
	var a Request
	ok, err := s.await(ctx, bound, func() bool {
		var found bool
		a, found = s.answers[id]
		return found
	})
	if err == nil && !ok {
		err = fmt.Errorf("request %d got no answer within %s", id, bound)
	}
	return a, err
}

// Open opens w: GC requests in scope that arrive from now on and that w
// admits pass. Close it with CloseWindow.
func (s *Stepper) Open(w *Window) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = w
}

// CloseWindow closes the open window and returns the requests it let
// through with their answers as far as they came.
func (s *Stepper) CloseWindow() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		return nil
	}
	out := slices.Clone(s.open.Admitted)
	for i, r := range out {
		if a, ok := s.answers[r.ID]; ok {
			out[i] = a
		}
	}
	s.open = nil
	return out
}

// AwaitAdmitted waits at most bound until cond holds of the requests the
// open window let through, each with its answer when it came; it reports
// whether it did.
func (s *Stepper) AwaitAdmitted(ctx context.Context, bound time.Duration, cond func(admitted []Request) bool) (bool, error) {
	return s.await(ctx, bound, func() bool {
		if s.open == nil {
			return false
		}
		rs := slices.Clone(s.open.Admitted)
		for i, r := range rs {
			if a, ok := s.answers[r.ID]; ok {
				rs[i] = a
			}
		}
		return cond(rs)
	})
}

// AwaitAnswer waits at most bound for an answer, given after since, to a
// GC request in scope that match accepts, and returns it.
func (s *Stepper) AwaitAnswer(ctx context.Context, bound time.Duration, since time.Time, match func(Request) bool) (a Request, ok bool, err error) {
	ok, err = s.await(ctx, bound, func() bool {
		for _, r := range s.answers {
			if r.Answered.After(since) && match(r) {
				a = r
				return true
			}
		}
		return false
	})
	return a, ok, err
}

// Quiet waits until no GC request in scope has been admitted by the open
// window or held for window, at most bound; it reports whether it was
// quiet.
func (s *Stepper) Quiet(ctx context.Context, window, bound time.Duration) (bool, error) {
	end := time.Now().Add(bound)
	count := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := len(s.reqs) + len(s.answers)
		if s.open != nil {
			n += len(s.open.Admitted)
		}
		return n
	}
	last, since := count(), time.Now()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
		if n := count(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= window {
			return true, nil
		}
	}
	return false, nil
}
