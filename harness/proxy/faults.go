package proxy

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Faults are the faults the proxy puts on the real kube-controller-manager,
// the same as impl's GC has of its own (impl/gc Options): the harness's
// --informer-lag, --informer-relist and --write-delay on target upstream.
type Faults struct {
	// Lag holds each watch event a random time up to it before handing it
	// on, each stream's in order (a later event waits for the one before
	// it): one informer's view lags behind another's, the lookup and
	// adoption races' precondition.
	Lag time.Duration
	// Relist, now and then, ends an informer's watch stream with a 410
	// Expired error, so that client-go's reflector lists again, and holds
	// that list a random time up to it: the informer then sees only each
	// object's state at the list, and an object created and deleted in
	// between not at all (the model's `gc coalesce`). An informer breaks
	// at most once per RelistCooldown, see there.
	Relist time.Duration
	// WriteDelay holds each write of the garbage collector (user agent
	// client GarbageCollectorClient) a random time up to it before
	// passing it on: a client write lands between the GC's GET and its
	// DELETE or PATCH.
	WriteDelay time.Duration
	// Seed seeds the random times (a run's seed fixes the draws; the
	// interleaving of the controller manager's goroutines stays its own).
	Seed uint64
}

// Any reports whether any fault is on.
func (f Faults) Any() bool { return f.Lag > 0 || f.Relist > 0 || f.WriteDelay > 0 }

// RelistCooldown is the least time between two breaks of one informer's
// watch. client-go's reflector waits before each list after the first
// with an exponential back-off (tools/cache/reflector.go:
// defaultBackoffInit 0.8 s doubling up to 30 s, jittered up to twice)
// that resets only after 2 minutes without a wait
// (defaultBackoffReset): breaking an informer more often would let its
// waits climb to a minute, in which the controller manager sees nothing
// of the resource. Once per reset interval keeps every relist's wait
// under 1.6 s, as one break of a healthy informer has.
const RelistCooldown = 2*time.Minute + 5*time.Second

// relistChance is the chance (one in) that an event of an informer that
// may break breaks its watch, as impl's gapChance.
const relistChance = 4

// FaultController is the Controller that puts Faults on the traffic.
type FaultController struct {
	f   Faults
	mu  sync.Mutex
	rnd *rand.Rand
	// informers with the relist fault's state, by Call.Informer
	informers map[string]*relistState
}

type relistState struct {
	lastBreak time.Time
	gapEnd    time.Time
	awaiting  bool // broken, its relist not yet passed on
}

// NewFaults returns the Controller of f.
func NewFaults(f Faults) *FaultController {
	return &FaultController{f: f, rnd: rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15)), informers: map[string]*relistState{}}
}

// draw is a random duration in [0, max].
func (c *FaultController) draw(max time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.rnd.Int64N(int64(max) + 1))
}

// Admit holds the garbage collector's writes (WriteDelay) and an
// informer's relist until its gap ends (Relist).
func (c *FaultController) Admit(ctx context.Context, r *Request) error {
	var until time.Time
	if c.f.WriteDelay > 0 && r.Client == GarbageCollectorClient && r.Write() {
		until = r.Received.Add(c.draw(c.f.WriteDelay))
	}
	if c.f.Relist > 0 && r.Relist() {
		c.mu.Lock()
		if s := c.informers[r.Informer(r.Client)]; s != nil && s.awaiting {
			until, s.awaiting = s.gapEnd, false
		}
		c.mu.Unlock()
	}
	return sleepUntil(ctx, until)
}

// Deliver lags each event (Lag) and now and then breaks a stream
// (Relist). Only the events of a stream that is past its initial state
// may break it: a WatchList stream's initial events, up to the bookmark
// that ends them, are the informer's list, which is not broken before
// it has synced.
func (c *FaultController) Deliver(ctx context.Context, stream *Request, ev *Delivery) (Verdict, error) {
	if c.f.Relist > 0 && !ev.Initial && (ev.Type == "ADDED" || ev.Type == "MODIFIED" || ev.Type == "DELETED") {
		now := time.Now()
		c.mu.Lock()
		s := c.informers[ev.Informer]
		if s == nil {
			s = &relistState{}
			c.informers[ev.Informer] = s
		}
		brk := !s.awaiting && now.After(s.gapEnd) && (s.lastBreak.IsZero() || now.Sub(s.lastBreak) > RelistCooldown) &&
			c.rnd.IntN(relistChance) == 0
		if brk {
			s.lastBreak, s.awaiting = now, true
			s.gapEnd = now.Add(time.Duration(c.rnd.Int64N(int64(c.f.Relist) + 1)))
		}
		c.mu.Unlock()
		if brk {
			return Break, nil
		}
	}
	if c.f.Lag > 0 {
		if err := sleepUntil(ctx, ev.Received.Add(c.draw(c.f.Lag))); err != nil {
			return Pass, err
		}
	}
	return Pass, nil
}

// Ended implements Controller.
func (c *FaultController) Ended(*Request) {}

// Pending counts the informers whose watch the relist fault broke and
// which have not listed again yet.
func (c *FaultController) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.informers {
		if s.awaiting {
			n++
		}
	}
	return n
}

// sleepUntil waits until t (at once when t is past or zero) or ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if t.IsZero() || d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
