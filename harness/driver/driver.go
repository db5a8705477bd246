// Package driver runs the client steps of cascade traces against a real
// API server and renders what the server holds in the model's dump
// format, so that one trace can be replayed on the model and on a real
// control plane and the two compared line by line.
//
// Trace names are mapped, never shared with anything else on the cluster:
// a trace namespace X lives in the real namespace "<prefix>-X" (the trace's
// default namespace included), a Namespace object ns/X is that same real
// namespace, and other cluster-scoped objects get the prefix in their
// name. CRDs are the exception, since their names are fixed by their
// group. Every object carries RunLabel, and the driver only ever reads,
// changes or cleans up objects it created itself.
package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/model"
)

// Result is a request's outcome, in the model's terms.
type Result = model.Result

// incarnation is one object the driver created.
type incarnation struct {
	key   string // trace key, e.g. cm/ns2/a
	label string // the model's UIDLabel: key, key#n
	kind  model.KindID
	ns    string // trace namespace ("" for cluster-scoped)
	name  string // trace name
	uid   types.UID
}

// Driver performs trace client steps against one API server.
type Driver struct {
	prefix  string
	clients map[model.Principal]dynamic.Interface

	configs map[model.Principal]*rest.Config
	lanes   map[int]map[model.Principal]dynamic.Interface // clients 1, 2, ... (see WithClient)

	mu      sync.Mutex
	objs    []incarnation        // in creation order
	symbols map[string]types.UID // uid=SYMBOL -> a UID no object has
	nsMade  map[string]bool      // real namespaces the driver created
	crdAt   time.Time            // when the driver last sent the create of a CRD
	crdName string               // and its name
}

// LastCRD returns when the driver last sent the create of a CRD that
// succeeded (zero if never): no discovery read that began before it can
// have seen that CRD.
func (d *Driver) LastCRD() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crdAt
}

// LastCRDName returns the name (plural.group) of the CRD the driver
// created last ("" if none).
func (d *Driver) LastCRDName() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crdName
}

// NewRunID returns a short random run id for a namespace prefix.
func NewRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New returns a driver whose objects live under prefix (a DNS label such
// as "cascade-3fa2c1"). limited, if not nil, is the configuration of a
// principal without update on any */finalizers (the trace's as=limited);
// nil makes steps that need it fail with a clear error.
//
// Every request carries the user agent "cascade-driver/client-N", N being
// the client (0 unless the context says otherwise, see WithClient), which
// is how a recorded history tells the driver's clients apart.
func New(admin, limited *rest.Config, prefix string) (*Driver, error) {
	d := &Driver{prefix: prefix, configs: map[model.Principal]*rest.Config{model.PrincipalAdmin: admin},
		lanes: map[int]map[model.Principal]dynamic.Interface{}, symbols: map[string]types.UID{}, nsMade: map[string]bool{}}
	if limited != nil {
		d.configs[model.PrincipalLimited] = limited
	}
	var err error
	if d.clients, err = d.newClients(0); err != nil {
		return nil, err
	}
	return d, nil
}

// UserAgent is the user agent of the driver's client n.
func UserAgent(n int) string { return fmt.Sprintf("cascade-driver/client-%d", n) }

func (d *Driver) newClients(n int) (map[model.Principal]dynamic.Interface, error) {
	out := map[model.Principal]dynamic.Interface{}
	for p, cfg := range d.configs {
		c := rest.CopyConfig(cfg)
		c.UserAgent = UserAgent(n)
		dc, err := dynamic.NewForConfig(c)
		if err != nil {
			return nil, err
		}
		out[p] = dc
	}
	return out, nil
}

type clientKey struct{}

// WithClient makes the driver send the steps it performs under ctx as its
// client n: concurrent runs give each of their goroutines one, so that the
// history shows which client sent what.
func WithClient(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, clientKey{}, n)
}

// clientsFor returns the clients of the context's client number.
func (d *Driver) clientsFor(ctx context.Context) (map[model.Principal]dynamic.Interface, error) {
	n, _ := ctx.Value(clientKey{}).(int)
	if n == 0 {
		return d.clients, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cs, ok := d.lanes[n]; ok {
		return cs, nil
	}
	cs, err := d.newClients(n)
	if err != nil {
		return nil, err
	}
	d.lanes[n] = cs
	return cs, nil
}

// stepResource is resource for a step's own request, sent as the
// context's client.
func (d *Driver) stepResource(ctx context.Context, p model.Principal, k model.KindID, traceNS string) (dynamic.ResourceInterface, error) {
	cs, err := d.clientsFor(ctx)
	if err != nil {
		return nil, err
	}
	return d.resourceOf(cs, p, k, traceNS)
}

// Prefix is the namespace and name prefix of this driver's objects.
func (d *Driver) Prefix() string { return d.prefix }

// realNS maps a trace namespace to the real one.
func (d *Driver) realNS(ns string) string { return d.prefix + "-" + ns }

// realName maps a trace name of a kind to the real object name.
// unservedName is the real name of an owner of a kind nobody serves: a
// run's own, as a cluster-scoped name is, since the GC keeps a virtual
// node it cannot resolve queued for ever and a later run on the same GC
// must not meet it under the same key.
func (d *Driver) unservedName(name string) string { return d.prefix + "-" + name }

func (d *Driver) realName(k model.KindID, name string) string {
	switch {
	case k.Info().Namespaced, k.Info().Short == "crd":
		return name
	case k.Info().Short == "ns":
		return d.realNS(name)
	}
	return d.prefix + "-" + name
}

func (d *Driver) resource(p model.Principal, k model.KindID, traceNS string) (dynamic.ResourceInterface, error) {
	return d.resourceOf(d.clients, p, k, traceNS)
}

func (d *Driver) resourceOf(cs map[model.Principal]dynamic.Interface, p model.Principal, k model.KindID, traceNS string) (dynamic.ResourceInterface, error) {
	c, ok := cs[p]
	if !ok {
		return nil, errors.New("this target has no limited principal (as=limited needs an envtest target)")
	}
	r := c.Resource(gvr(k))
	if k.Info().Namespaced {
		return r.Namespace(d.realNS(traceNS)), nil
	}
	return r, nil
}

// ensureNamespace creates the real namespace of a trace namespace the
// first time an object is placed there, as the model takes a namespace the
// trace never created to exist.
func (d *Driver) ensureNamespace(ctx context.Context, traceNS string) error {
	real := d.realNS(traceNS)
	d.mu.Lock()
	done := d.nsMade[real]
	d.mu.Unlock()
	if done || d.known(model.KindID(nsKind()), "", traceNS) {
		return nil
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName(real)
	ns.SetLabels(map[string]string{RunLabel: d.prefix})
	_, err := d.clients[model.PrincipalAdmin].Resource(gvr(nsKind())).Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", real, err)
	}
	d.mu.Lock()
	d.nsMade[real] = true
	d.mu.Unlock()
	return nil
}

// EnsureNamespaces creates the real namespaces of trace namespaces up
// front, as the first object placed in each would. A stepped run calls
// it before it settles impl, so that the namespaces' events reach impl's
// GC before the run's first step: the model has no events for namespaces
// a trace never created.
func (d *Driver) EnsureNamespaces(ctx context.Context, traceNSs []string) error {
	for _, ns := range traceNSs {
		if err := d.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

func nsKind() model.KindID { k, _ := model.KindByShort("ns"); return k }

// known reports whether the driver created an object with this key.
func (d *Driver) known(k model.KindID, ns, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, o := range d.objs {
		if o.kind == k && o.ns == ns && o.name == name {
			return true
		}
	}
	return false
}

// traceNS returns the trace namespace of a target, "" if cluster-scoped.
func traceNS(t model.Target) string {
	if t.Kind.Info().Namespaced {
		return t.Namespace
	}
	return ""
}

// uidFor resolves a model UID label or symbol to a real UID: an object
// incarnation's label (key, key#n), else a symbol, made up on first use.
func (d *Driver) uidFor(label string) types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, o := range d.objs {
		if o.label == label {
			return o.uid
		}
	}
	if u, ok := d.symbols[label]; ok {
		return u
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	u := types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
	d.symbols[label] = u
	return u
}

// labelOf names a real UID the way the model does.
func (d *Driver) labelOf(u types.UID) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, o := range d.objs {
		if o.uid == u {
			return o.label
		}
	}
	for l, s := range d.symbols {
		if s == u {
			return l
		}
	}
	return "uid:" + string(u)
}

// resolveOwner mirrors the model: uid=SYMBOL, else the live owner's UID,
// else the most recent incarnation of that key the driver created.
func (d *Driver) resolveOwner(ctx context.Context, o model.OwnerSpec) (metav1.OwnerReference, error) {
	ref := metav1.OwnerReference{Kind: o.Kind, Name: o.Name, Controller: &o.Controller, BlockOwnerDeletion: &o.Block}
	if o.ControllerUnset {
		ref.Controller = nil
	}
	if o.BlockUnset {
		ref.BlockOwnerDeletion = nil
	}
	k, served := model.KindByName(o.Kind)
	ref.APIVersion = "cascade.dev/v1"
	ref.Name = d.unservedName(o.Name)
	if served {
		ref.APIVersion = k.Info().APIVersion
		ref.Name = d.realName(k, o.Name)
	}
	switch {
	case o.UIDSym == "-":
		return ref, nil
	case o.UIDSym != "":
		ref.UID = d.uidFor(o.UIDSym)
		return ref, nil
	case !served:
		return ref, fmt.Errorf("owner %s/%s: kind %s is not served, so it needs uid=SYMBOL", o.Kind, o.Name, o.Kind)
	}
	ns := o.Namespace
	if !k.Info().Namespaced {
		ns = ""
	}
	r, err := d.resource(model.PrincipalAdmin, k, ns)
	if err != nil {
		return ref, err
	}
	if live, err := r.Get(ctx, d.realName(k, o.Name), metav1.GetOptions{}); err == nil {
		ref.UID = live.GetUID()
		return ref, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.objs) - 1; i >= 0; i-- {
		if x := d.objs[i]; x.kind == k && x.ns == ns && x.name == o.Name {
			ref.UID = x.uid
			return ref, nil
		}
	}
	return ref, fmt.Errorf("owner %s was never created: give it uid=SYMBOL", model.ObjKey(k, ns, o.Name))
}

// result converts an API error to the model's Result.
func result(err error, okCode int) Result {
	if err == nil {
		return Result{Code: okCode}
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		return Result{Code: int(s.Code), Reason: string(s.Reason), Message: s.Message}
	}
	return Result{Code: 0, Reason: "ClientError", Message: err.Error()}
}

// waitEstablished waits for a CRD to serve its resources.
func (d *Driver) waitEstablished(ctx context.Context, name string) error {
	crds := d.clients[model.PrincipalAdmin].Resource(gvr(crdKindID()))
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

func crdKindID() model.KindID { k, _ := model.KindByShort("crd"); return k }

// record notes a new incarnation, labelled as the model labels it.
func (d *Driver) record(k model.KindID, ns, name string, uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := model.ObjKey(k, ns, name)
	nth := 1
	for _, o := range d.objs {
		if o.key == key {
			nth++
		}
	}
	label := key
	if nth > 1 {
		label = fmt.Sprintf("%s#%d", key, nth)
	}
	d.objs = append(d.objs, incarnation{key: key, label: label, kind: k, ns: ns, name: name, uid: uid})
}

// Owns reports whether uid is one the driver gave out: an object it
// created, or a made-up UID it put in an ownerReference (uid=SYMBOL).
// Settling on a shared target waits only for work on these.
func (d *Driver) Owns(uid types.UID) bool {
	return d.labelOf(uid) != "uid:"+string(uid)
}

// Keys lists every key the driver created, sorted, once each.
func (d *Driver) Keys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, o := range d.objs {
		if !slices.Contains(out, o.key) {
			out = append(out, o.key)
		}
	}
	slices.Sort(out)
	return out
}

func sortedLabels(m map[string]string) []model.Label {
	var out []model.Label
	for k, v := range m {
		if k == RunLabel {
			continue
		}
		out = append(out, model.Label{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b model.Label) int { return strings.Compare(a.Key, b.Key) })
	return out
}
