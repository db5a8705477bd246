// Package adopter is cascade's adopting controller: a small
// ReplicaSet-like controller for the custom kind Herd (cascade.dev/v1,
// crds.Herd) that adopts matching ownerless Pods in its namespace. It
// creates no pods; it exists so that the orphan-adoption race
// (kubernetes#42639) can be reproduced against a real API server.
//
// Adoption follows upstream's ControllerRefManager (ClaimObjects,
// AdoptPod): a Herd that is not being deleted, with a non-empty
// spec.selector.matchLabels, adopts a Pod in its namespace whose labels
// match, that has no controller ownerReference and is not being deleted.
// Before adopting it re-reads the Herd live and refuses when it is gone or
// has a deletionTimestamp (RecheckDeletionTimestamp, kubernetes#42938);
// the adopt-without-recheck bug skips that GET. The adoption is a
// strategic merge patch adding {apiVersion cascade.dev/v1, kind Herd,
// controller: true, blockOwnerDeletion: true} with the Pod's UID in the
// patch as a precondition.
//
// Options.Mode picks Auto (informers and workers) or Stepped (events held
// until Stepper.Deliver, adoptions only on Stepper.Adopt).
package adopter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
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

var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Options configures a Controller.
type Options struct {
	// Mode is step.Auto (default) or step.Stepped.
	Mode step.Mode
	// Bugs: adopt-without-recheck is the one this controller reads.
	Bugs bugs.Set
	// Workers is the number of Auto-mode workers; 0 means 2.
	Workers int
	// EventWait bounds how long a Stepped call waits for the event it
	// names; 0 means 10s.
	EventWait time.Duration
}

// Controller is one adopting controller. The Herd CRD must be installed
// (crds.Install) before Run.
type Controller struct {
	opts  Options
	kube  kubernetes.Interface
	dyn   dynamic.Interface
	herds cache.SharedIndexInformer
	pods  cache.SharedIndexInformer
	queue workqueue.TypedRateLimitingInterface[string] // Auto: herd keys
	step  *Stepper
	wg    sync.WaitGroup
}

// New builds a Controller; it makes no request until Run.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.EventWait <= 0 {
		opts.EventWait = 10 * time.Second
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = UserAgent
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &Controller{opts: opts, kube: kube, dyn: dyn,
		herds: dynamicinformer.NewFilteredDynamicInformer(dyn, crds.Herd.GVR(), "", 0, cache.Indexers{}, nil).Informer(),
		pods:  metadatainformer.NewFilteredMetadataInformer(md, podGVR, "", 0, cache.Indexers{}, nil).Informer(),
	}
	if opts.Mode == step.Stepped {
		c.step = newStepper(c)
	} else {
		c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "cascade_adopter"})
	}
	for _, inf := range []cache.SharedIndexInformer{c.herds, c.pods} {
		inf := inf
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.observe(inf, "add", obj) },
			UpdateFunc: func(_, obj any) { c.observe(inf, "update", obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				c.observe(inf, "delete", obj)
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

// observe routes an informer event: Stepped mode holds it; Auto mode
// queues the Herds it concerns.
func (c *Controller) observe(inf cache.SharedIndexInformer, typ string, obj any) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if c.step != nil {
		c.step.hold(inf == c.herds, typ, o)
		return
	}
	if inf == c.herds {
		c.queue.Add(o.GetNamespace() + "/" + o.GetName())
		return
	}
	if typ == "delete" {
		return
	}
	for _, h := range c.herds.GetStore().List() {
		herd := h.(*unstructured.Unstructured)
		if herd.GetNamespace() == o.GetNamespace() && selectorOf(herd).Matches(labels.Set(o.GetLabels())) {
			c.queue.Add(herd.GetNamespace() + "/" + herd.GetName())
		}
	}
}

// Run runs the controller until ctx is done and returns once its
// goroutines have stopped.
func (c *Controller) Run(ctx context.Context) error {
	ctx = ctrllog.IntoContext(ctx, ctrllog.FromContext(ctx).WithName("adopter"))
	for _, inf := range []cache.SharedIndexInformer{c.herds, c.pods} {
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

// WaitForSync waits until both informers have synced.
func (c *Controller) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.herds.HasSynced, c.pods.HasSynced) {
		return errors.New("adopter: informers did not sync")
	}
	return nil
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		ctrllog.FromContext(ctx).V(2).Info("sync failed, retrying", "herd", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync is Auto mode's reconcile of one Herd: claim its orphans (ClaimPods).
func (c *Controller) sync(ctx context.Context, key string) error {
	obj, exists, err := c.herds.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	herd := obj.(*unstructured.Unstructured)
	var errs []error
	recheck := recheckOnce(func() error { return c.recheck(ctx, herd) })
	for _, p := range c.pods.GetStore().List() {
		pod := p.(*metav1.PartialObjectMetadata)
		if !adoptable(herd, pod) {
			continue
		}
		if err := c.adopt(ctx, herd, pod, recheck); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// selectorOf reads spec.selector.matchLabels; an empty selector matches
// nothing (a ReplicaSet with one is invalid).
func selectorOf(herd *unstructured.Unstructured) labels.Selector {
	m, _, _ := unstructured.NestedStringMap(herd.Object, "spec", "selector", "matchLabels")
	if len(m) == 0 {
		return labels.Nothing()
	}
	return labels.SelectorFromSet(m)
}

// adoptable is ClaimObjects' test for an orphan, on cached objects: the
// Herd is not being deleted; the Pod is in its namespace, matches its
// selector, has no controller reference and is not being deleted.
func adoptable(herd *unstructured.Unstructured, pod metav1.Object) bool {
	if herd.GetDeletionTimestamp() != nil || pod.GetDeletionTimestamp() != nil || pod.GetNamespace() != herd.GetNamespace() {
		return false
	}
	if metav1.GetControllerOfNoCopy(pod) != nil {
		return false
	}
	return selectorOf(herd).Matches(labels.Set(pod.GetLabels()))
}

// recheckOnce runs f at most once (upstream checks the owner once per
// ClaimObjects call, lazily, before the first adoption).
func recheckOnce(f func() error) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = f() })
		return err
	}
}

// recheck is RecheckDeletionTimestamp with the ReplicaSet controller's
// getter: a live GET of the Herd that refuses adoption when it is gone
// (404: a GET that finds nothing, or another incarnation) or being
// deleted (409).
func (c *Controller) recheck(ctx context.Context, herd *unstructured.Unstructured) error {
	fresh, err := c.dyn.Resource(crds.Herd.GVR()).Namespace(herd.GetNamespace()).Get(ctx, herd.GetName(), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil || fresh.GetUID() != herd.GetUID() {
		got := "none"
		if err == nil {
			got = string(fresh.GetUID())
		}
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
			Message: fmt.Sprintf("original Herd %s/%s is gone: got uid %s, wanted %s", herd.GetNamespace(), herd.GetName(), got, herd.GetUID())}}
	}
	if dt := fresh.GetDeletionTimestamp(); dt != nil {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict,
			Message: fmt.Sprintf("Herd %s/%s has just been deleted at %v", herd.GetNamespace(), herd.GetName(), dt)}}
	}
	return nil
}

// adopt patches a controller reference to herd onto pod, after recheck
// unless the adopt-without-recheck bug is on.
func (c *Controller) adopt(ctx context.Context, herd *unstructured.Unstructured, pod metav1.Object, recheck func() error) error {
	if !c.opts.Bugs.Has(bugs.AdoptWithoutRecheck) {
		if err := recheck(); err != nil {
			return err
		}
	}
	t := true
	ref := metav1.OwnerReference{APIVersion: crds.Group + "/" + crds.Version, Kind: crds.Herd.Kind, Name: herd.GetName(),
		UID: herd.GetUID(), Controller: &t, BlockOwnerDeletion: &t}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{ref},
		"uid":             pod.GetUID(), // precondition: 422 on another incarnation
	}})
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(pod.GetNamespace()).Patch(ctx, pod.GetName(), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err == nil {
		ctrllog.FromContext(ctx).V(2).Info("adopted", "pod", pod.GetNamespace()+"/"+pod.GetName(), "herd", herd.GetName())
	}
	return err
}
