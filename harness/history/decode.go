package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/cascade-k8s/cascade/model"
)

// wireObject is the part of an API object's JSON the history keeps.
type wireObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		Labels            map[string]string `json:"labels"`
		Finalizers        []string          `json:"finalizers"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
		DeletionGrace     *int64            `json:"deletionGracePeriodSeconds"`
		OwnerReferences   []struct {
			APIVersion         string `json:"apiVersion"`
			Kind               string `json:"kind"`
			Name               string `json:"name"`
			UID                string `json:"uid"`
			Controller         *bool  `json:"controller"`
			BlockOwnerDeletion *bool  `json:"blockOwnerDeletion"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
	Spec struct {
		Replicas   json.RawMessage `json:"replicas"`
		Finalizers []string        `json:"finalizers"` // a Namespace's
	} `json:"spec"`
	// Status fields, when the body is a metav1.Status.
	Status  json.RawMessage `json:"status"`
	Reason  string          `json:"reason"`
	Message string          `json:"message"`
	Details *struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"details"`
}

// decodeObject reads an object of kind k from its JSON. A missing
// resourceVersion is 0; one that is not an unsigned integer is an error.
// Replicas is spec.replicas for workload kinds, else -1.
func decodeObject(k model.KindID, raw []byte) (*Object, error) {
	var w wireObject
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode %s: %w", k.Info().Kind, err)
	}
	return fromWire(k, &w)
}

func fromWire(k model.KindID, w *wireObject) (*Object, error) {
	m := &w.Metadata
	o := &Object{Kind: k, Namespace: m.Namespace, Name: m.Name, UID: m.UID,
		Finalizers: m.Finalizers, Deleting: m.DeletionTimestamp != nil, Replicas: -1}
	if !k.Info().Namespaced {
		o.Namespace = ""
	}
	rv, err := parseRV(m.ResourceVersion)
	if err != nil {
		return nil, err
	}
	o.RV = rv
	if len(m.Labels) > 0 {
		o.Labels = m.Labels
	}
	for _, r := range m.OwnerReferences {
		o.Owners = append(o.Owners, Ref{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID,
			Controller: r.Controller != nil && *r.Controller, Block: r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion,
			ControllerUnset: r.Controller == nil, BlockUnset: r.BlockOwnerDeletion == nil})
	}
	if k.Info().Workload && len(w.Spec.Replicas) > 0 && string(w.Spec.Replicas) != "null" {
		n, err := strconv.Atoi(string(w.Spec.Replicas))
		if err != nil {
			return nil, fmt.Errorf("spec.replicas %s: not an integer", w.Spec.Replicas)
		}
		o.Replicas = n
	}
	return o, nil
}

// parseRV reads a resourceVersion: kube-apiserver's are etcd revisions,
// unsigned integers. "" is 0 (none sent).
func parseRV(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q is not an unsigned integer", s)
	}
	return rv, nil
}

// isJSONObject reports whether raw is a JSON object (not an array, as a
// JSON patch is, nor YAML, as an apply patch may be).
func isJSONObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// response is what a write's response body says.
type response struct {
	obj *Object // the object returned, nil for a Status
	// pending says obj keeps it in storage whatever its finalizers: a
	// grace period is left (deletionGracePeriodSeconds > 0), or it is a
	// Namespace with spec.finalizers.
	pending bool
	// specless: obj is a Namespace answered without its spec (a metadata
	// client's PartialObjectMetadata, as both garbage collectors use),
	// which says nothing of spec.finalizers; pending is then false and
	// the caller decides it (namespaceSpecs).
	specless bool
	status   bool   // the body is a metav1.Status
	uid      string // Status details.uid (an immediate DELETE names the removed object)
	reason   string
	message  string
}

// decodeResponse reads a response body: an object of kind k or a
// metav1.Status.
func decodeResponse(k model.KindID, raw []byte) (response, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return response{}, nil
	}
	var w wireObject
	if err := json.Unmarshal(raw, &w); err != nil {
		return response{}, fmt.Errorf("decode response: %w", err)
	}
	if w.Kind == "Status" {
		r := response{status: true, reason: w.Reason, message: w.Message}
		if w.Details != nil {
			r.uid = w.Details.UID
		}
		return r, nil
	}
	o, err := fromWire(k, &w)
	if err != nil {
		return response{}, err
	}
	m := &w.Metadata
	pending := m.DeletionGrace != nil && *m.DeletionGrace > 0 || k.Info().Kind == "Namespace" && len(w.Spec.Finalizers) > 0
	specless := k.Info().Kind == "Namespace" && w.Kind == "PartialObjectMetadata"
	return response{obj: o, pending: pending, specless: specless}, nil
}

// namespaceSpecs follows, through a history's answers in order, which
// Namespaces (by UID) have had their spec.finalizers emptied. The API
// server gives every Namespace spec.finalizers ["kubernetes"] on create
// (the Namespace strategy's PrepareForCreate) and empties them only
// through the namespaces/finalize subresource, the namespace
// controller's call, whose answer shows the whole Namespace; so a
// Namespace answered without its spec is still held by spec.finalizers
// unless an earlier answer showed them empty. The nil namespaceSpecs
// knows of no emptying.
type namespaceSpecs map[string]bool

// resolve fills resp.pending for a Namespace answered without its spec,
// and notes what an answer with its spec shows.
func (ns namespaceSpecs) resolve(k model.KindID, resp *response) {
	if resp.obj == nil || k.Info().Kind != "Namespace" {
		return
	}
	uid := resp.obj.UID
	switch {
	case resp.specless:
		resp.pending = !ns[uid]
	case ns != nil && uid != "":
		ns[uid] = !resp.pending
	}
}

// wireDeleteOptions is metav1.DeleteOptions as JSON.
type wireDeleteOptions struct {
	PropagationPolicy *string `json:"propagationPolicy"`
	OrphanDependents  *bool   `json:"orphanDependents"`
	Preconditions     *struct {
		UID             *string `json:"uid"`
		ResourceVersion *string `json:"resourceVersion"`
	} `json:"preconditions"`
}

// dryRun reports a dry-run request (dryRun=All in the query, or in a
// DELETE's options): the server answers as if it wrote, and writes
// nothing, so a history leaves it out.
func dryRun(requestURI string, verb Verb, body []byte) bool {
	if u, err := url.ParseRequestURI(requestURI); err == nil && len(u.Query()["dryRun"]) > 0 {
		return true
	}
	if verb != Delete || !isJSONObject(body) {
		return false
	}
	var w struct {
		DryRun []string `json:"dryRun"`
	}
	return json.Unmarshal(body, &w) == nil && len(w.DryRun) > 0
}

// decodeDeleteOptions reads a DELETE's options from its body and from the
// query of its URI, where propagationPolicy and orphanDependents may be
// given instead (the body wins when both are).
func decodeDeleteOptions(body []byte, requestURI string) (*DeleteOptions, error) {
	opts := &DeleteOptions{}
	if u, err := url.ParseRequestURI(requestURI); err == nil {
		q := u.Query()
		opts.Propagation = q.Get("propagationPolicy")
		if v := q.Get("orphanDependents"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("orphanDependents=%q in the query is not a boolean", v)
			}
			opts.Orphan = &b
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return opts, nil
	}
	var w wireDeleteOptions
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decode DeleteOptions: %w", err)
	}
	if w.PropagationPolicy != nil {
		opts.Propagation = *w.PropagationPolicy
	}
	if w.OrphanDependents != nil {
		opts.Orphan = w.OrphanDependents
	}
	if p := w.Preconditions; p != nil {
		if p.UID != nil {
			opts.PreconditionUID = *p.UID
		}
		if p.ResourceVersion != nil {
			opts.PreconditionRV = *p.ResourceVersion
		}
	}
	return opts, nil
}

// outcome fills an op's response fields (Code, Reason, Message, Got,
// Removed) from the status code and response body, using what the API
// server was found to answer (kube-apiserver v1.36, pinned by
// TestDeleteResponses, TestPVDeleteAndFinalizerRaces and
// TestRemovalAnswers):
//
//   - a DELETE that removes the object at once answers 200 with a
//     metav1.Status naming its UID, except for kinds whose registry
//     returns the deleted object (ReturnDeletedObject: Pods,
//     PersistentVolumes), which answer the object as last stored, at the
//     deletion's resourceVersion: without deletionTimestamp, or with it,
//     no grace period left and only finalizers the DELETE's options drop
//     (an unscheduled Pod's delete sets deletionTimestamp with grace 0,
//     then removes it; a Background DELETE of an object being deleted
//     with orphan removes it without writing the finalizer change
//     first, store.go's errDeleteNow). The object as last stored may
//     carry a finalizer added after the DELETE read it
//     (kubernetes#77988): it is removed all the same. (When another
//     DELETE also set deletionTimestamp in between, the answer reads as
//     one that kept the object, but at a resourceVersion newer than a
//     no-op DELETE's; harness/lin tells the two apart on the state);
//   - a DELETE that only sets deletionTimestamp (finalizers remain)
//     answers 200, or 202 when the deprecated orphanDependents=false was
//     sent, with the object as stored; a repeated DELETE that changes
//     nothing answers the same with the resourceVersion unchanged;
//   - an update or patch that removes the last finalizer of an object
//     being deleted answers 200 with the object as the request left it:
//     deletionTimestamp set, no finalizers, the resourceVersion it had.
//     Such an answer means removal exactly when ShouldDeleteDuringUpdate
//     holds: deletionGracePeriodSeconds is unset or 0 (a Pod waiting out
//     a grace period stays) and, for a Namespace, spec.finalizers is
//     empty too. A metadata client's answer (PartialObjectMetadata) has
//     no spec: a Namespace's spec.finalizers are then as ns last saw
//     them (TestNamespaceKeptBySpecFinalizers).
//
// ns follows the Namespaces' spec.finalizers through the history, for
// answers that do not show them (namespaceSpecs; nil: none emptied).
func (op *Op) outcome(code int, body []byte, ns namespaceSpecs) error {
	op.Code = code
	if !op.OK() && !isJSONObject(body) {
		// A refusal from outside the resource's handler: the API
		// server's mux answers a path it does not serve (a custom
		// resource whose CRD is not yet, or no longer, served) with
		// "404 page not found" in plain text, not a metav1.Status.
		op.Message = string(bytes.TrimSpace(body))
		return nil
	}
	resp, err := decodeResponse(op.Kind, body)
	if err != nil {
		return err
	}
	if op.OK() {
		ns.resolve(op.Kind, &resp)
	}
	op.Reason, op.Message = resp.reason, resp.message
	if !op.OK() {
		return nil
	}
	switch {
	case op.Verb == Delete && resp.status:
		op.Removed = true
		op.Got = &Object{Kind: op.Kind, Namespace: op.Namespace, Name: op.Name, UID: resp.uid, Replicas: -1}
	case resp.obj != nil:
		op.Got = resp.obj
		if op.Name == "" {
			op.Name = resp.obj.Name
		}
		o := resp.obj
		switch op.Verb {
		case Update, Patch:
			op.Removed = op.Subresource == "" && o.Deleting && len(o.Finalizers) == 0 && !resp.pending
		case Delete:
			// Kinds whose registry returns the deleted object answer the
			// object even when it left storage, as it was last stored:
			// it is gone unless the DELETE left it being deleted, that is
			// unless finalizers remain once the DELETE's options had
			// their say, or a grace period.
			op.Removed = !o.Deleting || !resp.pending && len(DeletionFinalizers(o, op.Delete)) == 0
		}
	}
	return nil
}

// sent decodes a request body into Sent: the object a create or update
// sent, or the metadata of a JSON merge or strategic merge patch (whose
// uid and resourceVersion act as preconditions). Other bodies (JSON
// patches, apply YAML) leave Sent nil.
func (op *Op) sent(body []byte) error {
	switch op.Verb {
	case Create, Update, Patch:
	default:
		return nil
	}
	if !isJSONObject(body) {
		return nil
	}
	o, err := decodeObject(op.Kind, body)
	if err != nil {
		return err
	}
	op.Sent = o
	if op.Name == "" {
		op.Name = o.Name
	}
	return nil
}
