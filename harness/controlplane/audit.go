package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RequestResponseResources are the resources (with all their subresources)
// whose requests the audit policy records with request and response
// bodies: everything the harness creates, deletes or watches being
// collected.
var RequestResponseResources = []auditv1.GroupResources{
	{Group: "", Resources: withSubresources("pods", "configmaps", "secrets", "replicationcontrollers", "services", "namespaces", "persistentvolumes")},
	{Group: "apps", Resources: withSubresources("deployments", "replicasets", "statefulsets", "daemonsets")},
	{Group: "batch", Resources: withSubresources("jobs", "cronjobs")},
	{Group: "apiextensions.k8s.io", Resources: withSubresources("customresourcedefinitions")},
}

// builtinGroups are the API groups kube-apiserver v1.36 serves itself
// (beta and alpha groups included, so that enabling one later changes
// nothing). Requests in these groups not covered by
// RequestResponseResources are audited at level Metadata; requests in any
// other group, that is custom resources such as *.cascade.dev, at level
// RequestResponse. Audit policy rules match groups exactly
// (k8s.io/apiserver/pkg/audit/policy/checker.go, ruleMatchesResource), so
// "every custom group" can only be said as "every group not listed here".
var builtinGroups = []string{
	"", "apps", "batch", "autoscaling", "policy",
	"admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io",
	"authentication.k8s.io", "authorization.k8s.io", "certificates.k8s.io",
	"coordination.k8s.io", "discovery.k8s.io", "events.k8s.io",
	"flowcontrol.apiserver.k8s.io", "internal.apiserver.k8s.io", "networking.k8s.io",
	"node.k8s.io", "rbac.authorization.k8s.io", "resource.k8s.io",
	"scheduling.k8s.io", "storage.k8s.io", "storagemigration.k8s.io",
}

func withSubresources(resources ...string) []string {
	var out []string
	for _, r := range resources {
		out = append(out, r, r+"/*")
	}
	return out
}

// AuditPolicy is the audit policy Options.Audit installs. Rules match in
// order:
//  1. None for leases, events and the health endpoints (noise that would
//     drown the record);
//  2. RequestResponse for RequestResponseResources;
//  3. Metadata for the rest of the built-in groups and for non-resource
//     URLs;
//  4. RequestResponse for everything else: custom resources.
//
// Stage RequestReceived is omitted (each request then yields one
// ResponseComplete record, plus ResponseStarted for watches), and so are
// managedFields.
func AuditPolicy() *auditv1.Policy {
	var builtin []auditv1.GroupResources
	for _, g := range builtinGroups {
		builtin = append(builtin, auditv1.GroupResources{Group: g})
	}
	return &auditv1.Policy{
		TypeMeta:          metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Policy"},
		OmitStages:        []auditv1.Stage{auditv1.StageRequestReceived},
		OmitManagedFields: true,
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelNone, Resources: []auditv1.GroupResources{
				{Group: "coordination.k8s.io", Resources: []string{"leases"}},
				{Group: "", Resources: []string{"events"}},
				{Group: "events.k8s.io", Resources: []string{"events"}},
			}},
			{Level: auditv1.LevelNone, NonResourceURLs: []string{"/healthz*", "/livez*", "/readyz*"}},
			{Level: auditv1.LevelRequestResponse, Resources: RequestResponseResources},
			{Level: auditv1.LevelMetadata, Resources: builtin},
			{Level: auditv1.LevelMetadata, NonResourceURLs: []string{"*"}},
			{Level: auditv1.LevelRequestResponse},
		},
	}
}

// configureAudit writes the policy and points kube-apiserver at it.
// Blocking mode writes each record before the request's handler returns,
// so a response the client has seen is already in the log.
func configureAudit(api *envtest.APIServer, dir, logPath string) error {
	policy, err := json.MarshalIndent(AuditPolicy(), "", "  ") // JSON is YAML
	if err != nil {
		return fmt.Errorf("controlplane: encode audit policy: %w", err)
	}
	policyPath := filepath.Join(dir, "audit-policy.json")
	if err := os.WriteFile(policyPath, policy, 0o600); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	api.Configure().
		Set("audit-policy-file", policyPath).
		Set("audit-log-path", logPath).
		Set("audit-log-format", "json").
		Set("audit-log-mode", "blocking").
		Set("audit-log-maxsize", "100000"). // megabytes: never rotate under a test
		Set("audit-log-maxbackup", "0")
	return nil
}

// AuditLog is the path of the audit log, or "" when Options.Audit was off.
func (cp *ControlPlane) AuditLog() string { return cp.audit }

// AuditRecords reads every complete record in the audit log so far, in file
// order. File order is the order records were written, which for
// concurrent requests need not be StageTimestamp order.
func (cp *ControlPlane) AuditRecords() ([]AuditRecord, error) {
	r, err := cp.FollowAudit()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []AuditRecord
	for {
		rec, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// FollowAudit opens the audit log for reading from its start; the
// returned reader's Next follows the file as kube-apiserver appends to it,
// like tail -f.
func (cp *ControlPlane) FollowAudit() (*AuditReader, error) {
	if cp.audit == "" {
		return nil, errors.New("controlplane: the audit log is off (start with Options.Audit)")
	}
	return OpenAuditLog(cp.audit)
}

// AuditReader reads audit.k8s.io/v1 Event JSON lines from a log file.
type AuditReader struct {
	path    string
	f       *os.File
	r       *bufio.Reader
	pending []byte       // a line read only in part so far
	held    *AuditRecord // a record ReadIdle read past its end, for the next call
	line    int
	// Poll is how long Next sleeps at the end of the file before looking
	// again; default 20ms.
	Poll time.Duration
}

// OpenAuditLog opens an audit log written with --audit-log-format=json.
func OpenAuditLog(path string) (*AuditReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("controlplane: open audit log: %w", err)
	}
	return &AuditReader{path: path, f: f, r: bufio.NewReaderSize(f, 1<<20), Poll: 20 * time.Millisecond}, nil
}

// Next returns the next record, waiting for kube-apiserver to write it if
// need be, until ctx is done (then it returns ctx's error). A line that is
// not an audit event is an error naming the file and line.
func (r *AuditReader) Next(ctx context.Context) (AuditRecord, error) {
	if r.held != nil { // the record ReadIdle kept back
		rec := *r.held
		r.held = nil
		return rec, nil
	}
	for {
		rec, err := r.next()
		if !errors.Is(err, io.EOF) {
			return rec, err
		}
		select {
		case <-ctx.Done():
			return AuditRecord{}, ctx.Err()
		case <-time.After(r.Poll):
		}
	}
}

// ReadIdle returns the records written from here on, once the log has had
// nothing new for idle, or once it reaches a request received idle after
// the call began, which it keeps for the next call. kube-apiserver writes
// the log in blocking mode, so a request's record is in the file before
// its response: what the reader has not seen after a quiet spell was not
// sent. The second bound ends the read when the log is never quiet: the
// real GC can pass a virtual node between two identities without end,
// a GET every few milliseconds (traces/scenarios/virtual-owner-two-
// identities.trace), and a fuzz campaign under --informer-lag waited on
// such a log for good.
func (r *AuditReader) ReadIdle(ctx context.Context, idle time.Duration) ([]AuditRecord, error) {
	var out []AuditRecord
	stop := time.Now().Add(idle)
	for {
		rctx, cancel := context.WithTimeout(ctx, idle)
		rec, err := r.Next(rctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if rec.RequestReceived.After(stop) {
			r.held = &rec
			return out, nil
		}
		out = append(out, rec)
	}
}

// next returns the next complete record or io.EOF. A trailing partial line
// stays pending until its newline arrives.
func (r *AuditReader) next() (AuditRecord, error) {
	for {
		chunk, err := r.r.ReadBytes('\n')
		r.pending = append(r.pending, chunk...)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return AuditRecord{}, io.EOF
			}
			return AuditRecord{}, fmt.Errorf("controlplane: read audit log %s: %w", r.path, err)
		}
		line := bytes.TrimSpace(r.pending)
		r.pending = r.pending[:0]
		r.line++
		if len(line) == 0 {
			continue
		}
		rec, err := ParseAuditEvent(line)
		if err != nil {
			return AuditRecord{}, fmt.Errorf("controlplane: audit log %s line %d: %w", r.path, r.line, err)
		}
		return rec, nil
	}
}

// Close closes the file.
func (r *AuditReader) Close() error { return r.f.Close() }

// Audit stages as they appear in AuditRecord.Stage.
const (
	StageResponseStarted  = string(auditv1.StageResponseStarted)
	StageResponseComplete = string(auditv1.StageResponseComplete)
	StagePanic            = string(auditv1.StagePanic)
)

// AuditRecord is one audit.k8s.io/v1 Event, flattened to what the harness
// needs. For the linearizability checker a request is the interval from
// RequestReceived (its call) to the StageTimestamp of its ResponseComplete
// record (its return): the API server applied it at some instant between
// the two.
type AuditRecord struct {
	AuditID    string // one per request; shared by its stages
	Level      string // Metadata, Request or RequestResponse
	Stage      string // ResponseComplete, ResponseStarted (watches) or Panic
	RequestURI string // with query: propagationPolicy, dryRun, ...
	Verb       string // get, list, watch, create, update, patch, delete, deletecollection
	UserAgent  string
	Username   string
	Groups     []string

	// The object reference, empty for non-resource requests.
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	UID             string // rarely set by the API server
	ResourceVersion string // rarely set by the API server

	Code int // HTTP status of the response

	RequestReceived time.Time // when the API server received the request
	StageTimestamp  time.Time // when this stage was reached

	RequestObject  json.RawMessage // body sent, at level Request and above
	ResponseObject json.RawMessage // body returned, at level RequestResponse
}

// ParseAuditEvent decodes one JSON line of an audit log.
func ParseAuditEvent(line []byte) (AuditRecord, error) {
	var ev auditv1.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return AuditRecord{}, fmt.Errorf("not an audit event: %w", err)
	}
	if ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" {
		return AuditRecord{}, fmt.Errorf("not an audit.k8s.io/v1 Event (apiVersion %q, kind %q)", ev.APIVersion, ev.Kind)
	}
	rec := AuditRecord{
		AuditID:         string(ev.AuditID),
		Level:           string(ev.Level),
		Stage:           string(ev.Stage),
		RequestURI:      ev.RequestURI,
		Verb:            ev.Verb,
		UserAgent:       ev.UserAgent,
		Username:        ev.User.Username,
		Groups:          ev.User.Groups,
		RequestReceived: ev.RequestReceivedTimestamp.UTC(),
		StageTimestamp:  ev.StageTimestamp.UTC(),
	}
	if ref := ev.ObjectRef; ref != nil {
		rec.APIGroup, rec.APIVersion = ref.APIGroup, ref.APIVersion
		rec.Resource, rec.Subresource = ref.Resource, ref.Subresource
		rec.Namespace, rec.Name = ref.Namespace, ref.Name
		rec.UID, rec.ResourceVersion = string(ref.UID), ref.ResourceVersion
	}
	if ev.ResponseStatus != nil {
		rec.Code = int(ev.ResponseStatus.Code)
	}
	if ev.RequestObject != nil {
		rec.RequestObject = json.RawMessage(ev.RequestObject.Raw)
	}
	if ev.ResponseObject != nil {
		rec.ResponseObject = json.RawMessage(ev.ResponseObject.Raw)
	}
	return rec, nil
}

// GarbageCollectorClient is the client name kube-controller-manager gives
// the garbage collector's clients; it ends their user agent.
const GarbageCollectorClient = "generic-garbage-collector"

// ControllerClient returns the kube-controller-manager client name that
// made the request, for example "generic-garbage-collector" or
// "replicaset-controller": the last "/"-separated element of the user
// agent, when the user is ControllerManagerUser. Otherwise "".
func (r AuditRecord) ControllerClient() string {
	if r.Username != ControllerManagerUser || !strings.HasPrefix(r.UserAgent, ControllerManagerBinary+"/") {
		return ""
	}
	return r.UserAgent[strings.LastIndexByte(r.UserAgent, '/')+1:]
}

// IsGarbageCollector reports whether the upstream garbage collector made
// the request. Observed on v1.36.3: username
// "system:kube-controller-manager" (ControllerManagerUser) and user agent
// "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0000000/generic-garbage-collector".
func (r AuditRecord) IsGarbageCollector() bool {
	return r.ControllerClient() == GarbageCollectorClient
}

// String renders the record on one line for logs and failure messages.
func (r AuditRecord) String() string {
	obj := r.Resource
	if r.Subresource != "" {
		obj += "/" + r.Subresource
	}
	if r.APIGroup != "" {
		obj += "." + r.APIGroup
	}
	if r.Namespace != "" {
		obj += " " + r.Namespace + "/" + r.Name
	} else if r.Name != "" {
		obj += " " + r.Name
	}
	if r.Resource == "" {
		obj = r.RequestURI
	}
	return fmt.Sprintf("%s %s %s -> %d by %s (%s) [%s, %s]", r.StageTimestamp.Format(time.RFC3339Nano),
		r.Verb, obj, r.Code, r.Username, r.UserAgent, r.Stage, r.StageTimestamp.Sub(r.RequestReceived))
}
