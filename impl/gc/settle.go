package gc

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-k8s/cascade/impl/step"
)

// MaxSettleRounds bounds Settle.
const MaxSettleRounds = 500

// SettleQuiet is how long Settle waits for a further informer event before
// it calls the GC settled.
const SettleQuiet = 300 * time.Millisecond

// Settle runs the held work with a fixed schedule until nothing changes:
// each round delivers every held informer event (resources in name order,
// each FIFO), then every virtual delete event, runs every attemptToOrphan
// item, then every attemptToDelete item with its writes sent at once, and
// sends any writes still held. Once the rounds catch up (CatchUp) it
// returns when no event arrives for SettleQuiet; items left queued then
// are retried forever without effect (an owner of an unserved kind, a
// delete deletion protection refuses, writes that succeed and change
// nothing). It is the counterpart of a trace's `settle`, and what a test
// runs before its first step to absorb the initial list.
func (s *Stepper) Settle(ctx context.Context) error {
	for range MaxSettleRounds {
		// taken before the rounds: an event held while they run ends
		// the wait at once
		wait := s.Arrived()
		progressed, loop, err := s.CatchUp(ctx)
		if err != nil {
			return err
		}
		// events still held after a loop of retries are the loop's own
		// (a virtual delete event it enqueues again every round)
		if progressed || (s.Held() > 0 && loop == nil) {
			continue
		}
		if loop != nil {
			wait = loop
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		case <-time.After(SettleQuiet):
			if s.Held() == 0 || loop != nil {
				return nil
			}
		}
	}
	return fmt.Errorf("gc: did not settle within %d rounds: %s", MaxSettleRounds, s)
}

func (s *Stepper) settleRound(ctx context.Context) (delivered int, err error) {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	var rs []schema.GroupVersionResource
	for r, q := range s.pending {
		if len(q) > 0 {
			rs = append(rs, r)
		}
	}
	s.mu.Unlock()
	sort.Slice(rs, func(i, j int) bool { return rs[i].String() < rs[j].String() })
	for _, r := range rs {
		for {
			s.mu.Lock()
			n := len(s.pending[r])
			s.mu.Unlock()
			if n == 0 {
				break
			}
			_, old, e := s.pop(r, true)
			ev := *e
			ev.old = old
			s.gc.processGraphChanges(ctx, &ev)
			delivered++
		}
	}
	for {
		s.mu.Lock()
		if len(s.virtual) == 0 {
			s.mu.Unlock()
			break
		}
		ev := s.virtual[0]
		s.virtual = s.virtual[1:]
		s.mu.Unlock()
		s.gc.processGraphChanges(ctx, ev)
		delivered++
	}
	for _, id := range s.attemptToOrphan.list() {
		s.attemptToOrphan.remove(id.UID)
		s.gc.finishOrphan(id, s.gc.attemptToOrphanItem(ctx, id.UID))
	}
	s.mu.Lock()
	held := s.inflight
	s.inflight = nil
	s.mu.Unlock()
	for _, f := range held {
		s.sendAll(ctx, f.uid, f.writes)
	}
	for _, id := range s.attemptToDelete.list() {
		if s.inFlightFor(id.UID) != nil {
			continue
		}
		s.attemptToDelete.remove(id.UID)
		writes, out := s.gc.attemptToDeleteItem(ctx, id)
		if len(writes) > 0 {
			s.sendAll(ctx, id.UID, writes)
			continue
		}
		s.gc.finish(id.UID, out)
	}
	return delivered, nil
}

// sendAll sends an item's writes in order, as an Auto worker does.
func (s *Stepper) sendAll(ctx context.Context, uid types.UID, writes []write) {
	out := done
	for _, w := range writes {
		var next bool
		if out, next = s.gc.sent(ctx, w, s.gc.send(ctx, w)); !next {
			break
		}
	}
	s.gc.finish(uid, out)
}

// PendingEvent is one held informer event, described.
type PendingEvent struct {
	Type            EventType
	Key             step.Key
	ResourceVersion string
	Deleting        bool
	Finalizers      []string
	Owners          []metav1.OwnerReference
}

// ResourceEvents are the held events of one resource, oldest first.
type ResourceEvents struct {
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
	Events   []PendingEvent
}

// Pending lists the held informer events per resource (resources with
// none are left out), sorted by resource.
func (s *Stepper) Pending() []ResourceEvents {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ResourceEvents
	for r, q := range s.pending {
		if len(q) == 0 {
			continue
		}
		re := ResourceEvents{Resource: r, Kind: q[0].gvk}
		for _, ev := range q {
			re.Events = append(re.Events, describe(ev))
		}
		out = append(out, re)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource.String() < out[j].Resource.String() })
	return out
}

func describe(ev *event) PendingEvent {
	o := ev.obj
	return PendingEvent{Type: ev.typ, Key: step.Key{Kind: ev.gvk.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID},
		ResourceVersion: o.ResourceVersion, Deleting: beingDeleted(o), Finalizers: o.Finalizers, Owners: o.OwnerReferences}
}

// PendingVirtual lists the held virtual delete events, oldest first.
func (s *Stepper) PendingVirtual() []Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Identity, 0, len(s.virtual))
	for _, ev := range s.virtual {
		out = append(out, ev.identity())
	}
	return out
}

// HeldWrite is a decided GC write not yet sent.
type HeldWrite struct {
	Item Identity
	Verb Verb
	// Next: this is the item's next write (Send sends only that one).
	Next bool
	// Policy is the delete's propagationPolicy ("" for none).
	Policy string
	// ResourceVersion is the delete's resourceVersion precondition.
	ResourceVersion string
	// Remove lists the ownerReference UIDs a patch drops.
	Remove []types.UID
}

// Queues is a snapshot of the work queues.
type Queues struct {
	AttemptToDelete []Identity
	AttemptToOrphan []Identity
	Held            []HeldWrite
}

// Queues lists the attemptToDelete and attemptToOrphan items (each under
// the identity it was queued with) and the held writes.
func (s *Stepper) Queues() Queues {
	q := Queues{AttemptToDelete: s.attemptToDelete.list(), AttemptToOrphan: s.attemptToOrphan.list()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.inflight {
		for i, w := range f.writes {
			h := HeldWrite{Item: w.item, Verb: w.verb, Next: i == 0, ResourceVersion: w.rv, Remove: w.remove}
			if w.policy != nil {
				h.Policy = string(*w.policy)
			}
			q.Held = append(q.Held, h)
		}
	}
	return q
}

// String renders a short summary, for test failure messages.
func (s *Stepper) String() string {
	q := s.Queues()
	return fmt.Sprintf("pending=%v virtual=%v attemptToDelete=%v attemptToOrphan=%v held=%v",
		s.Pending(), s.PendingVirtual(), q.AttemptToDelete, q.AttemptToOrphan, q.Held)
}
