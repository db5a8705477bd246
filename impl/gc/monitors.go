package gc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/step"
)

// ignoredResources are never monitored (DefaultIgnoredResources): events
// are written in great numbers and can never be owners.
var ignoredResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// monitor is one metadata-only informer; upstream runs one per resource,
// which is why events of different resources are not ordered.
type monitor struct {
	gvr      schema.GroupVersionResource
	gvk      schema.GroupVersionKind
	informer cache.SharedIndexInformer
	stop     chan struct{}
	done     chan struct{}
	// discovered is when the discovery read that started the monitor
	// began.
	discovered time.Time
}

// deletableResources is GetDeletableResources: the preferred version of
// every resource that supports delete, list and watch. Partial discovery
// failures return what was found together with the error.
func deletableResources(dc discovery.DiscoveryInterface) (map[schema.GroupVersionResource]bool, error) {
	lists, err := dc.ServerPreferredResources()
	out := map[schema.GroupVersionResource]bool{}
	if lists == nil {
		return out, err
	}
	for _, rl := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists) {
		gv, perr := schema.ParseGroupVersion(rl.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range rl.APIResources {
			out[gv.WithResource(r.Name)] = true
		}
	}
	return out, err
}

// Resync runs one discovery sync now (GarbageCollector.Sync does it every
// SyncPeriod): when the set of deletable resources changed, it resets the
// REST mapper and starts and stops monitors to match, so that custom
// resources whose CRD appeared later are monitored. It does not wait for
// new monitors to sync; see WaitForSync.
func (gc *GarbageCollector) Resync(ctx context.Context) error {
	gc.syncMu.Lock()
	defer gc.syncMu.Unlock()
	log := ctrllog.FromContext(ctx)
	readAt := time.Now()
	found, err := deletableResources(gc.discovery)
	if len(found) == 0 {
		if err == nil {
			err = errors.New("discovery reported no resources")
		}
		return fmt.Errorf("gc: skipping sync: %w", err)
	}
	if failed, partial := discovery.GroupDiscoveryFailedErrorGroups(err); partial {
		// keep the synced monitors of groups discovery failed to list
		for r := range gc.resources {
			if _, bad := failed[r.GroupVersion()]; bad && gc.resourceSynced(r) {
				found[r] = true
			}
		}
	}
	if maps.Equal(found, gc.resources) {
		return nil
	}
	gc.mapper.Reset()
	if err := gc.syncMonitors(ctx, found, readAt); err != nil {
		// gc.resources stays as it was, so the next sync retries
		return fmt.Errorf("gc: failed to sync resource monitors: %w", err)
	}
	log.V(2).Info("synced monitors with discovery", "resources", len(found))
	gc.resources = found
	return nil
}

// syncMonitors starts a monitor for every new resource and stops those of
// resources that went away (syncMonitors plus startMonitors).
func (gc *GarbageCollector) syncMonitors(ctx context.Context, resources map[schema.GroupVersionResource]bool, discovered time.Time) error {
	gc.monitorMu.Lock()
	var errs []error
	current := map[schema.GroupVersionResource]*monitor{}
	for r := range resources {
		if ignoredResources[r.GroupResource()] {
			continue
		}
		if m, ok := gc.monitors[r]; ok {
			current[r] = m
			continue
		}
		if gc.stopped {
			continue
		}
		kind, err := gc.mapper.KindFor(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't look up resource %q: %w", r, err))
			continue
		}
		m, err := gc.newMonitor(ctx, r, kind)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.discovered = discovered
		current[r] = m
		gc.workers.Add(1)
		go func() {
			defer gc.workers.Done()
			defer close(m.done)
			m.informer.Run(m.stop)
		}()
	}
	var removed []*monitor
	for r, m := range gc.monitors {
		if _, keep := current[r]; !keep {
			removed = append(removed, m)
		}
	}
	gc.monitors = current
	gc.monitorMu.Unlock()
	for _, m := range removed {
		close(m.stop)
		<-m.done
		if gc.stepper != nil {
			gc.stepper.forget(m.gvr)
		}
	}
	return errors.Join(errs...)
}

// stopMonitors stops every monitor for good.
func (gc *GarbageCollector) stopMonitors() {
	gc.monitorMu.Lock()
	gc.stopped = true
	ms := gc.monitors
	gc.monitors = nil
	gc.monitorMu.Unlock()
	for _, m := range ms {
		close(m.stop)
		<-m.done
	}
}

func (gc *GarbageCollector) newMonitor(ctx context.Context, r schema.GroupVersionResource, kind schema.GroupVersionKind) (*monitor, error) {
	inf := metadatainformer.NewFilteredMetadataInformer(gc.metadata, r, "", 0, cache.Indexers{}, nil).Informer()
	m := &monitor{gvr: r, gvk: kind, informer: inf, stop: make(chan struct{}), done: make(chan struct{})}
	log := ctrllog.FromContext(ctx)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if o := asMetadata(obj); o != nil {
				gc.observe(ctx, &event{typ: Added, obj: o, gvk: kind, gvr: r, listed: isInInitialList})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, old := asMetadata(newObj), asMetadata(oldObj)
			if o == nil {
				return
			}
			if gc.mode == step.Auto && gc.bugs.Has(bugs.LostFirstUpdate) && old != nil && beingDeleted(o) && !beingDeleted(old) {
				// kubernetes#115570: the cache takes the update that first
				// shows the deletion, the handler never hears of it
				log.V(2).Info("lost-first-update: dropping update", "resource", r, "object", o.Namespace+"/"+o.Name)
				return
			}
			gc.observe(ctx, &event{typ: Modified, obj: o, old: old, gvk: kind, gvr: r})
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o := asMetadata(obj); o != nil {
				gc.observe(ctx, &event{typ: Deleted, obj: o, gvk: kind, gvr: r})
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't start monitor for resource %q: %w", r, err)
	}
	return m, nil
}

func asMetadata(obj any) *metav1.PartialObjectMetadata {
	o, _ := obj.(*metav1.PartialObjectMetadata)
	return o
}

// observe hands an informer event to the graph builder: Auto mode queues
// it on graphChanges, Stepped mode holds it in its resource's queue.
func (gc *GarbageCollector) observe(_ context.Context, ev *event) {
	if gc.stepper != nil {
		gc.stepper.hold(ev)
		return
	}
	if gc.lag != nil {
		gc.lag.deliver(ev)
		return
	}
	gc.graphChanges.Add(ev)
}

// resourceSynced reports whether r's monitor has synced.
func (gc *GarbageCollector) resourceSynced(r schema.GroupVersionResource) bool {
	gc.monitorMu.Lock()
	defer gc.monitorMu.Unlock()
	m, ok := gc.monitors[r]
	return ok && m.informer.HasSynced()
}

// MonitorSynced reports whether the GC monitors a version of the
// resource gr with a monitor that has synced and was started by a
// discovery sync whose discovery read began at or after since: after a CRD
// created at since, that the GC has taken it in (the model's `gc sync`).
func (gc *GarbageCollector) MonitorSynced(gr schema.GroupResource, since time.Time) bool {
	gc.monitorMu.Lock()
	defer gc.monitorMu.Unlock()
	for r, m := range gc.monitors {
		if r.GroupResource() == gr && !m.discovered.Before(since) && m.informer.HasSynced() {
			return true
		}
	}
	return false
}

// IsSynced reports whether there are monitors and all have synced.
func (gc *GarbageCollector) IsSynced() bool {
	gc.monitorMu.Lock()
	defer gc.monitorMu.Unlock()
	if len(gc.monitors) == 0 {
		return false
	}
	for _, m := range gc.monitors {
		if !m.informer.HasSynced() {
			return false
		}
	}
	return true
}

// Monitored lists the resources the GC watches, sorted.
func (gc *GarbageCollector) Monitored() []schema.GroupVersionResource {
	gc.monitorMu.Lock()
	defer gc.monitorMu.Unlock()
	out := make([]schema.GroupVersionResource, 0, len(gc.monitors))
	for r := range gc.monitors {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// cachedMetadata is getMetadata: the object from the monitor's store, or
// a live GET when there is no monitor or the store lacks it.
func (gc *GarbageCollector) cachedMetadata(ctx context.Context, id Identity) (metav1.Object, error) {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return nil, err
	}
	ns := resourceDefaultNamespace(namespaced, id.Namespace)
	gc.monitorMu.Lock()
	m := gc.monitors[r]
	gc.monitorMu.Unlock()
	if m != nil {
		key := id.Name
		if ns != "" {
			key = ns + "/" + id.Name
		}
		if obj, exists, err := m.informer.GetStore().GetByKey(key); err == nil && exists {
			if o := asMetadata(obj); o != nil {
				return o, nil
			}
		}
	}
	return gc.metadata.Resource(r).Namespace(ns).Get(ctx, id.Name, metav1.GetOptions{})
}
