package history

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/impl/adopter"
	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/model"
)

func mustKind(t *testing.T, short string) model.KindID {
	t.Helper()
	k, ok := model.KindByShort(short)
	if !ok {
		t.Fatalf("no kind %s", short)
	}
	return k
}

func TestScope(t *testing.T) {
	s := Scope{Prefix: "run1"}
	cases := []struct {
		kind, ns, name string
		in             bool
	}{
		{"cm", "run1-default", "a", true},
		{"cm", "run10-default", "a", false},
		{"cm", "default", "run1-a", false},
		{"ns", "", "run1-default", true},
		{"ns", "", "default", false},
		{"pv", "", "run1-vol", true},
		{"gizmo", "", "vol", false},
		{"crd", "", "run1-herds.cascade.dev", false},
	}
	for _, c := range cases {
		if got := s.Contains(mustKind(t, c.kind), c.ns, c.name); got != c.in {
			t.Errorf("Contains(%s %s/%s) = %v, want %v", c.kind, c.ns, c.name, got, c.in)
		}
	}
	if k, ok := KindOf("apps", "replicasets"); !ok || k.Info().Short != "rs" {
		t.Errorf("KindOf(apps, replicasets) = %v, %v", k, ok)
	}
	if _, ok := KindOf("", "replicasets"); ok {
		t.Error("KindOf matched replicasets in the core group")
	}
}

func TestAuditActor(t *testing.T) {
	kcm := "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0000000/"
	cases := []struct {
		user, ua, want string
	}{
		{"cascade-driver", "cascade-driver/client-3", "client-3"},
		{"cascade-limited", "cascade-driver/client-12 (linux/amd64)", "client-12"},
		{controlplane.ControllerManagerUser, kcm + "generic-garbage-collector", "gc"},
		{controlplane.ControllerManagerUser, kcm + "replicaset-controller", "controller/replicaset-controller"},
		{"admin", ImplGCUserAgent, "gc"},
		{"admin", gc.UserAgent, "gc"},
		{"admin", ImplAdopterUserAgent + "/v0", "controller/adopter"},
		{"admin", adopter.UserAgent, "controller/adopter"},
		{"admin", "cascade-gcx", "other/admin"},
		{"someone", "kubectl/v1.36.3", "other/someone"},
	}
	for _, c := range cases {
		if got := AuditActor(controlplane.AuditRecord{Username: c.user, UserAgent: c.ua}); got != c.want {
			t.Errorf("AuditActor(%q, %q) = %q, want %q", c.user, c.ua, got, c.want)
		}
	}
}

func TestAssignLanes(t *testing.T) {
	ops := []Op{{Actor: "other/x"}, {Actor: "client-10"}, {Actor: "gc"}, {Actor: "controller/b"}, {Actor: "client-2"},
		{Actor: "cluster"}, {Actor: "controller/a"}, {Actor: "client-2"}}
	actors := AssignLanes(ops)
	want := []string{"client-2", "client-10", "gc", "controller/a", "controller/b", "other/x", "cluster"}
	if !slices.Equal(actors, want) {
		t.Fatalf("lanes %v, want %v", actors, want)
	}
	for _, op := range ops {
		if actors[op.ClientID] != op.Actor {
			t.Errorf("op of %s in lane %d (%s)", op.Actor, op.ClientID, actors[op.ClientID])
		}
	}
}

func TestParsePath(t *testing.T) {
	cases := []struct {
		path                string
		kind, ns, name, sub string
		ok                  bool
	}{
		{"/api/v1/namespaces/n1/configmaps", "cm", "n1", "", "", true},
		{"/api/v1/namespaces/n1/configmaps/a", "cm", "n1", "a", "", true},
		{"/api/v1/namespaces/n1/pods/p/status", "pod", "n1", "p", "status", true},
		{"/api/v1/namespaces/n1", "ns", "", "n1", "", true},
		{"/api/v1/namespaces/n1/finalize", "ns", "", "n1", "finalize", true},
		{"/api/v1/namespaces", "ns", "", "", "", true},
		{"/apis/apps/v1/namespaces/n1/replicasets/r/scale", "rs", "n1", "r", "scale", true},
		{"/apis/cascade.dev/v1/gizmos/g", "gizmo", "", "g", "", true},
		{"/api/v1/persistentvolumes/v", "pv", "", "v", "", true},
		{"/apis/coordination.k8s.io/v1/namespaces/n1/leases/l", "", "", "", "", false},
		{"/healthz", "", "", "", "", false},
	}
	for _, c := range cases {
		got, ok := parsePath(c.path)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.path, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if got.kind.Info().Short != c.kind || got.namespace != c.ns || got.name != c.name || got.subresource != c.sub {
			t.Errorf("%s: %s %q %q %q", c.path, got.kind.Info().Short, got.namespace, got.name, got.subresource)
		}
	}
}

// record is a synthetic audit record of a ConfigMap write in namespace
// run1-default.
func record(verb, name, uri string, code int, req, resp string) controlplane.AuditRecord {
	at := time.Unix(1000, 0)
	return controlplane.AuditRecord{Level: "RequestResponse", Stage: controlplane.StageResponseComplete, Verb: verb,
		RequestURI: uri, UserAgent: "cascade-driver/client-0", Username: "cascade-driver", APIVersion: "v1",
		Resource: "configmaps", Namespace: "run1-default", Name: name, Code: code,
		RequestReceived: at, StageTimestamp: at.Add(time.Millisecond),
		RequestObject: json.RawMessage(req), ResponseObject: json.RawMessage(resp)}
}

func TestFromAuditRecords(t *testing.T) {
	s := Scope{Prefix: "run1"}
	created := `{"kind":"ConfigMap","metadata":{"name":"a","namespace":"run1-default","uid":"u1","resourceVersion":"7",` +
		`"finalizers":["x.io/y"],"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u0","blockOwnerDeletion":true}]}}`
	recs := []controlplane.AuditRecord{
		record("create", "a", "/api/v1/namespaces/run1-default/configmaps", 201, `{"metadata":{"name":"a"}}`, created),
		record("get", "a", "/api/v1/namespaces/run1-default/configmaps/a", 200, "", created),
		record("delete", "a", "/api/v1/namespaces/run1-default/configmaps/a?propagationPolicy=Foreground", 200,
			`{"kind":"DeleteOptions","preconditions":{"uid":"u1","resourceVersion":"7"}}`,
			strings.Replace(created, `"resourceVersion":"7",`, `"resourceVersion":"8","deletionTimestamp":"2026-01-01T00:00:00Z",`, 1)),
		record("patch", "a", "/api/v1/namespaces/run1-default/configmaps/a", 200, `{"metadata":{"resourceVersion":"8","finalizers":null}}`,
			`{"kind":"ConfigMap","metadata":{"name":"a","namespace":"run1-default","uid":"u1","resourceVersion":"8","deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":0}}`),
		record("delete", "b", "/api/v1/namespaces/run1-default/configmaps/b", 404, `{}`,
			`{"kind":"Status","status":"Failure","reason":"NotFound","message":"configmaps \"b\" not found","code":404}`),
		record("delete", "c", "/api/v1/namespaces/run1-default/configmaps/c", 200, `{"orphanDependents":true}`,
			`{"kind":"Status","status":"Success","details":{"name":"c","kind":"configmaps","uid":"u3"}}`),
	}
	dry := record("delete", "a", "/api/v1/namespaces/run1-default/configmaps/a", 200, `{"dryRun":["All"]}`,
		`{"kind":"Status","status":"Success","details":{"name":"a","kind":"configmaps","uid":"u1"}}`)
	dryPatch := record("patch", "a", "/api/v1/namespaces/run1-default/configmaps/a?dryRun=All", 200, `{}`, created)
	recs = append(recs, dry, dryPatch)
	other := record("create", "z", "/api/v1/namespaces/other/configmaps", 201, `{}`, created)
	other.Namespace = "other"
	recs = append(recs, other)
	ops, err := FromAudit(recs, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 5 {
		t.Fatalf("want 5 ops (reads, dry runs and other namespaces left out), got %d: %v", len(ops), ops)
	}
	c := ops[0]
	if c.Verb != Create || c.Actor != "client-0" || c.Got.UID != "u1" || c.Got.RV != 7 || !slices.Equal(c.Got.Finalizers, []string{"x.io/y"}) ||
		len(c.Got.Owners) != 1 || !c.Got.Owners[0].Block || c.Got.Owners[0].Controller || c.Call != time.Unix(1000, 0).UnixNano() {
		t.Errorf("create: %+v got %+v", c, c.Got)
	}
	d := ops[1]
	if d.Delete == nil || d.Delete.Propagation != "Foreground" || d.Delete.PreconditionUID != "u1" || d.Delete.PreconditionRV != "7" ||
		d.Removed || !d.Got.Deleting || d.Got.RV != 8 {
		t.Errorf("foreground delete: %+v %+v", d, d.Delete)
	}
	if p := ops[2]; !p.Removed || p.Sent == nil || p.Sent.RV != 8 || p.PatchType != "application/merge-patch+json" {
		t.Errorf("finalizer-removing patch: %+v", p)
	}
	if nf := ops[3]; nf.Code != 404 || nf.Reason != "NotFound" || nf.Got != nil {
		t.Errorf("404: %+v", nf)
	}
	if rm := ops[4]; !rm.Removed || rm.Got == nil || rm.Got.UID != "u3" || rm.Delete.Orphan == nil || !*rm.Delete.Orphan {
		t.Errorf("immediate delete: %+v", rm)
	}

	bad := record("update", "a", "/api/v1/namespaces/run1-default/configmaps/a", 200, `{}`,
		`{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"abc"}}`)
	if _, err := FromAudit([]controlplane.AuditRecord{bad}, s); err == nil || !strings.Contains(err.Error(), `"abc"`) ||
		!strings.Contains(err.Error(), "audit record 0") {
		t.Errorf("want an error naming the record and the resourceVersion, got %v", err)
	}
	herd := record("create", "h", "/apis/cascade.dev/v1/namespaces/run1-default/herds", 201, `{}`,
		`{"kind":"Herd","metadata":{"name":"h","namespace":"run1-default","uid":"u9","resourceVersion":"3"},"spec":{"replicas":2}}`)
	herd.APIGroup, herd.Resource = "cascade.dev", "herds"
	crd := record("delete", "herds.cascade.dev", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/herds.cascade.dev", 200, `{}`, `{}`)
	crd.APIGroup, crd.Resource, crd.Namespace = "apiextensions.k8s.io", "customresourcedefinitions", ""
	if ops, err := FromAudit([]controlplane.AuditRecord{herd}, s); err != nil || len(ops) != 1 || ops[0].Got.Replicas != 2 {
		t.Errorf("herd create: %v %+v", err, ops)
	}
	if _, err := FromAudit([]controlplane.AuditRecord{herd, crd}, s); err == nil || !strings.Contains(err.Error(), "herds") {
		t.Errorf("want an error about the CRD deletion, got %v", err)
	}
	meta := record("delete", "a", "/api/v1/namespaces/run1-default/configmaps/a", 200, "", "")
	meta.Level = "Metadata"
	if _, err := FromAudit([]controlplane.AuditRecord{meta}, s); err == nil || !strings.Contains(err.Error(), "RequestResponse") {
		t.Errorf("want an error about the audit level, got %v", err)
	}
}

// TestDeleteAnswersTheObject: kinds whose registry returns the deleted
// object (PersistentVolumes, Pods) answer a removing DELETE with the
// object as last stored, at the deletion's resourceVersion. It may carry
// deletionTimestamp and finalizers the DELETE's options drop (a
// Background DELETE of an object orphaning, removed without writing the
// change), or a finalizer added after the DELETE read it
// (kubernetes#77988): both are removals. An object the DELETE leaves
// being deleted keeps finalizers whatever the options say, or a grace
// period.
func TestDeleteAnswersTheObject(t *testing.T) {
	s := Scope{Prefix: "run1"}
	pv := func(meta string) string {
		return `{"kind":"PersistentVolume","metadata":{"name":"run1-v","uid":"u1","resourceVersion":"9"` + meta + `}}`
	}
	const deleting = `,"deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":0`
	cases := []struct {
		name, query, body, resp string
		removed                 bool
	}{
		{"bare", "", `{}`, pv(``), true},
		{"finalizer added after the read (kubernetes#77988)", "", `{}`, pv(`,"finalizers":["cascade.dev/hold"]`), true},
		{"orphan dropped by Background", "?propagationPolicy=Background", `{}`, pv(deleting + `,"finalizers":["orphan"]`), true},
		{"orphan dropped by orphanDependents=false", "", `{"orphanDependents":false}`, pv(deleting + `,"finalizers":["orphan"]`), true},
		{"Orphan keeps orphan", "?propagationPolicy=Orphan", `{}`,
			pv(deleting + `,"finalizers":["orphan"]`), false},
		{"orphan kept without options", "", `{}`, pv(deleting + `,"finalizers":["orphan"]`), false},
		{"user finalizer", "?propagationPolicy=Background", `{}`, pv(deleting + `,"finalizers":["cascade.dev/hold"]`), false},
		{"foregroundDeletion", "?propagationPolicy=Foreground", `{}`, pv(deleting + `,"finalizers":["foregroundDeletion"]`), false},
	}
	for _, c := range cases {
		rec := record("delete", "run1-v", "/api/v1/persistentvolumes/run1-v"+c.query, 200, c.body, c.resp)
		rec.Resource, rec.Namespace = "persistentvolumes", ""
		ops, err := FromAudit([]controlplane.AuditRecord{rec}, s)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(ops) != 1 || ops[0].Removed != c.removed || ops[0].Got == nil || ops[0].Got.UID != "u1" {
			t.Errorf("%s: want removed=%v, got %+v", c.name, c.removed, ops)
		}
	}
	pod := func(meta string) string {
		return `{"kind":"Pod","metadata":{"name":"p","namespace":"run1-default","uid":"u2","resourceVersion":"9"` + meta + `}}`
	}
	for _, c := range []struct {
		name, resp string
		removed    bool
	}{
		{"grace 0, orphan dropped", pod(deleting + `,"finalizers":["orphan"]`), true},
		{"grace period left", pod(`,"deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":30,"finalizers":["orphan"]`), false},
	} {
		rec := record("delete", "p", "/api/v1/namespaces/run1-default/pods/p?propagationPolicy=Background", 200, `{}`, c.resp)
		rec.Resource = "pods"
		ops, err := FromAudit([]controlplane.AuditRecord{rec}, s)
		if err != nil {
			t.Fatalf("pod %s: %v", c.name, err)
		}
		if len(ops) != 1 || ops[0].Removed != c.removed {
			t.Errorf("pod %s: want removed=%v, got %+v", c.name, c.removed, ops)
		}
	}
}

// TestReadsFromAudit: a controller's GET of one object in scope is read
// evidence, with the object it answered; the driver's GETs, lists,
// watches, objects out of scope and writes are not.
func TestReadsFromAudit(t *testing.T) {
	s := Scope{Prefix: "run1"}
	kcm := "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0000000/replicaset-controller"
	live := `{"kind":"ReplicaSet","metadata":{"name":"web","namespace":"run1-default","uid":"u1","resourceVersion":"7"},"spec":{"replicas":1}}`
	deleting := strings.Replace(live, `"resourceVersion":"7"`, `"resourceVersion":"9","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["orphan"]`, 1)
	rs := func(verb, uri string, code int, resp string) controlplane.AuditRecord {
		r := record(verb, "web", uri, code, "", resp)
		r.APIGroup, r.Resource, r.Username, r.UserAgent = "apps", "replicasets", controlplane.ControllerManagerUser, kcm
		return r
	}
	get := rs("get", "/apis/apps/v1/namespaces/run1-default/replicasets/web", 200, live)
	gone := rs("get", "/apis/apps/v1/namespaces/run1-default/replicasets/web", 404,
		`{"kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
	late := rs("get", "/apis/apps/v1/namespaces/run1-default/replicasets/web", 200, deleting)
	late.RequestReceived, late.StageTimestamp = late.RequestReceived.Add(time.Second), late.StageTimestamp.Add(time.Second)
	adopterGet := record("get", "h", "/apis/cascade.dev/v1/namespaces/run1-default/herds/h", 200, "",
		`{"kind":"Herd","metadata":{"name":"h","namespace":"run1-default","uid":"u5","resourceVersion":"3"}}`)
	adopterGet.APIGroup, adopterGet.Resource, adopterGet.UserAgent = "cascade.dev", "herds", adopter.UserAgent
	driverGet := record("get", "a", "/api/v1/namespaces/run1-default/configmaps/a", 200, "", `{"kind":"ConfigMap","metadata":{"name":"a"}}`)
	list := rs("list", "/apis/apps/v1/namespaces/run1-default/replicasets", 200, `{"kind":"ReplicaSetList","items":[]}`)
	list.Name = ""
	outside := rs("get", "/apis/apps/v1/namespaces/other/replicasets/web", 200, live)
	outside.Namespace = "other"
	patch := rs("patch", "/apis/apps/v1/namespaces/run1-default/replicasets/web", 200, live)

	reads, err := ReadsFromAudit([]controlplane.AuditRecord{get, driverGet, list, outside, patch, gone, late, adopterGet}, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(reads) != 4 {
		t.Fatalf("want the controllers' 4 GETs in scope, got %d: %v", len(reads), reads)
	}
	r := reads[0]
	if r.Actor != "controller/replicaset-controller" || r.Key().String() != "rs/run1-default/web" ||
		r.Code != 200 || r.Got == nil || r.Got.UID != "u1" || r.Got.Deleting ||
		r.Call != get.RequestReceived.UnixNano() || r.Return != get.StageTimestamp.UnixNano() {
		t.Errorf("the recheck GET: %+v got %+v", r, r.Got)
	}
	if r := reads[1]; r.Code != 404 || r.Got != nil {
		t.Errorf("a GET finding nothing: %+v", r)
	}
	if r := reads[2]; r.Got == nil || !r.Got.Deleting || r.Got.RV != 9 {
		t.Errorf("a GET of the owner being deleted: %+v", r)
	}
	if r := reads[3]; r.Actor != ActorAdopter || r.Got == nil || r.Got.UID != "u5" {
		t.Errorf("impl's adopter's GET: %+v", r)
	}
	if ops, err := FromAudit([]controlplane.AuditRecord{get, patch}, s); err != nil || len(ops) != 1 || ops[0].Verb != Patch {
		t.Errorf("the history's ops keep the writes only: %v %v", err, ops)
	}
	meta := get
	meta.Level = "Metadata"
	if _, err := ReadsFromAudit([]controlplane.AuditRecord{meta}, s); err == nil || !strings.Contains(err.Error(), "RequestResponse") {
		t.Errorf("want an error about the audit level, got %v", err)
	}
}

// TestNamespaceAnswerWithoutSpec: a Namespace answered without its spec
// (a metadata client's PartialObjectMetadata) is read with the
// spec.finalizers the history last saw: "kubernetes" from its create on,
// so a patch emptying metadata.finalizers keeps it, as does a DELETE,
// until a namespaces/finalize answer shows them empty, after which the
// same answer removes it.
func TestNamespaceAnswerWithoutSpec(t *testing.T) {
	s := Scope{Prefix: "run1"}
	ns := func(verb, sub string, code int, resp string) controlplane.AuditRecord {
		r := record(verb, "run1-n", "/api/v1/namespaces/run1-n", code, `{"metadata":{"resourceVersion":"5","finalizers":null}}`, resp)
		r.Resource, r.Namespace, r.Subresource = "namespaces", "", sub
		return r
	}
	full := func(rv, spec string) string {
		return `{"kind":"Namespace","metadata":{"name":"run1-n","uid":"u1","resourceVersion":"` + rv +
			`","deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":` + spec + `}`
	}
	meta := func(rv string) string {
		return `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"run1-n","uid":"u1","resourceVersion":"` +
			rv + `","deletionTimestamp":"2026-01-01T00:00:00Z"}}`
	}
	created := `{"kind":"Namespace","metadata":{"name":"run1-n","uid":"u1","resourceVersion":"4"},"spec":{"finalizers":["kubernetes"]}}`
	for _, c := range []struct {
		name    string
		recs    []controlplane.AuditRecord
		removed bool
	}{
		{"after its create", []controlplane.AuditRecord{ns("create", "", 201, created), ns("patch", "", 200, meta("6"))}, false},
		{"nothing seen before", []controlplane.AuditRecord{ns("patch", "", 200, meta("6"))}, false},
		{"after finalize emptied spec.finalizers", []controlplane.AuditRecord{ns("create", "", 201, created),
			ns("update", "finalize", 200, full("6", `{}`)), ns("patch", "", 200, meta("6"))}, true},
		{"its spec shown", []controlplane.AuditRecord{ns("patch", "", 200, full("6", `{"finalizers":["kubernetes"]}`))}, false},
		{"a DELETE answered without spec", []controlplane.AuditRecord{ns("create", "", 201, created), ns("delete", "", 200, meta("6"))}, false},
	} {
		ops, err := FromAudit(c.recs, s)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		last := ops[len(ops)-1]
		if last.Removed != c.removed {
			t.Errorf("%s: want removed=%v, got %s", c.name, c.removed, last.String())
		}
	}
}

// TestPlainTextRefusal: the API server's mux refuses a path it does not
// serve (a custom resource whose CRD is not yet, or no longer, served)
// with "404 page not found" in plain text; the history takes it as a
// refusal with that message, not as an undecodable answer.
func TestPlainTextRefusal(t *testing.T) {
	op := Op{Verb: Create, Kind: mustKind(t, "herd")}
	if err := op.outcome(404, []byte("404 page not found\n"), nil); err != nil {
		t.Fatalf("a plain-text 404: %v", err)
	}
	if op.Code != 404 || op.OK() || op.Got != nil || op.Message != "404 page not found" {
		t.Errorf("want a refusal with the text as its message, got %+v", op)
	}
	if err := (&Op{Verb: Create, Kind: mustKind(t, "herd")}).outcome(201, []byte("created"), nil); err == nil {
		t.Error("a success with a body that is not JSON must still be an error")
	}
}

// TestGCRequestsFromAudit: the garbage collector's GETs and writes of
// single objects in scope, refused ones included, are its requests, in
// the order the API server received them, each with the answered
// object's UID; another client's requests, lists, subresources and
// objects out of scope are not.
func TestGCRequestsFromAudit(t *testing.T) {
	s := Scope{Prefix: "run1"}
	live := `{"kind":"ConfigMap","metadata":{"name":"o","namespace":"run1-default","uid":"u1","resourceVersion":"7"}}`
	gc := func(verb string, code int, resp string, at time.Duration) controlplane.AuditRecord {
		r := record(verb, "o", "/api/v1/namespaces/run1-default/configmaps/o", code, "", resp)
		r.UserAgent, r.Username = ImplGCUserAgent+"/v0.0.0", "cascade-impl"
		r.RequestReceived, r.StageTimestamp = r.RequestReceived.Add(at), r.StageTimestamp.Add(at)
		return r
	}
	get := gc("get", 200, live, 0)
	conflict := gc("patch", 409, `{"kind":"Status","status":"Failure","reason":"Conflict","code":409}`, time.Millisecond)
	patch := gc("patch", 200, live, 3*time.Millisecond)
	retry := gc("get", 200, live, 2*time.Millisecond)
	driver := record("get", "o", "/api/v1/namespaces/run1-default/configmaps/o", 200, "", live)
	list := gc("list", 200, `{"kind":"ConfigMapList","items":[]}`, 0)
	list.Name = ""
	status := gc("patch", 200, live, 0)
	status.Subresource = "status"
	outside := gc("get", 200, live, 0)
	outside.Namespace = "other"

	got := GCRequestsFromAudit([]controlplane.AuditRecord{patch, get, driver, conflict, list, status, outside, retry}, s)
	var verbs []string
	for _, r := range got {
		verbs = append(verbs, fmt.Sprintf("%s %d %s", r.Verb, r.Code, r.UID))
	}
	if want := []string{"get 200 u1", "patch 409 ", "get 200 u1", "patch 200 u1"}; !slices.Equal(verbs, want) {
		t.Fatalf("requests: got %q, want %q", verbs, want)
	}
	if r := got[0]; r.Key().String() != "cm/run1-default/o" || r.Received != get.RequestReceived.UnixNano() || r.Answered != get.StageTimestamp.UnixNano() {
		t.Errorf("the first GET: %+v", r)
	}
}
