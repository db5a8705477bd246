package driver

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cascade-k8s/cascade/model"
)

// Dump renders the real state of every key the driver created in
// model.State.Dump's format: one sorted line per key (live, deleting or
// gone), then the OwnerRefInvalidNamespace events about its objects. The
// reads run concurrently: stepped fuzzing dumps after every step.
func (d *Driver) Dump(ctx context.Context) ([]string, error) {
	keys := d.Keys()
	lines := make([]string, len(keys))
	var events []string
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	g.Go(func() error {
		var err error
		events, err = d.events(gctx)
		return err
	})
	for i, key := range keys {
		g.Go(func() error {
			line, err := d.dumpKey(gctx, key)
			lines[i] = line
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.Sort(lines)
	return append(lines, events...), nil
}

// dumpKey renders the latest incarnation of one key.
func (d *Driver) dumpKey(ctx context.Context, key string) (string, error) {
	inc := d.latest(key)
	r, err := d.resource(model.PrincipalAdmin, inc.kind, inc.ns)
	if err != nil {
		return "", err
	}
	u, err := r.Get(ctx, d.realName(inc.kind, inc.name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return key + " gone", nil
	case err != nil:
		return "", fmt.Errorf("dump %s: %w", key, err)
	}
	return d.dumpObject(ctx, inc, u)
}

func (d *Driver) latest(key string) incarnation {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out incarnation
	for _, o := range d.objs {
		if o.key == key {
			out = o
		}
	}
	return out
}

// traceName maps a real name of a kind back to the trace's.
func (d *Driver) traceName(k model.KindID, real string) string {
	if k.Info().Namespaced || k.Info().Short == "crd" {
		return real
	}
	return strings.TrimPrefix(real, d.prefix+"-")
}

func (d *Driver) dumpObject(ctx context.Context, inc incarnation, u *unstructured.Unstructured) (string, error) {
	var b strings.Builder
	b.WriteString(inc.key)
	if u.GetDeletionTimestamp() != nil {
		b.WriteString(" deleting")
	} else {
		b.WriteString(" live")
	}
	if refs := u.GetOwnerReferences(); len(refs) > 0 {
		parts := make([]string, len(refs))
		for i, r := range refs {
			parts[i] = d.formatRef(ctx, inc, r)
		}
		b.WriteString(" owners=[" + strings.Join(parts, ", ") + "]")
	}
	if fs := u.GetFinalizers(); len(fs) > 0 {
		b.WriteString(" finalizers=[" + strings.Join(fs, " ") + "]")
	}
	labels := u.GetLabels()
	if inc.kind.Info().Short == "ns" && labels[model.NamespaceNameLabel] != "" {
		labels[model.NamespaceNameLabel] = inc.name // the real name carries the prefix
	}
	if ls := sortedLabels(labels); len(ls) > 0 {
		parts := make([]string, len(ls))
		for i, l := range ls {
			parts[i] = l.Key + "=" + l.Value
		}
		b.WriteString(" labels=" + strings.Join(parts, ","))
	}
	if sel := selectorOf(inc.kind, u); sel != "" {
		b.WriteString(" selector=" + sel)
	}
	if n, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found && n != 0 && inc.kind.Info().Workload {
		b.WriteString(fmt.Sprintf(" replicas=%d", n))
	}
	return b.String(), nil
}

// selectorOf prints the selector of a workload or an adopting kind the
// way the trace gave it (a StatefulSet's too, though no controller here
// adopts for it); the driver's default selector (no selector= in the
// trace) is not printed, as the model prints none.
func selectorOf(k model.KindID, u *unstructured.Unstructured) string {
	if k.Info().Adopts == "" && !k.Info().Workload {
		return ""
	}
	m, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if k.Info().Short == "rc" {
		m, _, _ = unstructured.NestedStringMap(u.Object, "spec", "selector")
	}
	for key, v := range m {
		if key != model.DefaultSelectorLabel {
			return key + "=" + v
		}
	}
	return ""
}

// formatRef mirrors model.State.FormatRef: the owner's key, flags, and
// uid=LABEL when the UID is not the natural one for that key.
func (d *Driver) formatRef(ctx context.Context, dep incarnation, r metav1.OwnerReference) string {
	k, served := model.KindByName(r.Kind)
	key := r.Kind + "/" + strings.TrimPrefix(r.Name, d.prefix+"-")
	natural := ""
	if served {
		ns := dep.ns
		if !k.Info().Namespaced {
			ns = ""
		}
		name := d.traceName(k, r.Name)
		key = model.ObjKey(k, "", name)
		natural = model.ObjKey(k, ns, name)
		if res, err := d.resource(model.PrincipalAdmin, k, ns); err == nil {
			if live, err := res.Get(ctx, r.Name, metav1.GetOptions{}); err == nil {
				natural = d.labelOf(live.GetUID())
			}
		}
	}
	key += model.RefFlags(r.Controller, r.BlockOwnerDeletion)
	if l := d.labelOf(r.UID); l != natural {
		key += " uid=" + l
	}
	return key
}

var invalidNSMessage = regexp.MustCompile(`^ownerRef \[([^,]*)/([^/,]+), namespace: [^,]*, name: ([^,]*), uid: [^\]]*\] does not exist in namespace "([^"]*)"`)

// events renders the GC's OwnerRefInvalidNamespace warnings about the
// driver's objects as the model words them.
func (d *Driver) events(ctx context.Context) ([]string, error) {
	evs := d.clients[model.PrincipalAdmin].Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"})
	namespaces := []string{"default"} // events about cluster-scoped objects land in default
	d.mu.Lock()
	for ns := range d.nsMade {
		namespaces = append(namespaces, ns)
	}
	d.mu.Unlock()
	var out []string
	for _, ns := range namespaces {
		list, err := evs.Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=OwnerRefInvalidNamespace"})
		if err != nil {
			return nil, fmt.Errorf("list events in %s: %w", ns, err)
		}
		for _, e := range list.Items {
			uid, _, _ := unstructured.NestedString(e.Object, "involvedObject", "uid")
			msg, _, _ := unstructured.NestedString(e.Object, "message")
			dep := d.byUID(uid)
			m := invalidNSMessage.FindStringSubmatch(msg)
			if dep == nil || m == nil {
				continue
			}
			owner := m[2] + "/" + m[3]
			if k, ok := model.KindByName(m[2]); ok {
				owner = k.Info().Short + "/" + d.traceName(k, m[3])
			}
			line := fmt.Sprintf("event OwnerRefInvalidNamespace %s: ownerRef %s does not exist in namespace %q", dep.key, owner, dep.ns)
			if !slices.Contains(out, line) {
				out = append(out, line)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func (d *Driver) byUID(uid string) *incarnation {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.objs {
		if string(d.objs[i].uid) == uid {
			o := d.objs[i]
			return &o
		}
	}
	return nil
}

// Cleanup removes what the driver created and nothing else: for each
// incarnation still present with the same UID it clears the finalizers
// (with a UID precondition) and deletes it in the background; then it
// deletes the namespaces it made. It reports the first error but tries
// everything.
func (d *Driver) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	objs := slices.Clone(d.objs)
	d.mu.Unlock()
	var first error
	note := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) && first == nil {
			first = err
		}
	}
	bg := metav1.DeletePropagationBackground
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		r, err := d.resource(model.PrincipalAdmin, o.kind, o.ns)
		if err != nil {
			note(err)
			continue
		}
		name := d.realName(o.kind, o.name)
		// lift the finalizers and the protection label the trace may have
		// left, or the webhook would refuse the driver's own cleanup
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"finalizers":null,"labels":{%q:null}}}`, o.uid, model.ProtectionLabel)
		if _, err := r.Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
			note(err)
		}
		uid := o.uid
		note(r.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}))
		if o.kind == crdKindID() {
			// a CRD goes only after apiextensions removed its resources; a
			// later run may create it again, so wait for it
			note(wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := r.Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			}))
		}
	}
	d.mu.Lock()
	var nss []string
	for ns := range d.nsMade {
		nss = append(nss, ns)
	}
	d.mu.Unlock()
	for _, ns := range nss {
		note(d.clients[model.PrincipalAdmin].Resource(gvr(nsKind())).Delete(ctx, ns, metav1.DeleteOptions{}))
	}
	return first
}
