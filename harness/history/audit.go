package history

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/model"
)

// User agents of cascade's own components, as FromAudit recognises them.
const (
	// DriverUserAgentPrefix starts the user agent of the driver's client
	// N, "cascade-driver/client-N" (driver.UserAgent).
	DriverUserAgentPrefix = "cascade-driver/client-"
	// ImplGCUserAgent and ImplAdopterUserAgent are the user agents impl's
	// garbage collector and adopting controller send; the older names
	// ImplGCUserAgentLegacy and ImplAdopterUserAgentLegacy (impl/gc.UserAgent
	// and impl/adopter.UserAgent as they stand) are recognised too.
	ImplGCUserAgent            = "cascade-impl/garbage-collector"
	ImplAdopterUserAgent       = "cascade-impl/adopter"
	ImplGCUserAgentLegacy      = "cascade-gc"
	ImplAdopterUserAgentLegacy = "cascade-adopter"
)

// AuditActor names the actor of an audit record (see Op.Actor):
//
//   - "client-N" for user agent "cascade-driver/client-N";
//   - "gc" for upstream's garbage collector (IsGarbageCollector) and for
//     impl's (user agent ImplGCUserAgent);
//   - "controller/NAME" for other kube-controller-manager clients;
//   - "controller/adopter" for impl's adopter;
//   - "other/USERNAME" for anything else.
func AuditActor(rec controlplane.AuditRecord) string {
	ua := rec.UserAgent
	if rest, ok := strings.CutPrefix(ua, DriverUserAgentPrefix); ok {
		digits := rest
		if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			digits = rest[:i]
		}
		if n, err := strconv.Atoi(digits); err == nil {
			return ClientActor(n)
		}
	}
	switch {
	case rec.IsGarbageCollector(), uaIs(ua, ImplGCUserAgent), uaIs(ua, ImplGCUserAgentLegacy):
		return ActorGC
	case rec.ControllerClient() != "":
		return "controller/" + rec.ControllerClient()
	case uaIs(ua, ImplAdopterUserAgent), uaIs(ua, ImplAdopterUserAgentLegacy):
		return ActorAdopter
	}
	return "other/" + rec.Username
}

// uaIs reports whether user agent ua is name, possibly followed by a
// version or platform ("name/v1 (linux/amd64)" or "name (…)").
func uaIs(ua, name string) bool {
	rest, ok := strings.CutPrefix(ua, name)
	return ok && (rest == "" || rest[0] == '/' || rest[0] == ' ')
}

// auditWriteVerbs are the audit verbs a history keeps.
var auditWriteVerbs = map[string]Verb{"create": Create, "update": Update, "patch": Patch, "delete": Delete}

// FromAudit builds the history of one run from the API server's audit
// records (controlplane.ControlPlane.AuditRecords): every write (create,
// update, patch, delete, subresources included; dry runs left out) of an
// object of a model kind in scope that completed (stage ResponseComplete) or made the server
// panic (stage Panic, a maybe-applied op), in record order, with lanes
// assigned (AssignLanes). CRD requests are setup and left out.
//
// Call is RequestReceived and Return the record's StageTimestamp: the
// server applied the write at some instant between the two.
//
// An error names the record: an unparseable body or resourceVersion, a
// write in scope recorded without its bodies (the audit policy must log
// the resource at level RequestResponse), a deletecollection or a create
// of a subresource (pods/binding, pods/eviction) in scope, which a history
// cannot express, or the deletion of the CRD of a custom
// kind in scope, whose custom resources apiextensions then removes
// through storage without an audit record.
func FromAudit(records []controlplane.AuditRecord, s Scope) ([]Op, error) {
	var ops []Op
	crdDeleted := map[string]int{} // CRD name -> the record deleting it
	specs := namespaceSpecs{}
	for i, rec := range records {
		if rec.Stage != controlplane.StageResponseComplete && rec.Stage != controlplane.StagePanic {
			continue
		}
		if rec.Resource == "customresourcedefinitions" && rec.Verb == "delete" && rec.Code/100 == 2 {
			crdDeleted[rec.Name] = i
		}
		k, served := KindOf(rec.APIGroup, rec.Resource)
		// A create's record may lack the name (generateName): a
		// cluster-scoped one is judged on the name the server chose.
		unnamed := rec.Name == "" && rec.Verb == "create" && !k.Info().Namespaced
		if !served || (!unnamed && !s.Contains(k, rec.Namespace, rec.Name)) {
			continue
		}
		if rec.Verb == "deletecollection" {
			return nil, fmt.Errorf("history: audit record %d (%s): deletecollection of objects in scope cannot be checked", i, rec)
		}
		verb, write := auditWriteVerbs[rec.Verb]
		if !write {
			continue
		}
		if dryRun(rec.RequestURI, verb, rec.RequestObject) {
			continue
		}
		if verb == Create && rec.Subresource != "" {
			return nil, fmt.Errorf("history: audit record %d (%s): a create of subresource %s (a binding or an eviction) changes an object in scope in a way a history cannot express",
				i, rec, rec.Subresource)
		}
		op, err := auditOp(rec, k, verb, specs)
		if err != nil {
			return nil, fmt.Errorf("history: audit record %d (%s): %w", i, rec, err)
		}
		if s.Contains(k, op.Namespace, op.Name) {
			ops = append(ops, op)
		}
	}
	// apiextensions removes a deleted CRD's custom resources through
	// storage, unaudited: the history would miss those removals.
	for i := range ops {
		if info := ops[i].Kind.Info(); info.Custom {
			if r, deleted := crdDeleted[info.CRDName]; deleted {
				return nil, fmt.Errorf("history: audit record %d (%s) deletes the CRD of %s, which removes its custom resources unaudited; a history with %s in scope cannot span it",
					r, records[r], info.Resource, info.Resource)
			}
		}
	}
	AssignLanes(ops)
	return ops, nil
}

func auditOp(rec controlplane.AuditRecord, k model.KindID, verb Verb, specs namespaceSpecs) (Op, error) {
	op := Op{
		Actor: AuditActor(rec), Verb: verb, Kind: k, Namespace: rec.Namespace, Name: rec.Name,
		Subresource: rec.Subresource,
		Call:        rec.RequestReceived.UnixNano(), Return: rec.StageTimestamp.UnixNano(),
	}
	if !k.Info().Namespaced {
		op.Namespace = ""
	}
	if rec.Level != "RequestResponse" {
		return op, fmt.Errorf("recorded at level %s, without request and response bodies (the audit policy must log %s at level RequestResponse)",
			rec.Level, rec.Resource)
	}
	switch verb {
	case Delete:
		opts, err := decodeDeleteOptions(rec.RequestObject, rec.RequestURI)
		if err != nil {
			return op, err
		}
		op.Delete = opts
	case Update, Patch:
		op.Body = append([]byte(nil), rec.RequestObject...)
		op.PatchType = patchTypeOf(verb, rec.RequestObject)
	}
	if err := op.sent(rec.RequestObject); err != nil {
		return op, fmt.Errorf("request body: %w", err)
	}
	code := rec.Code
	if rec.Stage == controlplane.StagePanic && code == 0 {
		code = 500 // the server failed mid-request: maybe applied
	}
	if err := op.outcome(code, rec.ResponseObject, specs); err != nil {
		return op, fmt.Errorf("response body: %w", err)
	}
	return op, nil
}

// patchTypeOf guesses a patch's content type from its body, which the
// audit log records without one: a JSON array is a JSON patch, an object
// with strategic-merge directives a strategic merge patch, any other
// object a merge patch (or a strategic merge patch without directives,
// which reads the same), anything else an apply patch.
func patchTypeOf(verb Verb, body []byte) string {
	if verb != Patch {
		return ""
	}
	b := strings.TrimSpace(string(body))
	switch {
	case strings.HasPrefix(b, "["):
		return "application/json-patch+json"
	case strings.HasPrefix(b, "{") && (strings.Contains(b, `"$patch"`) || strings.Contains(b, `"$setElementOrder`) ||
		strings.Contains(b, `"$retainKeys"`) || strings.Contains(b, `"$deleteFromPrimitiveList`)):
		return "application/strategic-merge-patch+json"
	case strings.HasPrefix(b, "{"):
		return "application/merge-patch+json"
	}
	return "application/apply-patch+yaml"
}
