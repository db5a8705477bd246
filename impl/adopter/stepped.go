package adopter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl/step"
)

// Stepper is the stepped scheduler of a Controller in step.Stepped mode:
// informer events are held per kind (each owner kind and each dependent
// kind the controller watches) and the controller's cache changes only
// when Deliver takes one; adoptions and releases happen only on Adopt and
// Release. The model's steps (model/step.go, applyController):
//
//	controller deliver KEY           Deliver
//	controller coalesce KEY          Coalesce
//	controller adopt KEY by=OWNER    Adopt
//	controller release KEY by=OWNER  Release
//
// A step that cannot be taken returns an error wrapping
// step.ErrNotEnabled and changes nothing.
type Stepper struct {
	c      *Controller
	stepMu sync.Mutex

	mu       sync.Mutex
	arrivals step.Arrivals
	queues   map[string][]held // by API kind name
	// the controller's cache, by kind: what Deliver has handed it
	cache map[string]map[types.UID]*unstructured.Unstructured
}

type held struct {
	typ string // add, update, delete
	obj *unstructured.Unstructured
}

func newStepper(c *Controller) *Stepper {
	s := &Stepper{c: c, arrivals: step.NewArrivals(), queues: map[string][]held{},
		cache: map[string]map[types.UID]*unstructured.Unstructured{}}
	for _, k := range c.kinds {
		s.cache[k.Kind] = map[types.UID]*unstructured.Unstructured{}
	}
	return s
}

func (s *Stepper) hold(kind, typ string, o *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues[kind] = append(s.queues[kind], held{typ, o})
	s.arrivals.Signal()
}

func (s *Stepper) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arrivals.Close()
}

// PendingEvent is one held event.
type PendingEvent struct {
	Type string
	Key  step.Key
}

// Pending lists the held events, kind by kind in the order of step.Kinds,
// each oldest first.
func (s *Stepper) Pending() []PendingEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PendingEvent
	for _, k := range s.c.kinds {
		for _, h := range s.queues[k.Kind] {
			out = append(out, PendingEvent{Type: h.typ, Key: keyOf(k.Kind, h.obj)})
		}
	}
	return out
}

func keyOf(kind string, o *unstructured.Unstructured) step.Key {
	return step.Key{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()}
}

func (s *Stepper) watches(kind string) bool {
	return slices.ContainsFunc(s.c.kinds, func(k step.Kind) bool { return k.Kind == kind })
}

// head waits for an event of k's kind and checks that the oldest is about k.
func (s *Stepper) head(ctx context.Context, k step.Key) (held, error) {
	if !s.watches(k.Kind) {
		return held{}, step.NotEnabled("the controller has no informer for kind %s", k.Kind)
	}
	timer := time.NewTimer(s.c.opts.EventWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.arrivals.Closed() {
			s.mu.Unlock()
			return held{}, errors.New("adopter: stopped")
		}
		if q := s.queues[k.Kind]; len(q) > 0 {
			s.mu.Unlock()
			if !k.Matches(k.Kind, q[0].obj.GetNamespace(), q[0].obj.GetName(), q[0].obj.GetUID()) {
				return held{}, step.NotEnabled("next %s event is for %s, not %s", k.Kind, keyOf(k.Kind, q[0].obj), k)
			}
			return q[0], nil
		}
		wait := s.arrivals.Wait()
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return held{}, ctx.Err()
		case <-timer.C:
			return held{}, step.NotEnabled("no pending %s event for the controller (waited %s)", k.Kind, s.c.opts.EventWait)
		case <-wait:
		}
	}
}

// take pops the head event of kind and, if apply, updates the cache.
func (s *Stepper) take(kind string, apply bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.queues[kind][0]
	s.queues[kind] = s.queues[kind][1:]
	if !apply {
		return
	}
	if h.typ == "delete" {
		delete(s.cache[kind], h.obj.GetUID())
	} else {
		s.cache[kind][h.obj.GetUID()] = h.obj
	}
}

// Deliver is `controller deliver KEY`: the controller's informer hands it
// the next event of KEY's kind, which must be about KEY.
func (s *Stepper) Deliver(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	if _, err := s.head(ctx, k); err != nil {
		return err
	}
	s.take(k.Kind, true)
	return nil
}

// Coalesce is `controller coalesce KEY`: a relist skips the head event,
// superseded by a later one about the same object, or deleting an object
// the cache never had.
func (s *Stepper) Coalesce(ctx context.Context, k step.Key) error {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	h, err := s.head(ctx, k)
	if err != nil {
		return err
	}
	timer := time.NewTimer(s.c.opts.EventWait) // the superseding event may be on its way
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok := false
		for _, later := range s.queues[k.Kind][1:] {
			ok = ok || later.obj.GetUID() == h.obj.GetUID()
		}
		if !ok && h.typ == "delete" {
			_, cached := s.cache[k.Kind][h.obj.GetUID()]
			ok = !cached
		}
		wait := s.arrivals.Wait()
		s.mu.Unlock()
		if ok {
			s.take(k.Kind, false)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return step.NotEnabled("a relist cannot skip the next %s event", k)
		case <-wait:
		}
	}
}

// Claim is one adoption or release the controller's cache allows.
type Claim struct {
	Owner, Dependent step.Key
	// Release: Owner releases Dependent; otherwise Owner adopts it.
	Release bool
}

// String renders the claim as the trace step that takes it.
func (c Claim) String() string {
	verb := "adopt"
	if c.Release {
		verb = "release"
	}
	return fmt.Sprintf("controller %s %s by=%s", verb, c.Dependent, c.Owner)
}

// Claims lists what the controller would do from its cache (the model's
// claims: ClaimObject over every owner and candidate dependent), sorted.
func (s *Stepper) Claims() []Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Claim
	for _, w := range s.c.workloads {
		for _, o := range s.cache[w.owner.Kind] {
			for _, d := range s.cache[w.dep.Kind] {
				if a := w.decide(o, d); a != none {
					out = append(out, Claim{Owner: keyOf(w.owner.Kind, o), Dependent: keyOf(w.dep.Kind, d), Release: a == releaseIt})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Adopt is `controller adopt KEY by=OWNER`: owner adopts dep, which the
// cache must allow. err reports a step that cannot be taken; writeErr is
// the outcome of the step: the live re-check's refusal (404 gone, 409
// being deleted) or the patch's error, nil on success.
func (s *Stepper) Adopt(ctx context.Context, dep, owner step.Key) (writeErr, err error) {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	w, o, d := s.find(dep, owner, adoptIt)
	if o == nil {
		return nil, step.NotEnabled("controller would not adopt %s by %s", dep, owner)
	}
	return s.c.adopt(ctx, w, o, d, recheckOnce(func() error { return s.c.recheck(ctx, w, o) })), nil
}

// Release is `controller release KEY by=OWNER`: owner drops its reference
// from dep, which it controls and whose labels its selector no longer
// matches in the cache, and owner is not being deleted (ClaimObject's
// release branch; ReleasePod, ReleaseReplicaSet). err reports a step that
// cannot be taken; writeErr is the patch's answer as the API server gave
// it (404 when dep is gone, 422 for another incarnation), nil on
// success: upstream's controller ignores those two, which in Stepped mode
// only means it does not retry.
func (s *Stepper) Release(ctx context.Context, dep, owner step.Key) (writeErr, err error) {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	w, o, d := s.find(dep, owner, releaseIt)
	if o == nil {
		return nil, step.NotEnabled("controller would not release %s by %s", dep, owner)
	}
	return s.c.release(ctx, w, o, d), nil
}

func (s *Stepper) find(dep, owner step.Key, want action) (workload, *unstructured.Unstructured, *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.c.workloadOf(owner.Kind)
	if !ok || w.dep.Kind != dep.Kind {
		return workload{}, nil, nil
	}
	for _, o := range s.cache[w.owner.Kind] {
		if !owner.Matches(w.owner.Kind, o.GetNamespace(), o.GetName(), o.GetUID()) {
			continue
		}
		for _, d := range s.cache[w.dep.Kind] {
			if dep.Matches(w.dep.Kind, d.GetNamespace(), d.GetName(), d.GetUID()) && w.decide(o, d) == want {
				return w, o, d
			}
		}
	}
	return workload{}, nil, nil
}

// Settle delivers every held event and takes every claim the cache
// allows, until a round changes nothing and no event arrives for a short
// while (the counterpart of a trace's `settle` for the controller).
func (s *Stepper) Settle(ctx context.Context) error {
	for round := 0; round < 500; round++ {
		// the wait is taken before the rounds: an event held while they
		// run wakes it at once
		wait, closed := s.Arrived()
		if closed {
			return errors.New("adopter: stopped")
		}
		progressed, err := s.CatchUp(ctx)
		if err != nil {
			return err
		}
		if progressed {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		case <-time.After(SettleQuiet):
			return nil
		}
	}
	return fmt.Errorf("adopter: did not settle")
}

// SettleQuiet is how long Settle waits for a further informer event before
// it calls the controller settled.
const SettleQuiet = 300 * time.Millisecond

// Arrived returns a channel closed when the next event is held (or the
// controller stops), and whether it has stopped: Settle's quiet wait, and
// impl.Target.Settle's, which waits for this controller and the GC at
// once.
func (s *Stepper) Arrived() (wait <-chan struct{}, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrivals.Wait(), s.arrivals.Closed()
}

// CatchUp is Settle without its quiet wait: it delivers every held event
// and takes every claim the cache allows until a round changes nothing,
// and reports whether any round did.
func (s *Stepper) CatchUp(ctx context.Context) (progressed bool, err error) {
	for round := 0; round < 500; round++ {
		if err := ctx.Err(); err != nil {
			return progressed, err
		}
		s.stepMu.Lock()
		n := 0
		for _, k := range s.c.kinds {
			for {
				s.mu.Lock()
				empty := len(s.queues[k.Kind]) == 0
				s.mu.Unlock()
				if empty {
					break
				}
				s.take(k.Kind, true)
				n++
			}
		}
		s.stepMu.Unlock()
		claimed := 0
		for _, c := range s.Claims() {
			take := s.Adopt
			if c.Release {
				take = s.Release
			}
			if werr, err := take(ctx, c.Dependent, c.Owner); err == nil && werr == nil {
				claimed++
			}
		}
		if n == 0 && claimed == 0 {
			return progressed, nil
		}
		progressed = true
	}
	return progressed, fmt.Errorf("adopter: did not settle")
}
