package proxy

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// informerKey names an informer of a process: its resource's stream,
// whichever watch carries it now.
func informerKey(stream *Request) string {
	return fmt.Sprintf("%s|%s/%s", stream.Process, stream.Group, stream.Resource)
}

// shapeKey names one object as one informer holds it.
func shapeKey(stream *Request, ev *Delivery) string {
	return informerKey(stream) + "|" + ev.Namespace + "/" + ev.Name
}

// handedOn records the Shape of an event handed to its informer (called
// with s.mu held): what that informer's store now holds of the object.
func (s *Stepper) handedOn(stream *Request, ev *Delivery) {
	if ev.Type == "DELETED" {
		delete(s.shapes, shapeKey(stream, ev))
		return
	}
	s.shapes[shapeKey(stream, ev)] = ev.Shape
}

// Relist ends the watch of an informer (the garbage collector's, process
// "", or the workload controllers', WorkloadsProcess) of resource (and
// group) at its held head event, which must be about namespace/name, as
// kube-apiserver ends a watch whose resourceVersion it compacted: the
// head event and every event behind it on that watch are never handed
// on, and the informer gets a 410 Expired error event, so that its
// reflector lists again (a WatchList: a watch with sendInitialEvents).
// Relist waits, at most bound, for that list: until the new watch's
// initial events have ended, or one of them is held. The list's events
// pass unheld for objects the informer holds as they are (Shape); the
// others are held like any event, and client-go's store hands them on as
// updates from what it held (RealFIFO.Replace): the model's relist
// (`gc coalesce`, `controller coalesce`). A different object's event at
// the head, no event held, or no new list within bound is a *Divergence.
func (s *Stepper) Relist(ctx context.Context, bound time.Duration, process, group, resource, namespace, name string) error {
	h, err := s.head(ctx, bound, process, group, resource, namespace, name, " to skip by a relist")
	if err != nil {
		return err
	}
	key, old := informerKey(h.stream), h.stream.ID
	s.mu.Lock()
	s.events = slices.DeleteFunc(s.events, func(x *heldEvent) bool { return x == h })
	h.verdict = Break
	s.relisting[key] = true
	close(h.release)
	s.broadcast()
	s.mu.Unlock()
	ok, err := s.await(ctx, bound, func() bool {
		if s.listed[key] > old {
			return true
		}
		return slices.ContainsFunc(s.events, func(e *heldEvent) bool { return informerKey(e.stream) == key && e.stream.ID > old })
	})
	if err != nil {
		return err
	}
	if !ok {
		return &Divergence{Expected: fmt.Sprintf("the informer of %s to list again after its watch ended (410 Expired)", objectKey(Call{Group: group, Resource: resource}, "", "")), Observed: "no new list within " + bound.String()}
	}
	return nil
}
