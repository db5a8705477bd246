// Package adopter is cascade's adopting controller: a small
// ReplicaSet-like controller for the custom kind Herd (cascade.dev/v1,
// crds.Herd) that adopts matching ownerless Pods in its namespace and
// releases the Pods it controls that no longer match. It creates no pods;
// it exists so that the orphan-adoption race (kubernetes#42639) can be
// reproduced against a real API server. Options.Kinds lets it manage
// ReplicaSets, ReplicationControllers and Deployments the same way, for
// the stepped target, which runs no kube-controller-manager (see Kinds).
//
// Ownership follows upstream's ControllerRefManager
// (pkg/controller/controller_ref_manager.go, ClaimObject; decide): an
// owner that is not being deleted adopts an object of its dependent kind
// in its namespace whose labels match its selector, that has no
// controller ownerReference and is not being deleted; it releases one it
// controls whose labels no longer match. Before adopting it re-reads the
// owner live and refuses when it is gone or has a deletionTimestamp
// (RecheckDeletionTimestamp, kubernetes#42938); the adopt-without-recheck
// bug skips that GET. Adoption is a strategic merge patch adding
// {apiVersion, kind, name, uid, controller: true, blockOwnerDeletion:
// true} (AdoptPod, AdoptReplicaSet), release a strategic merge patch
// deleting the reference by UID (ReleasePod, ReleaseReplicaSet), both
// with the dependent's UID in the patch as a precondition.
//
// The CRD of every custom kind it manages must be installed before it
// starts (the harness installs it, crds.Install); Preflight checks.
//
// Options.Mode picks Auto (informers and workers) or Stepped (events held
// until Stepper.Deliver, adoptions and releases only on Stepper.Adopt and
// Stepper.Release).
package adopter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/crds"
	"github.com/cascade-k8s/cascade/impl/step"
)

// UserAgent is the controller's user agent.
const UserAgent = "cascade-adopter"

// Options configures a Controller.
type Options struct {
	// Mode is step.Auto (default) or step.Stepped.
	Mode step.Mode
	// Bugs: adopt-without-recheck is the one this controller reads.
	Bugs bugs.Set
	// Kinds names the owner kinds to manage, by API kind name, from
	// Kinds; nil means Herd only.
	Kinds []string
	// Workers is the number of Auto-mode workers; 0 means 2.
	Workers int
	// EventWait bounds how long a Stepped call waits for the event it
	// names; 0 means 10s.
	EventWait time.Duration
	// InformerLag, in Auto mode, delivers each event of every watch
	// stream the informers open a random time up to it late, each
	// stream's in order (lag.go): a lagging watch cache, under which the
	// cache can show an owner live after its deletion, as
	// kubernetes#42639 needs. The recheck GET is not lagged. LagSeed
	// seeds the delays.
	InformerLag time.Duration
	LagSeed     uint64
}

// Controller is one adopting controller. The CRD of every custom kind it
// watches must be installed (crds.Install) before Run.
type Controller struct {
	opts      Options
	workloads []workload
	dyn       dynamic.Interface
	disc      discovery.DiscoveryInterface
	kinds     []step.Kind                                  // watched: owners and dependents, in step.Kinds order
	informers map[string]cache.SharedIndexInformer         // by API kind name
	queue     workqueue.TypedRateLimitingInterface[string] // Auto: owner keys Kind/namespace/name
	step      *Stepper
	lag       *watchLag    // Auto mode, Options.InformerLag
	busy      atomic.Int64 // Auto mode: owners being synced
	wg        sync.WaitGroup
}

// New builds a Controller; it makes no request until Preflight or Run.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	ws, err := parseKinds(opts.Kinds)
	if err != nil {
		return nil, err
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.EventWait <= 0 {
		opts.EventWait = 10 * time.Second
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = UserAgent
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &Controller{opts: opts, workloads: ws, dyn: dyn, disc: disc, informers: map[string]cache.SharedIndexInformer{}}
	for _, k := range step.Kinds {
		if slices.ContainsFunc(ws, func(w workload) bool { return w.owner.Kind == k.Kind || w.dep.Kind == k.Kind }) {
			c.kinds = append(c.kinds, k)
		}
	}
	if opts.Mode == step.Stepped {
		c.step = newStepper(c)
	} else {
		c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cascade_adopter"})
		if opts.InformerLag > 0 {
			c.lag = newWatchLag(opts.InformerLag, opts.LagSeed)
		}
	}
	for _, k := range c.kinds {
		inf := newInformer(dyn, k.GVR(), c.lag)
		c.informers[k.Kind] = inf
		kind := k.Kind
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.observe(kind, "add", nil, obj) },
			UpdateFunc: func(old, obj any) { c.observe(kind, "update", old, obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				c.observe(kind, "delete", nil, obj)
			},
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Stepper returns the stepped scheduler, or nil in Auto mode.
func (c *Controller) Stepper() *Stepper { return c.step }

// Kinds lists the owner kinds the controller manages.
func (c *Controller) Kinds() []string {
	var out []string
	for _, w := range c.workloads {
		out = append(out, w.owner.Kind)
	}
	return out
}

// Preflight checks that the API server serves every kind the controller
// watches; for a custom kind whose CRD is missing the one-line error says
// which CRD to install. Run calls it first.
func (c *Controller) Preflight(ctx context.Context) error {
	for _, k := range c.kinds {
		gv := k.Version
		if k.Group != "" {
			gv = k.Group + "/" + k.Version
		}
		rl, err := c.disc.ServerResourcesForGroupVersion(gv)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("adopter: discovery of %s: %s", gv, firstLine(err))
		}
		if err == nil && slices.ContainsFunc(rl.APIResources, func(r metav1.APIResource) bool { return r.Name == k.Resource }) {
			continue
		}
		if k.Group == crds.Group {
			return fmt.Errorf("adopter: the cluster does not serve %s.%s/%s: install the CRD %s.%s first (the harness installs it with crds.Install)",
				k.Resource, k.Group, k.Version, k.Resource, k.Group)
		}
		return fmt.Errorf("adopter: the cluster does not serve %s (%s)", k.Resource, gv)
	}
	return ctx.Err()
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func (c *Controller) workloadOf(ownerKind string) (workload, bool) {
	for _, w := range c.workloads {
		if w.owner.Kind == ownerKind {
			return w, true
		}
	}
	return workload{}, false
}

// observe routes an informer event: Stepped mode holds it; Auto mode
// queues the owners it concerns, as the ReplicaSet controller's event
// handlers do (addPod, updatePod: the controller named by the
// dependent's controllerRef, before and after the update, and for an
// orphan every owner whose selector matches it).
func (c *Controller) observe(kind, typ string, oldObj, obj any) {
	o, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if c.step != nil {
		c.step.hold(kind, typ, o)
		return
	}
	if _, isOwner := c.workloadOf(kind); isOwner && typ != "delete" {
		c.queue.Add(kind + "/" + o.GetNamespace() + "/" + o.GetName())
	}
	if typ == "delete" {
		return
	}
	objs := []*unstructured.Unstructured{o}
	if old, ok := oldObj.(*unstructured.Unstructured); ok {
		objs = append(objs, old)
	}
	for _, w := range c.workloads {
		if w.dep.Kind != kind {
			continue
		}
		for _, d := range objs {
			if ref := metav1.GetControllerOfNoCopy(d); ref != nil {
				if ref.Kind == w.owner.Kind {
					c.queue.Add(w.owner.Kind + "/" + d.GetNamespace() + "/" + ref.Name)
				}
				continue
			}
			for _, x := range c.informers[w.owner.Kind].GetStore().List() {
				if owner := x.(*unstructured.Unstructured); w.decide(owner, d) == adoptIt {
					c.queue.Add(w.owner.Kind + "/" + owner.GetNamespace() + "/" + owner.GetName())
				}
			}
		}
	}
}

// Run checks the cluster (Preflight), then runs the controller until ctx
// is done and returns once its goroutines have stopped.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Preflight(ctx); err != nil {
		if c.step != nil {
			c.step.shutdown()
		} else {
			c.queue.ShutDown()
		}
		return err
	}
	ctx = ctrllog.IntoContext(ctx, ctrllog.FromContext(ctx).WithName("adopter"))
	for _, inf := range c.informers {
		c.wg.Go(func() { inf.Run(ctx.Done()) })
	}
	if c.step == nil {
		for range c.opts.Workers {
			c.wg.Go(func() {
				for c.processNext(ctx) {
				}
			})
		}
	}
	<-ctx.Done()
	if c.step == nil {
		c.queue.ShutDown()
	} else {
		c.step.shutdown()
	}
	c.wg.Wait()
	return nil
}

// WaitForSync waits until every informer has synced.
func (c *Controller) WaitForSync(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, inf := range c.informers {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("adopter: informers did not sync")
	}
	return nil
}

// Idle reports, in Auto mode, whether the controller has nothing to do
// now: no event delayed by the informer lag, no owner queued or being
// synced. An owner waiting out a retry back-off is not counted. Stepped
// mode has Stepper.Pending and Stepper.Claims instead.
func (c *Controller) Idle() bool {
	if c.queue == nil {
		return true
	}
	return (c.lag == nil || c.lag.pending.Load() == 0) && c.queue.Len() == 0 && c.busy.Load() == 0
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	c.busy.Add(1)
	defer c.busy.Add(-1)
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		ctrllog.FromContext(ctx).V(2).Info("sync failed, retrying", "owner", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync is Auto mode's reconcile of one owner, Kind/namespace/name: claim
// the dependents of its namespace (ClaimPods, ClaimReplicaSets over
// ClaimObject), ignoring what ClaimObject and ReleasePod ignore: an
// adoption or release whose dependent is gone (404), a release the API
// server rejects as invalid (422: the reference is already gone, or the
// dependent is another incarnation).
func (c *Controller) sync(ctx context.Context, key string) error {
	kind, nsName, _ := strings.Cut(key, "/")
	w, ok := c.workloadOf(kind)
	if !ok {
		return nil
	}
	obj, exists, err := c.informers[kind].GetStore().GetByKey(nsName)
	if err != nil || !exists {
		return err
	}
	owner := obj.(*unstructured.Unstructured)
	var errs []error
	recheck := recheckOnce(func() error { return c.recheck(ctx, w, owner) })
	for _, x := range c.informers[w.dep.Kind].GetStore().List() {
		dep := x.(*unstructured.Unstructured)
		switch w.decide(owner, dep) {
		case adoptIt:
			if err := c.adopt(ctx, w, owner, dep, recheck); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		case releaseIt:
			if err := c.release(ctx, w, owner, dep); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// recheckOnce runs f at most once (upstream checks the owner once per
// ClaimObjects call, lazily, before the first adoption: canAdopt).
func recheckOnce(f func() error) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = f() })
		return err
	}
}

// recheck is RecheckDeletionTimestamp with the owner controller's getter
// (the ReplicaSet and Deployment controllers' canAdoptFunc): a live GET of
// the owner that refuses adoption when it is gone (404: a GET that finds
// nothing, or another incarnation) or being deleted (409).
func (c *Controller) recheck(ctx context.Context, w workload, owner *unstructured.Unstructured) error {
	fresh, err := c.dyn.Resource(w.owner.GVR()).Namespace(owner.GetNamespace()).Get(ctx, owner.GetName(), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil || fresh.GetUID() != owner.GetUID() {
		got := "none"
		if err == nil {
			got = string(fresh.GetUID())
		}
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
			Message: fmt.Sprintf("original %s %s/%s is gone: got uid %s, wanted %s", w.owner.Kind, owner.GetNamespace(), owner.GetName(), got, owner.GetUID())}}
	}
	if dt := fresh.GetDeletionTimestamp(); dt != nil {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
			Message: fmt.Sprintf("%s %s/%s has just been deleted at %v", w.owner.Kind, owner.GetNamespace(), owner.GetName(), dt)}}
	}
	return nil
}

func apiVersion(k step.Kind) string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// adopt is AdoptPod / AdoptReplicaSet: after recheck (unless the
// adopt-without-recheck bug is on), a strategic merge patch adding a
// controller reference to owner, with dep's UID as a precondition (422
// on another incarnation). It returns the re-check's refusal or the
// patch's error as they are.
func (c *Controller) adopt(ctx context.Context, w workload, owner, dep *unstructured.Unstructured, recheck func() error) error {
	if !c.opts.Bugs.Has(bugs.AdoptWithoutRecheck) {
		if err := recheck(); err != nil {
			return err
		}
	}
	t := true
	ref := metav1.OwnerReference{APIVersion: apiVersion(w.owner), Kind: w.owner.Kind, Name: owner.GetName(),
		UID: owner.GetUID(), Controller: &t, BlockOwnerDeletion: &t}
	return c.patchOwnerRefs(ctx, w, owner, dep, []metav1.OwnerReference{ref}, "adopted")
}

// release is ReleasePod / ReleaseReplicaSet without their error filter:
// a strategic merge patch deleting every reference to owner's UID
// (GenerateDeleteOwnerRefStrategicMergeBytes), with dep's UID as a
// precondition. It returns the patch's error as it is; the Auto-mode
// sync ignores 404 and 422 as ReleasePod does.
func (c *Controller) release(ctx context.Context, w workload, owner, dep *unstructured.Unstructured) error {
	return c.patchOwnerRefs(ctx, w, owner, dep, []map[string]string{{"$patch": "delete", "uid": string(owner.GetUID())}}, "released")
}

// patchOwnerRefs sends the strategic merge patch of adoption and release:
// the ownerReferences list given, with dep's UID as a precondition.
func (c *Controller) patchOwnerRefs(ctx context.Context, w workload, owner, dep *unstructured.Unstructured, refs any, done string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "uid": dep.GetUID()}})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(w.dep.GVR()).Namespace(dep.GetNamespace()).Patch(ctx, dep.GetName(), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err == nil {
		ctrllog.FromContext(ctx).V(2).Info(done, "dependent", w.dep.Kind+" "+dep.GetNamespace()+"/"+dep.GetName(), "owner", w.owner.Kind+" "+owner.GetName())
	}
	return err
}
