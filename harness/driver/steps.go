package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/cascade-k8s/cascade/model"
)

// RVMapper turns a trace's if-rv=N (the model's per-object write count)
// into a real resourceVersion. Replays that run the model in lockstep pass
// one that returns the live resourceVersion when the model's object is at
// N and a stale one otherwise; nil means if-rv is always stale.
type RVMapper func(target model.Target, n int) (current bool)

// Do performs one client step. A step the real API refuses is a Result,
// not an error; an error means the step could not be performed at all
// (no such principal, an owner that cannot be resolved, a network error).
func (d *Driver) Do(ctx context.Context, st model.Step, rv RVMapper) (Result, error) {
	if st.Actor != model.ActorClient {
		return Result{}, fmt.Errorf("%s: the driver performs client steps only", st)
	}
	t := st.Target
	if t.Kind == model.NoKind {
		return Result{}, fmt.Errorf("%s: clients can only name served kinds", t)
	}
	ns := traceNS(t)
	if ns != "" {
		if err := d.ensureNamespace(ctx, ns); err != nil {
			return Result{}, err
		}
	}
	r, err := d.stepResource(ctx, st.Principal, t.Kind, ns)
	if err != nil {
		return Result{}, err
	}
	name := d.realName(t.Kind, t.Name)
	switch st.Op {
	case model.OpCreate:
		return d.create(ctx, st, name, ns)
	case model.OpDelete:
		opts := metav1.DeleteOptions{}
		if st.Delete.Policy != model.NoPolicy {
			p := metav1.DeletionPropagation(st.Delete.Policy.String())
			opts.PropagationPolicy = &p
		}
		opts.OrphanDependents = st.Delete.OrphanDependents
		if st.IfUIDSym != "" || st.Delete.PreconditionRV != 0 {
			opts.Preconditions = &metav1.Preconditions{}
		}
		if st.IfUIDSym != "" {
			u := d.uidFor(st.IfUIDSym)
			opts.Preconditions.UID = &u
		}
		if st.Delete.PreconditionRV != 0 {
			v, err := d.resourceVersion(ctx, r, name, t, st.Delete.PreconditionRV, rv)
			if err != nil {
				return Result{}, err
			}
			opts.Preconditions.ResourceVersion = &v
		}
		if st.Delete.DryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		return result(r.Delete(ctx, name, opts), 200), nil
	}
	return d.update(ctx, st, r, name, rv)
}

// create builds and posts the object, resolving ownerReferences first.
func (d *Driver) create(ctx context.Context, st model.Step, name, ns string) (Result, error) {
	t := st.Target
	u, err := body(st, name, d.realNS(ns))
	if err != nil {
		return Result{}, err
	}
	labels := map[string]string{RunLabel: d.prefix}
	for _, l := range st.Labels {
		labels[l.Key] = l.Value
	}
	u.SetLabels(labels)
	u.SetFinalizers(st.Finalizers)
	var refs []metav1.OwnerReference
	for _, o := range st.Owners {
		ref, err := d.resolveOwner(ctx, o)
		if err != nil {
			return Result{}, err
		}
		refs = append(refs, ref)
	}
	u.SetOwnerReferences(refs)
	r, err := d.stepResource(ctx, st.Principal, t.Kind, ns)
	if err != nil {
		return Result{}, err
	}
	sent := time.Now()
	created, err := r.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return result(err, 201), nil
	}
	d.record(t.Kind, ns, t.Name, created.GetUID())
	if t.Kind.Info().Short == "ns" {
		d.mu.Lock()
		d.nsMade[name] = true
		d.mu.Unlock()
	}
	if t.Kind == crdKindID() {
		d.mu.Lock()
		d.crdAt, d.crdName = sent, name // no discovery read before sent can have seen it
		d.mu.Unlock()
		if err := d.waitEstablished(ctx, name); err != nil {
			return Result{}, fmt.Errorf("crd/%s never became established: %w", t.Name, err)
		}
		if err := d.waitDiscovery(ctx, name, true); err != nil {
			return Result{}, err
		}
	}
	return Result{Code: 201}, nil
}

// resourceVersion maps if-rv=N to the live resourceVersion when the
// mapper says the model's object is at N, else to one that is stale.
func (d *Driver) resourceVersion(ctx context.Context, r interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name string, t model.Target, n int, rv RVMapper) (string, error) {
	if rv != nil && rv(t, n) {
		live, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "1", nil // gone: any precondition fails the same way
		}
		return live.GetResourceVersion(), nil
	}
	return "1", nil // no object on a live cluster has resourceVersion 1
}

// update performs the update verbs as a JSON merge patch of the fields
// they change, computed from a fresh read and carrying that read's
// resourceVersion, retried on conflict: the real counterpart of the
// model's atomic patch. With if-rv the patch carries the mapped
// resourceVersion instead and is not retried.
func (d *Driver) update(ctx context.Context, st model.Step, r interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
}, name string, rvm RVMapper) (Result, error) {
	var res Result
	var stepErr error
	attempt := func() error {
		cur, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			res = result(err, 200)
			return nil
		}
		meta := map[string]any{"resourceVersion": cur.GetResourceVersion()}
		if st.IfRV != 0 {
			v, _ := d.resourceVersion(ctx, r, name, st.Target, st.IfRV, rvm)
			meta["resourceVersion"] = v
		}
		patch := map[string]any{"metadata": meta}
		switch st.Op {
		case model.OpAddFinalizer, model.OpRemoveFinalizer:
			fs := cur.GetFinalizers()
			if st.Op == model.OpAddFinalizer && !slices.Contains(fs, st.Finalizer) {
				fs = append(fs, st.Finalizer)
			}
			if st.Op == model.OpRemoveFinalizer {
				fs = slices.DeleteFunc(fs, func(f string) bool { return f == st.Finalizer })
			}
			if fs == nil {
				fs = []string{}
			}
			meta["finalizers"] = fs
		case model.OpAddOwner, model.OpRemoveOwner:
			refs := cur.GetOwnerReferences()
			if st.Op == model.OpAddOwner {
				ref, err := d.resolveOwner(ctx, st.Owner)
				if err != nil {
					stepErr = err
					return nil
				}
				if i := slices.IndexFunc(refs, func(x metav1.OwnerReference) bool { return x.UID == ref.UID }); i >= 0 {
					refs[i] = ref
				} else {
					refs = append(refs, ref)
				}
			} else {
				k, _ := model.KindByName(st.Owner.Kind)
				real := d.unservedName(st.Owner.Name)
				if k != model.NoKind {
					real = d.realName(k, st.Owner.Name)
				}
				refs = slices.DeleteFunc(refs, func(x metav1.OwnerReference) bool { return x.Kind == st.Owner.Kind && x.Name == real })
			}
			if refs == nil {
				refs = []metav1.OwnerReference{}
			}
			meta["ownerReferences"] = refs
		case model.OpLabel:
			meta["labels"] = map[string]any{st.Label.Key: st.Label.Value}
		case model.OpUnlabel:
			meta["labels"] = map[string]any{st.Label.Key: nil}
		case model.OpScale:
			if !st.Target.Kind.Info().Workload {
				stepErr = fmt.Errorf("scale %s: %s has no replicas", st.Target, st.Target.Kind.Info().Kind)
				return nil
			}
			patch["spec"] = map[string]any{"replicas": st.Replicas}
		default:
			stepErr = fmt.Errorf("%s: unsupported client step", st)
			return nil
		}
		body, err := json.Marshal(patch)
		if err != nil {
			stepErr = err
			return nil
		}
		_, err = r.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		if apierrors.IsConflict(err) && st.IfRV == 0 {
			return err // someone else wrote in between: read again
		}
		res = result(err, 200)
		return nil
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, attempt); err != nil {
		return Result{}, fmt.Errorf("%s: kept conflicting: %w", st, err)
	}
	return res, stepErr
}
