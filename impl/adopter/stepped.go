package adopter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl/step"
)

// Stepper is the stepped scheduler of a Controller in step.Stepped mode:
// informer events are held per resource (herds, pods) and the
// controller's cache changes only when Deliver takes one; adoptions happen
// only on Adopt. The model's steps (model/step.go, applyController):
//
//	controller deliver KEY         Deliver
//	controller coalesce KEY        Coalesce
//	controller adopt KEY by=OWNER  Adopt
//
// A step that cannot be taken returns an error wrapping
// step.ErrNotEnabled and changes nothing.
type Stepper struct {
	c      *Controller
	stepMu sync.Mutex

	mu       sync.Mutex
	arrivals step.Arrivals
	queues   map[string][]held // by kind: "Herd", "Pod"
	// the controller's cache: what Deliver has handed it
	herds map[types.UID]*unstructured.Unstructured
	pods  map[types.UID]metav1.Object
}

type held struct {
	typ string // add, update, delete
	obj metav1.Object
}

func newStepper(c *Controller) *Stepper {
	return &Stepper{c: c, arrivals: step.NewArrivals(), queues: map[string][]held{},
		herds: map[types.UID]*unstructured.Unstructured{}, pods: map[types.UID]metav1.Object{}}
}

func kindOf(isHerd bool) string {
	if isHerd {
		return "Herd"
	}
	return "Pod"
}

func (s *Stepper) hold(isHerd bool, typ string, o metav1.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := kindOf(isHerd)
	s.queues[k] = append(s.queues[k], held{typ, o})
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

// Pending lists the held events, herds first, each oldest first.
func (s *Stepper) Pending() []PendingEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PendingEvent
	for _, k := range []string{"Herd", "Pod"} {
		for _, h := range s.queues[k] {
			out = append(out, PendingEvent{Type: h.typ, Key: keyOf(k, h.obj)})
		}
	}
	return out
}

func keyOf(kind string, o metav1.Object) step.Key {
	return step.Key{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()}
}

// head waits for an event of k's kind and checks that the oldest is about k.
func (s *Stepper) head(ctx context.Context, k step.Key) (held, error) {
	if k.Kind != "Herd" && k.Kind != "Pod" {
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
	uid := h.obj.GetUID()
	switch {
	case kind == "Herd" && h.typ == "delete":
		delete(s.herds, uid)
	case kind == "Herd":
		s.herds[uid] = h.obj.(*unstructured.Unstructured)
	case h.typ == "delete":
		delete(s.pods, uid)
	default:
		s.pods[uid] = h.obj
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
			_, inHerds := s.herds[h.obj.GetUID()]
			_, inPods := s.pods[h.obj.GetUID()]
			ok = !inHerds && !inPods
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

// Adoption is one adoption the controller's cache allows.
type Adoption struct {
	Owner, Dependent step.Key
}

// Adoptions lists what the controller would adopt from its cache, sorted.
func (s *Stepper) Adoptions() []Adoption {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Adoption
	for _, h := range s.herds {
		for _, p := range s.pods {
			if adoptable(h, p) {
				out = append(out, Adoption{Owner: keyOf("Herd", h), Dependent: keyOf("Pod", p)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Owner.String()+out[i].Dependent.String() < out[j].Owner.String()+out[j].Dependent.String()
	})
	return out
}

// Adopt is `controller adopt KEY by=OWNER`: adopt the Pod dep by the Herd
// owner, which the cache must allow. err reports a step that cannot be
// taken; writeErr is the outcome of the step: the live re-check's refusal
// (404 gone, 409 being deleted) or the patch's error, nil on success.
func (s *Stepper) Adopt(ctx context.Context, dep, owner step.Key) (writeErr, err error) {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	herd, pod := s.find(dep, owner)
	if herd == nil {
		return nil, step.NotEnabled("controller would not adopt %s by %s", dep, owner)
	}
	return s.c.adopt(ctx, herd, pod, recheckOnce(func() error { return s.c.recheck(ctx, herd) })), nil
}

func (s *Stepper) find(dep, owner step.Key) (*unstructured.Unstructured, metav1.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.herds {
		if !owner.Matches("Herd", h.GetNamespace(), h.GetName(), h.GetUID()) {
			continue
		}
		for _, p := range s.pods {
			if dep.Matches("Pod", p.GetNamespace(), p.GetName(), p.GetUID()) && adoptable(h, p) {
				return h, p
			}
		}
	}
	return nil, nil
}

// Settle delivers every held event and runs every adoption the cache
// allows, until a round changes nothing and no event arrives for a short
// while (the counterpart of a trace's `settle` for the controller).
func (s *Stepper) Settle(ctx context.Context) error {
	for round := 0; round < 500; round++ {
		s.stepMu.Lock()
		n := 0
		for _, k := range []string{"Herd", "Pod"} {
			for {
				s.mu.Lock()
				empty := len(s.queues[k]) == 0
				s.mu.Unlock()
				if empty {
					break
				}
				s.take(k, true)
				n++
			}
		}
		s.stepMu.Unlock()
		adopted := 0
		for _, a := range s.Adoptions() {
			if werr, err := s.Adopt(ctx, a.Dependent, a.Owner); err == nil && werr == nil {
				adopted++
			}
		}
		if n > 0 || adopted > 0 {
			continue
		}
		s.mu.Lock()
		wait, closed := s.arrivals.Wait(), s.arrivals.Closed()
		s.mu.Unlock()
		if closed {
			return errors.New("adopter: stopped")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		case <-time.After(300 * time.Millisecond):
			return nil
		}
	}
	return fmt.Errorf("adopter: did not settle")
}
