package fuzz

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/harness/controlplane"
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

// union is both sets of stale owners.
func (s staleNodes) union(t staleNodes) staleNodes {
	if len(t) == 0 {
		return s
	}
	out := staleNodes{}
	for _, x := range []staleNodes{s, t} {
		for u := range x {
			out[u] = true
		}
	}
	return out
}

// staleFromGraph reads impl's recorded graph changes (in the order the
// graph builder applied them): an update whose informer's previous
// version was another object's replaced that object, whose node then
// stays unless a later change removed it or the GC restarted (a reset).
func staleFromGraph(changes []history.GraphChange) staleNodes {
	var out staleNodes
	for _, c := range changes {
		switch {
		case c.Reset:
			out = nil // a restarted GC's graph holds none of them
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

// staleFromAudit reads an audit log: an API server restart that began at
// one of breaks broke every watch of the GC's informers, and each
// relisted its resource later, at the first list, or watch asking for
// the initial events, of the GC's informer of that resource (informerOf)
// received after it. An object whose name a client deleted and created
// again with a new UID, both received after the break and before its
// resource's relist, is one the relist found listed with the new UID:
// client-go hands it on as an update from the old object, never a
// delete, and the old UID stays in the GC's graph. A break with no relist
// recorded after it, or a watch that resumed without one, is no
// evidence.
func staleFromAudit(recs []controlplane.AuditRecord, breaks []time.Time) staleNodes {
	var out staleNodes
	for _, b := range breaks {
		relist := map[string]time.Time{} // by group/resource: the relist
		resumed := map[string]bool{}     // a watch resumed before any relist
		for _, rec := range recs {
			gr := rec.APIGroup + "/" + rec.Resource
			if !informerOf(rec) || rec.Name != "" || !rec.RequestReceived.After(b) || resumed[gr] {
				continue
			}
			if _, done := relist[gr]; done {
				continue
			}
			switch {
			case rec.Verb == "list", rec.Verb == "watch" && strings.Contains(rec.RequestURI, "sendInitialEvents=true"):
				relist[gr] = rec.RequestReceived
			case rec.Verb == "watch":
				resumed[gr] = true
			}
		}
		// per name: the UIDs its creates returned, and its deletes, in
		// the gap
		type name struct{ gr, ns, name string }
		lastUID := map[name]string{} // the UID the name last took
		deleted := map[name]string{} // the UID a delete in the gap removed
		for _, rec := range recs {
			if rec.Stage != controlplane.StageResponseComplete || rec.Name == "" && rec.Verb != "create" {
				continue
			}
			gr := rec.APIGroup + "/" + rec.Resource
			at := rec.RequestReceived
			l, relisted := relist[gr]
			inGap := relisted && at.After(b) && at.Before(l)
			switch {
			case rec.Verb == "create" && rec.Subresource == "" && rec.Code == 201:
				uid, n := createdUID(rec)
				if uid == "" {
					continue
				}
				k := name{gr, rec.Namespace, n}
				if old, ok := deleted[k]; ok && inGap && old != uid {
					if out == nil {
						out = staleNodes{}
					}
					out[old] = true
				}
				delete(deleted, k)
				lastUID[k] = uid
			case rec.Verb == "delete" && rec.Subresource == "" && rec.Code == 200:
				k := name{gr, rec.Namespace, rec.Name}
				if old, ok := lastUID[k]; ok && inGap {
					deleted[k] = old
				}
			}
		}
	}
	return out
}

// informerOf reports whether an audited request is one of the GC's
// informers': impl's GC, or kube-controller-manager's shared informers,
// which its GC watches through (ObjectOrMetadataInformerFactory).
func informerOf(rec controlplane.AuditRecord) bool {
	if history.AuditActor(rec) == history.ActorGC {
		return true
	}
	c := rec.ControllerClient()
	return c == "shared-informers" || c == "metadata-informers"
}

// createdUID is the UID and name of the object a create's audited
// response holds, "" when it holds none.
func createdUID(rec controlplane.AuditRecord) (uid, name string) {
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(rec.ResponseObject, &obj) != nil {
		return "", ""
	}
	return obj.Metadata.UID, obj.Metadata.Name
}
