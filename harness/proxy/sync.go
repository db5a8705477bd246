package proxy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// gcDiscovery reports whether r is a discovery request of the garbage
// collector's (its Sync's GetDeletableResources, every 30 s): while a
// Stepper holds, they wait for a Sync.
func gcDiscovery(r *Request) bool {
	return r.Client == GarbageCollectorClient && r.Verb == VerbOther
}

// firstList handles, with s.mu held, an event of the initial list of an
// informer that Relist did not break (a monitor the GC's discovery sync
// started: its initial events end before the sync does, and client-go
// hands them to the handler together once they have): it passes, and the
// next step naming its object finds it there (listedBefore).
func (s *Stepper) firstList(stream *Request, ev *Delivery) bool {
	key := informerKey(stream)
	if !ev.Initial || s.relisting[key] {
		return false
	}
	s.pre[key] = append(s.pre[key], ev.Namespace+"/"+ev.Name)
	s.handedOn(stream, ev)
	s.broadcast()
	return true
}

// listedBefore takes the release of an event of namespace/name by a
// process's informer of resource when that informer's first list
// already handed it on (firstList): the graph builder got the list's
// objects at once, in the order of client-go's map (not the model's key
// order), so any of them may come first. An event of another object
// while the list's are not all named is a *Divergence.
func (s *Stepper) listedBefore(process, group, resource, namespace, name string) (bool, error) {
	key := informerKey(&Request{Process: process, Call: Call{Group: group, Resource: resource}})
	s.mu.Lock()
	defer s.mu.Unlock()
	pre := s.pre[key]
	if len(pre) == 0 {
		return false, nil
	}
	i := slices.Index(pre, namespace+"/"+name)
	if i < 0 {
		return false, &Divergence{
			Expected: "an event of " + objectKey(Call{Group: group, Resource: resource}, namespace, name),
			Observed: "the informer's first list handed on " + strings.Join(pre, ", ") + " first"}
	}
	s.pre[key] = slices.Delete(pre, i, i+1)
	return true, nil
}

// Sync lets the garbage collector's discovery sync run: its held
// discovery requests pass, and so do those it sends until the monitors
// of starts (each a Call naming group and resource) have listed, at most
// bound (the sync runs on a 30 s timer, so its next discovery request
// may be that far off). The lists' events pass (firstList). No list
// within bound is a *Divergence; a GC worker waiting on a held request
// holds the sync's workerLock, and the sync starts no monitor until it
// is let go.
func (s *Stepper) Sync(ctx context.Context, bound time.Duration, starts []Call) error {
	s.mu.Lock()
	before := map[string]int64{}
	for _, c := range starts {
		k := informerKey(&Request{Call: c})
		before[k] = s.listed[k]
	}
	s.syncing = true
	s.reqs = slices.DeleteFunc(s.reqs, func(h *heldRequest) bool {
		if gcDiscovery(&h.r) {
			close(h.release)
			return true
		}
		return false
	})
	s.broadcast()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.syncing = false
		s.mu.Unlock()
	}()
	if len(starts) == 0 {
		// the model's sync starts no monitor: let one discovery pass
		// happen, if it comes soon, and its answer land
		time.Sleep(DiscoveryPause)
		return nil
	}
	ok, err := s.await(ctx, bound, func() bool {
		for k, id := range before {
			if s.listed[k] == id {
				return false
			}
		}
		return true
	})
	if err != nil || ok {
		return err
	}
	var names []string
	for _, c := range starts {
		names = append(names, objectKey(c, "", ""))
	}
	return &Divergence{Expected: fmt.Sprintf("the GC's discovery sync to start monitors of %s and list them", strings.Join(names, ", ")),
		Observed: "no list within " + bound.String() + heldSummary(s.HeldRequests())}
}

// AwaitDiscovery waits, at most bound, for a discovery request of the
// garbage collector sent after it was called (its next Sync, on a 30 s
// timer), then DiscoveryPause for that sync to start and stop monitors
// as the resources served now say; it reports whether one came. Call it
// while not holding, so the request passes.
func (s *Stepper) AwaitDiscovery(ctx context.Context, bound time.Duration) (bool, error) {
	start := time.Now()
	ok, err := s.await(ctx, bound, func() bool { return s.discovered.After(start) })
	if ok && err == nil {
		time.Sleep(DiscoveryPause)
	}
	return ok, err
}

// DiscoveryPause is how long a Sync that starts no monitor lets the
// garbage collector's discovery requests pass.
const DiscoveryPause = 400 * time.Millisecond
