package gc

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
// sends any writes still held. A round that delivered no event and made
// no successful write ends the loop once no event arrives for
// SettleQuiet; items left queued then are retried forever without
// effect (an owner of an unserved kind, a delete deletion protection
// refuses). It is the counterpart of a trace's `settle`, and what a test
// runs before its first step to absorb the initial list.
func (s *Stepper) Settle(ctx context.Context) error {
	for round := 0; round < MaxSettleRounds; round++ {
		before := s.gc.writesOK.Load()
		delivered, err := s.settleRound(ctx)
		if err != nil {
			return err
		}
		if delivered > 0 || s.gc.writesOK.Load() != before {
			continue
		}
		s.mu.Lock()
		wait := s.arrived
		s.mu.Unlock()
		if n, _ := s.counts(); n > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		case <-time.After(SettleQuiet):
			if n, _ := s.counts(); n == 0 {
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
		writes, out := s.gc.attemptToDeleteItem(ctx, id.UID)
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
