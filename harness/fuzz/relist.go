package fuzz

import (
	"github.com/cascade-k8s/cascade/harness/history"
)

// staleNodes are the owners, by real UID, that the GC's graph keeps
// although they left storage, because a relist of their resource found
// their name held by a new object and handed it on as an update from the
// old one, with no delete (model.KnownRelistUIDChange, kubernetes#133565).
// Only evidence puts an owner here: impl's recorded graph changes, or an
// audit log showing the name deleted and created again while the GC's
// watch of its resource was broken. The liveness check reads them as the
// model's graph (model.State.KeepStaleNode), never as a bare window.
type staleNodes map[string]bool

// staleFromGraph reads impl's recorded graph changes (in the order the
// graph builder applied them): an update whose informer's previous
// version was another object's replaced that object, whose node then
// stays unless a later change removed it.
func staleFromGraph(changes []history.GraphChange) staleNodes {
	var out staleNodes
	for _, c := range changes {
		switch {
		case c.Replaced != "":
			if out == nil {
				out = staleNodes{}
			}
			out[c.Replaced] = true
		case c.Deleted && out[c.UID]:
			delete(out, c.UID)
		}
	}
	return out
}
