package target

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// The stepped upstream target (upstream-stepped) runs the real, unmodified
// kube-controller-manager in two processes, its garbage collector
// (SteppedControllers) in one and its workload controllers
// (SteppedWorkloadControllers, whose steps upstream_stepped_controller.go
// maps) in the other, behind the API proxy with a proxy.Stepper: while a
// trace runs, no watch event about the trace's objects reaches either
// process and no GET or write of the GC about them reaches kube-apiserver
// until a step of the trace releases it.
//
//	gc deliver KEY          hands the head event of KEY's informer on
//	                        (it must be about KEY), then waits
//	                        DeliverPause for the graph builder
//	gc attemptToDelete KEY  releases the GC worker's held GET of KEY that
//	                        begins a pass of KEY's item (kcmPasses), lets
//	                        the worker's owner GETs through, and waits
//	                        for what the model says comes next: the
//	                        worker's first write held (`gc delete|patch|
//	                        unblock` releases it), the foregroundDeletion
//	                        finalizer's removal answered, or no write
//	gc delete|patch|unblock KEY
//	                        releases the held DELETE or PATCH of KEY; its
//	                        answer is the step's result
//	gc attemptToOrphan KEY  lets KEY's orphan worker's requests through
//	                        (orphanPass: its PATCHes of dependents removing
//	                        references to KEY, its GET and write of KEY)
//	                        until its write of KEY (the orphan finalizer's
//	                        removal) is answered, or its GET of KEY when
//	                        the finalizer is gone
//	gc coalesce KEY         ends the watch of KEY's informer at its held
//	                        head event, which must be about KEY, with a
//	                        410 Expired, and waits for the informer's
//	                        relist (proxy.Stepper.Relist): the events held
//	                        behind it are skipped, the relist's events of
//	                        changed objects held for the next steps
//	settle                  lets everything through until the cluster and
//	                        the proxy are quiet, then holds again
//
// An IO the model expects that does not come within StepBound, or one
// that differs from what the model expects, is a *proxy.Divergence naming
// the step, the expectation and what the proxy observed.
//
// The flags: the GC runs with its default 20 workers
// (--concurrent-gc-syncs=20), not one. Every queued work item then waits
// in a worker of its own on its first GET, held by the proxy, so the
// trace decides which item goes first, as the model's attemptToDelete
// set lets it; with one worker the work queue's FIFO order would decide,
// and a trace that processes a later item first could not be produced.
// The workqueue never hands one item to two workers at once, so each held
// GET names one work item. The workload controllers do not run in the
// GC's process: there their informers would share the GC's streams, so
// events held for the GC would hold them too.
var SteppedControllers = []string{"garbagecollector"}

// StepBound bounds the wait for an IO the model expects of
// kube-controller-manager in a step.
const StepBound = 10 * time.Second

// RelistBound bounds the wait for an informer's relist after a `gc
// coalesce` or `controller coalesce` ended its watch: client-go's
// reflector waits out its back-off before it lists again, 0.8 s doubling
// to 30 s, with as much again of jitter, and resets it only after 2
// minutes without a relist (proxy.RelistCooldown), so replays that
// coalesce one informer in quick succession wait longer each time.
const RelistBound = 65 * time.Second

// SyncBound bounds a `gc sync`: the garbage collector's discovery sync
// runs on its own 30 s timer (GarbageCollector.Sync's period), and its
// discovery requests wait at the proxy for the step, so the next one may
// be 30 s off, and the monitors it starts must list. 45 s was too short
// on a loaded machine: a fresh-clone CI run at load 27 missed the GC's
// next discovery request by that bound (TestGCSyncStartsMonitorsAtTheStep);
// a longer bound only delays a real divergence.
const SyncBound = 90 * time.Second

// monitorStarts are the resources of the custom kinds whose monitors the
// model's sync started: monitored in next, not in prev.
func monitorStarts(prev, next *model.State) []proxy.Call {
	var out []proxy.Call
	for i := range model.Kinds {
		k := model.KindID(i)
		if bit := uint32(1) << k; next.GC.Monitored&bit != 0 && prev.GC.Monitored&bit == 0 {
			info := k.Info()
			gv, _ := schema.ParseGroupVersion(info.APIVersion)
			out = append(out, proxy.Call{Group: gv.Group, Resource: info.Resource})
		}
	}
	return out
}

// DeliverPause is how long a `gc deliver` waits after handing an event
// on: the informer's handler and the graph builder take it in without any
// IO, so nothing at the proxy says when they have. Informers of different
// resources run in goroutines of their own; without the pause two events
// handed on in quick succession could reach the graph builder in either
// order.
const DeliverPause = 150 * time.Millisecond

// QuietWindow is how long a step waits for an IO the model does not
// expect before it concludes that none comes.
const QuietWindow = 400 * time.Millisecond

// UnsteppableOps are the trace steps upstream-stepped cannot produce
// through the IO boundary, and why.
var UnsteppableOps = map[string]string{
	"gc deliver-virtual": "a virtual delete event goes from an attemptToDelete worker to the graph builder inside the GC's process (enqueueVirtualDeleteEvent), with no IO the proxy could hold",
	"gc lose":            "it is the lost-first-update bug of client-go's informer, which the real binary does not have switched on",
	"apiextensions":      "a CRD's cleanup is kube-apiextensions-apiserver's, inside kube-apiserver, behind no proxy",
}

// unsteppable names the first step of tr upstream-stepped cannot produce,
// with why ("" when there is none).
func unsteppable(tr *traces.Trace) string {
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if c.Settle || c.Step.Actor == model.ActorClient {
				continue
			}
			if c.Step.Target.Kind == model.NoKind && c.Step.Op != model.OpSync {
				return fmt.Sprintf("its step %q names an object of a kind nobody serves: the GC's work item for it fails its REST mapping without any IO the proxy could hold", c.Text)
			}
			f := strings.Fields(c.Text)
			for _, key := range []string{f[0], f[0] + " " + f[1]} {
				if why, ok := UnsteppableOps[key]; ok {
					return fmt.Sprintf("its step %q cannot be produced through the API proxy: %s", c.Text, why)
				}
			}
		}
	}
	return ""
}

// upstreamStepped takes a trace's GC steps on kube-controller-manager
// through the proxy's Stepper.
type upstreamStepped struct {
	st    *proxy.Stepper
	proxy *proxy.Proxy
	d     *driver.Driver
	// decided are the GC writes attemptToDelete steps decided and the
	// proxy holds, by object: the request each object's next `gc
	// delete|patch|unblock` releases
	decided decided
	// passes tells whether a GC GET is the first GET of a pass of its
	// object's work item (kcmPasses.First, from kube-controller-manager's
	// log), not another worker's GET of that object (nil: unknown, any
	// GET may be either)
	passes *kcmPasses
}

// passGET reports whether r, a GET, may be the first GET of a pass of
// its object's work item whose real UID is uid ("": any): the one an
// attemptToDelete step releases. Not one the log cannot attribute to a
// single item (kcmPasses.Ambiguous).
func (u upstreamStepped) passGET(r proxy.Request, uid string) bool {
	if u.passes == nil {
		return true
	}
	item := u.passes.Item(r)
	return item != "" && (uid == "" || item == uid) && !u.passes.Ambiguous(r)
}

// ambiguous reports whether the proxy holds a first GET of o that may
// be the pass of either of two items of o's key (kcmPasses.Ambiguous):
// an attemptToDelete step of o cannot tell which to release.
func (u upstreamStepped) ambiguous(o object) bool {
	if u.passes == nil {
		return false
	}
	_, ok, _ := u.st.WaitRequest(context.Background(), 0, func(r proxy.Request) bool {
		return r.Verb == proxy.VerbGet && o.is(r) && u.passes.Ambiguous(r)
	})
	return ok
}

// otherGET reports whether r, a GET, may be a GET a worker sends within
// a pass (an owner's, isDangling; removeFinalizer's and deleteObject's
// of the item): one a step's window admits.
func (u upstreamStepped) otherGET(r proxy.Request) bool {
	return u.passes == nil || !u.passes.First(r)
}

// decided maps an object (object.String()) to the ID of the GC's write
// of it an attemptToDelete step, or the send before, saw held. Another
// worker's write of the same object and verb can be held beside it (the
// orphan worker's PATCH of a dependent, sent when the owner's deletion
// reached the graph builder), and a send must release the one the
// model's write stands for.
type decided map[string]int64

// held reports whether r is a write an attemptToDelete step decided.
func (d decided) held(r proxy.Request) bool {
	for _, id := range d {
		if id == r.ID {
			return true
		}
	}
	return false
}

// inScope reports whether an object belongs to the driver's run: a
// namespace of the run's, a cluster-scoped name with its prefix, or the
// CRD of one of cascade's custom kinds (its name is the kind's plural
// and group, widgets.cascade.dev, which no prefix can change; a trace
// that names one creates it, and one trace runs at a time).
func inScope(prefix string) func(ns, name string) bool {
	return func(ns, name string) bool {
		if ns != "" {
			return strings.HasPrefix(ns, prefix+"-")
		}
		return strings.HasPrefix(name, prefix+"-") || slices.ContainsFunc(model.Kinds, func(k model.KindInfo) bool { return k.CRDName == name && name != "" })
	}
}

// Settle lets everything through until the cluster and the proxy are
// quiet (proxyQuiet: for a window that outlasts the real GC's back-off
// of an item of the trace it failed on).
func (u upstreamStepped) Settle(ctx context.Context, d *driver.Driver) error {
	u.st.Hold(false)
	defer u.hold()
	return proxyQuiet{p: u.proxy, then: replay.DefaultQuiet}.Settle(ctx, d)
}

// hold holds again, forgetting the passes begun and the GETs sent while
// nothing was held: their GETs passed unrecorded, and a pass left
// unmatched would take a later GET of its object for its own.
func (u upstreamStepped) hold() {
	if u.passes != nil {
		u.passes.Reset()
		u.st.SetArrivals(u.passes.Arrived)
	}
	u.st.Hold(true)
}

func (u upstreamStepped) Step(context.Context, model.Step) (model.Result, error) {
	return model.Result{}, errors.New("upstream-stepped takes steps with the model's states only (replay.StateStepper)")
}

// object is a trace key's real object.
type object struct {
	group, resource, ns, name string
}

// String is the object as divergences name it (resource[.group]/[namespace/]name).
func (o object) String() string {
	res := o.resource
	if o.group != "" {
		res += "." + o.group
	}
	if o.ns == "" {
		return res + "/" + o.name
	}
	return res + "/" + o.ns + "/" + o.name
}

// is reports whether r is a GC request (proxy.GCHeld) about o.
func (o object) is(r proxy.Request) bool {
	return proxy.GCHeld(&r) && o.names(r)
}

// names reports whether r is about o, whoever sent it.
func (o object) names(r proxy.Request) bool {
	return r.Resource == o.resource && r.Group == o.group && r.Namespace == o.ns && r.Name == o.name
}

func (u upstreamStepped) object(st model.Step) (object, error) {
	line, err := u.d.RealLine(st.String())
	if err != nil {
		return object{}, err
	}
	return objectOf(strings.Fields(line)[2], st.Target.Kind)
}

// objectOf is the real object of a real key (the driver's, as RealLine
// writes it) of kind k.
func objectOf(key string, k model.KindID) (object, error) {
	parts := strings.Split(key, "/")
	info := k.Info()
	gv, err := schema.ParseGroupVersion(info.APIVersion)
	if err != nil {
		return object{}, err
	}
	o := object{group: gv.Group, resource: info.Resource, name: parts[len(parts)-1]}
	if len(parts) == 3 {
		o.ns = parts[1]
	}
	if !info.Namespaced {
		o.ns = ""
	}
	return o, nil
}

func isWrite(r proxy.Request) bool {
	return r.Verb == proxy.VerbPatch || r.Verb == proxy.VerbUpdate || r.Verb == proxy.VerbDelete
}

// StepWith implements replay.StateStepper.
func (u upstreamStepped) StepWith(ctx context.Context, st model.Step, prev, next *model.State, want model.Result) (model.Result, error) {
	if why := unsteppable(&traces.Trace{Stanzas: []traces.Stanza{{Commands: []traces.Command{{Text: st.String(), Step: st}}}}}); why != "" {
		return model.Result{}, errors.New(why)
	}
	if st.Op == model.OpSync {
		err := u.st.Sync(ctx, SyncBound, monitorStarts(prev, next))
		var div *proxy.Divergence
		if errors.As(err, &div) {
			div.Step = st.String()
		}
		return model.Result{Code: 200}, err
	}
	o, err := u.object(st)
	if err != nil {
		return model.Result{}, err
	}
	if st.Actor == model.ActorController {
		return u.controllerStep(ctx, st, o)
	}
	var res model.Result
	switch st.Op {
	case model.OpDeliver:
		err = u.st.ReleaseEvent(ctx, StepBound, o.group, o.resource, o.ns, o.name)
		if err == nil {
			time.Sleep(DeliverPause)
		}
		res = model.Result{Code: 200}
	case model.OpAttemptToDelete:
		gets := u.owners(st, prev)
		if removesForegroundFinalizer(prev, st) {
			gets = append(gets, o) // removeFinalizer's GET of the item
		}
		err = u.attemptToDelete(ctx, o, u.itemUID(prev, st), gets, prev, next)
		res = model.Result{Code: 200}
	case model.OpSend:
		res, err = u.send(ctx, st, o, next, want)
	case model.OpAttemptToOrphan:
		err = u.attemptToOrphan(ctx, o, u.orphanUID(prev, st), orphanFinalizer(prev, st))
		res = model.Result{Code: 200}
	case model.OpCoalesce:
		err = u.st.Relist(ctx, RelistBound, "", o.group, o.resource, o.ns, o.name)
		res = model.Result{Code: 200}
	default:
		err = fmt.Errorf("upstream-stepped cannot take %q", st.String())
	}
	var div *proxy.Divergence
	if errors.As(err, &div) {
		div.Step = st.String()
	}
	return res, err
}

// firstWrite is the model's next write for o in next: the first write of
// the in-flight item that names it (ok false: none).
func firstWrite(next *model.State, st model.Step) (model.Write, bool) {
	for _, f := range next.GC.InFlight {
		w := f.Writes[0]
		if w.Item.Name == st.Target.Name && w.Item.Kind == st.Target.Kind.Info().Kind && w.Item.Namespace == st.Target.Namespace {
			return w, true
		}
	}
	return model.Write{}, false
}

func writeVerb(op model.WriteOp) string {
	if op == model.WriteDelete {
		return proxy.VerbDelete
	}
	return proxy.VerbPatch
}

// owners are the real objects the owner references of st's work item
// name in prev, in their order, one per reference: the GETs
// attemptToDeleteItem's isDangling sends. A reference the absent owner
// cache answers sends none; one of a kind without a REST mapping (nobody
// serves it) or of a namespaced owner of a cluster-scoped object ends
// the pass without a request, and the references after it are not
// looked at. A node deleting its dependents sends none
// (processDeletingDependentsItem). When the worker's GET of the item's
// key finds no object with the item's UID (a virtual owner, or an object
// deleted and made again), the worker queues a virtual delete event and
// GETs nothing more: no owners, although the key may name a live object
// with references (a virtual owner named by its own dependent's key).
func (u upstreamStepped) owners(st model.Step, prev *model.State) []object {
	ns := st.Target.Namespace
	if !st.Target.Kind.Info().Namespaced {
		ns = "" // getObject drops a virtual node's borrowed namespace
	}
	obj := prev.Lookup(st.Target.Kind, ns, st.Target.Name)
	if obj == nil {
		return nil // a virtual node: no object, no references
	}
	item, ok := queuedItem(prev, st)
	if ok && item.UID != obj.UID {
		return nil
	}
	// a node deleting its dependents (foreground) is passed by
	// processDeletingDependentsItem, which looks no owner up: it queues
	// the blocking dependents, whose workers' first GETs may be of the
	// item's owners' keys, or removes the finalizer
	if ok && slices.ContainsFunc(prev.GC.Nodes, func(n model.Node) bool { return n.UID == item.UID && n.DeletingDependents }) {
		return nil
	}
	// isDangling looks owners up in the item's namespace, which a
	// virtual node of a cluster-scoped object borrows from the dependent
	// it was made from (kubernetes#124378)
	itemNS := st.Target.Namespace
	var out []object
	for _, ref := range obj.Owners {
		if absent(prev, ref, itemNS) {
			continue
		}
		kind, ok := model.KindByName(ref.Kind)
		if !ok || kind.Info().Custom {
			return out // restMappingError (no custom kind's CRD on upstream-stepped)
		}
		ns, ok := model.OwnerScope(kind, itemNS)
		if !ok {
			return out // namespacedOwnerOfClusterScopedObjectErr
		}
		if o, err := u.object(model.Step{Actor: model.ActorGC, Op: model.OpAttemptToDelete, Target: model.Target{Kind: kind, Namespace: ns, Name: ref.Name}}); err == nil {
			out = append(out, o)
		}
	}
	return out
}

// removesForegroundFinalizer reports whether st's pass, in prev, is
// processDeletingDependentsItem of a node no dependent in the graph
// blocks: it calls removeFinalizer, whose GET of the item follows the
// pass's first GET whether or not the object still has the
// foregroundDeletion finalizer (already removed, it writes nothing and
// the model's state does not change: the node stays deleting its
// dependents, and a dependent's deletion queues it again).
func removesForegroundFinalizer(prev *model.State, st model.Step) bool {
	item, ok := queuedItem(prev, st)
	if !ok {
		return false
	}
	node := func(uid model.UID) *model.Node {
		if i := slices.IndexFunc(prev.GC.Nodes, func(n model.Node) bool { return n.UID == uid }); i >= 0 {
			return &prev.GC.Nodes[i]
		}
		return nil
	}
	n := node(item.UID)
	if n == nil || !n.DeletingDependents {
		return false
	}
	// blockingDependents: a dependent whose reference to n blocks
	for _, du := range n.Dependents {
		if d := node(du); d != nil && slices.ContainsFunc(d.Owners, func(r model.OwnerRef) bool { return r.UID == n.UID && r.Block }) {
			return false
		}
	}
	return true
}

// absent reports whether the GC's absentOwnerCache in s holds the owner
// ref names, as isDangling looks it up: without a namespace, then in
// the dependent's.
func absent(s *model.State, ref model.OwnerRef, ns string) bool {
	return slices.ContainsFunc(s.GC.Absent, func(a model.Identity) bool {
		return a.UID == ref.UID && a.Kind == ref.Kind && a.Name == ref.Name && (a.Namespace == "" || a.Namespace == ns)
	})
}

// queuedItem is the work item st passes in prev's attemptToDelete queue:
// the one of its key, or of its key and uid= when it names one (ok
// false: none is queued).
func queuedItem(prev *model.State, st model.Step) (model.Identity, bool) {
	for _, id := range prev.GC.AttemptToDelete {
		if st.UIDLabel != "" && prev.UIDLabel(id.UID) != st.UIDLabel {
			continue
		}
		// a virtual owner of a cluster-scoped kind carries its
		// dependent's namespace, as the step does
		if id.Kind == st.Target.Kind.Info().Kind && id.Namespace == st.Target.Namespace && id.Name == st.Target.Name {
			return id, true
		}
	}
	return model.Identity{}, false
}

// itemUID is the real UID of the work item st passes, as prev's
// attemptToDelete queue holds it ("": none queued).
func (u upstreamStepped) itemUID(prev *model.State, st model.Step) string {
	item, ok := queuedItem(prev, st)
	if !ok {
		return ""
	}
	return u.d.RealUID(prev.UIDLabel(item.UID))
}

// attemptToDelete releases the held first GET of the pass of o's work
// item of real UID uid ("": any item of o's key) and lets through, while
// the step lasts, the GETs of o's owners (isDangling) and no other:
// another item's worker retrying on its back-off timer sends its first
// GET whenever the timer fires, and that GET waits for the item's own
// step. Another item of o's key may hold its first GET too: a virtual
// node of o's coordinates with another UID, which an idle worker took
// before the graph replaced it with the observed object elsewhere (the
// model's queue then holds no such item: its pass would do nothing), and
// whose pass the final settle releases.
func (u upstreamStepped) attemptToDelete(ctx context.Context, o object, uid string, owners []object, prev, next *model.State) error {
	get, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool { return r.Verb == proxy.VerbGet && o.is(r) && u.passGET(r, uid) })
	if err != nil {
		return err
	}
	if !ok {
		why := ""
		if u.ambiguous(o) {
			why = "; the first GETs of passes of two items of its key, held, cannot be told apart"
		}
		return &proxy.Divergence{Expected: "a GC worker's GET of " + o.String(), Observed: "none within " + StepBound.String() + held(u.st) + why}
	}
	before := u.st.HeldIDs()
	immediate := !slices.Equal(prev.Dump(), next.Dump())
	w := &proxy.Window{Admits: attemptWindow(o, owners, immediate, u.otherGET)}
	u.st.Open(w)
	defer u.st.CloseWindow()
	if _, err := u.st.Release(ctx, StepBound, get.ID); err != nil {
		return err
	}
	want, writes := inFlightFor(prev, next)
	switch {
	case writes:
		// held writes of o from before the step are another worker's
		// (attemptToOrphan's PATCH of a dependent)
		w, ok, err := u.st.WaitRequest(ctx, StepBound, func(r proxy.Request) bool {
			return r.Verb == writeVerb(want.Op) && o.is(r) && !slices.Contains(before, r.ID)
		})
		if err != nil {
			return err
		}
		if !ok {
			return &proxy.Divergence{Expected: fmt.Sprintf("the GC's %s of %s, held", strings.ToUpper(writeVerb(want.Op)), o), Observed: "none within " + StepBound.String() + held(u.st)}
		}
		u.decided[o.String()] = w.ID
		return nil
	case immediate:
		// the foregroundDeletion finalizer's removal
		ok, err := u.st.AwaitAdmitted(ctx, StepBound, func(admitted []proxy.Request) bool {
			return slices.ContainsFunc(admitted, func(r proxy.Request) bool { return isWrite(r) && o.is(r) && r.Code != 0 })
		})
		if err != nil {
			return err
		}
		if !ok {
			return &proxy.Divergence{Expected: "the GC's write of " + o.String() + " (the state the model reaches: " + strings.Join(next.Dump(), "; ") + ")", Observed: "none answered within " + StepBound.String() + held(u.st)}
		}
	}
	if _, err := u.st.Quiet(ctx, QuietWindow, StepBound); err != nil {
		return err
	}
	if r, ok, _ := u.st.WaitRequest(ctx, 0, func(r proxy.Request) bool { return isWrite(r) && o.is(r) && !slices.Contains(before, r.ID) }); ok {
		return &proxy.Divergence{Expected: "no write of " + o.String(), Observed: proxy.DescribeRequest(r) + " held"}
	}
	return nil
}

// attemptWindow admits, while o's attemptToDelete step lasts, each GET
// of an owner of o's once (owners has one entry per GET the pass sends),
// and o's requests when the step changes o at once (the
// foregroundDeletion finalizer's removal), but no GET other does not
// accept: the first GET of another item's pass (kcmPasses), which may
// be of an owner's key (its own pass, begun when the owner was queued,
// while o's worker looks it up) or of o's (its next pass, queued again).
// Admitting a GET of an owner's key more often would let through the
// first GET of the item's next pass when o names itself as owner: the
// real GC retries a requeued item after 5 ms, doubling.
func attemptWindow(o object, owners []object, immediate bool, other func(proxy.Request) bool) func(proxy.Request) bool {
	left := slices.Clone(owners)
	return func(r proxy.Request) bool {
		if r.Verb == proxy.VerbGet && other != nil && !other(r) {
			return false
		}
		if immediate && o.is(r) {
			return true
		}
		if r.Verb != proxy.VerbGet {
			return false
		}
		i := slices.IndexFunc(left, func(ow object) bool { return ow.is(r) })
		if i < 0 {
			return false
		}
		left = slices.Delete(left, i, i+1)
		return true
	}
}

// inFlightFor is the write the step put in flight: the first write of an
// item in flight in next and not in prev.
func inFlightFor(prev, next *model.State) (model.Write, bool) {
	for _, f := range next.GC.InFlight {
		if !slices.ContainsFunc(prev.GC.InFlight, func(p model.InFlight) bool { return p.UID == f.UID }) {
			return f.Writes[0], true
		}
	}
	return model.Write{}, false
}

func held(s *proxy.Stepper) string {
	h := s.HeldRequests()
	if len(h) == 0 {
		return " (no GC request held)"
	}
	return " (held: " + strings.Join(h, "; ") + ")"
}

func (u upstreamStepped) send(ctx context.Context, st model.Step, o object, next *model.State, want model.Result) (model.Result, error) {
	verb := writeVerb(st.Write)
	mine := func(r proxy.Request) bool { return r.Verb == verb && o.is(r) }
	if id, ok := u.decided[o.String()]; ok {
		mine = func(r proxy.Request) bool { return r.ID == id }
	}
	delete(u.decided, o.String())
	r, ok, err := u.st.WaitRequest(ctx, StepBound, mine)
	if err != nil {
		return model.Result{}, err
	}
	if !ok {
		return model.Result{}, &proxy.Divergence{Expected: fmt.Sprintf("the GC's %s of %s, held", strings.ToUpper(verb), o), Observed: "none within " + StepBound.String() + held(u.st)}
	}
	// deleteObject answers a 409 to its DELETE with a GET of the item
	// and, when its ownerReferences did not change, a DELETE without the
	// resourceVersion precondition (kubernetes#132632), all within the
	// one write the model sends: let the GET through, and that DELETE
	// when the model's send succeeded
	// when the answer is a 409 (only then: a DELETE that succeeds ends
	// the pass, and the first GET of the item's next pass, queued again
	// meanwhile, waits for its own step)
	retry := verb == proxy.VerbDelete
	since := time.Now()
	a, err := u.st.Release(ctx, StepBound, r.ID)
	if err != nil {
		return model.Result{}, err
	}
	if a.Err != "" {
		return model.Result{}, fmt.Errorf("the GC's %s failed on its way: %s", proxy.DescribeRequest(a), a.Err)
	}
	if retry && a.Code == 409 {
		gets := 0
		admits := func(q proxy.Request) bool {
			switch {
			case q.Verb == proxy.VerbGet && o.is(q) && gets == 0 && u.otherGET(q):
				gets++
				return true
			case q.Verb == proxy.VerbDelete && o.is(q) && want.OK():
				return true
			}
			return false
		}
		u.st.Open(&proxy.Window{Admits: admits})
		defer u.st.CloseWindow()
		// what the GC sent between the answer and the window's opening
		// waits held
		u.st.ReleaseAll(func(q proxy.Request) bool { return q.ID > r.ID && admits(q) })
		if _, ok, err := u.st.AwaitAnswer(ctx, StepBound, since, func(q proxy.Request) bool { return q.Verb == proxy.VerbGet && o.is(q) }); err != nil || !ok {
			return model.Result{}, errors.Join(err, &proxy.Divergence{Expected: "after the 409, the GC's GET of " + o.String(), Observed: "none answered within " + StepBound.String() + held(u.st)})
		}
		if want.OK() {
			second, ok, err := u.st.AwaitAnswer(ctx, StepBound, since, func(q proxy.Request) bool { return q.Verb == proxy.VerbDelete && o.is(q) && q.ID != r.ID })
			if err != nil {
				return model.Result{}, err
			}
			if !ok {
				return model.Result{}, &proxy.Divergence{Expected: "after the 409, the GC's DELETE of " + o.String() + " without the resourceVersion precondition", Observed: "none answered within " + StepBound.String() + held(u.st)}
			}
			a = second
		}
	}
	// a further write of the model's for the item (an unblock before a
	// delete) comes without a step between: wait for it to be held
	if nextWrite, more := firstWrite(next, st); more {
		w, ok, err := u.st.WaitRequest(ctx, StepBound, func(q proxy.Request) bool {
			return q.Verb == writeVerb(nextWrite.Op) && o.is(q) && q.ID > r.ID && !u.decided.held(q)
		})
		if err != nil || !ok {
			return model.Result{}, errors.Join(err, &proxy.Divergence{Expected: fmt.Sprintf("the GC's next %s of %s, held", strings.ToUpper(writeVerb(nextWrite.Op)), o), Observed: "none within " + StepBound.String() + held(u.st)})
		}
		u.decided[o.String()] = w.ID
	}
	if a.Code/100 == 2 {
		return model.Result{Code: 200}, nil
	}
	return model.Result{Code: a.Code, Reason: a.Reason}, nil
}

// orphanUID is the real UID of the owner st's orphan worker passes: its
// item's in prev's attemptToOrphan queue, else its object's.
func (u upstreamStepped) orphanUID(prev *model.State, st model.Step) string {
	for _, id := range prev.GC.AttemptToOrphan {
		if id.Kind == st.Target.Kind.Info().Kind && id.Namespace == st.Target.Namespace && id.Name == st.Target.Name {
			return u.d.RealUID(prev.UIDLabel(id.UID))
		}
	}
	ns := st.Target.Namespace
	if !st.Target.Kind.Info().Namespaced {
		ns = ""
	}
	if obj := prev.Lookup(st.Target.Kind, ns, st.Target.Name); obj != nil {
		return u.d.RealUID(prev.UIDLabel(obj.UID))
	}
	return ""
}

// orphanFinalizer reports whether the object of st's key has the orphan
// finalizer in prev: what the orphan worker's removeFinalizer GET finds.
func orphanFinalizer(prev *model.State, st model.Step) bool {
	ns := st.Target.Namespace
	if !st.Target.Kind.Info().Namespaced {
		ns = ""
	}
	obj := prev.Lookup(st.Target.Kind, ns, st.Target.Name)
	return obj != nil && slices.Contains(obj.Finalizers, model.FinalizerOrphan)
}

// attemptToOrphan lets the requests of o's orphan worker's pass
// through (orphanPass): those it sent when the owner's deletion reached
// the graph builder and the proxy holds (its PATCHes of dependents, and
// its requests about the owner), and those it sends now, until
// removeFinalizer ends the pass: its write of the owner, the orphan
// finalizer's removal, answered, or its GET of the owner answered 404,
// or, when the owner has no orphan finalizer left (finalizer false: a
// later delete switched it to foregroundDeletion), answered at all
// ("finalizer already removed", no write). Another owner's orphan
// worker, waiting on its PATCH of a dependent, stays held: its pass is
// another step's.
func (u upstreamStepped) attemptToOrphan(ctx context.Context, o object, ownerUID string, finalizer bool) error {
	since := time.Now()
	mine := orphanPass(o, ownerUID, u.decided.held, u.otherGET)
	u.st.Open(&proxy.Window{Admits: mine})
	defer u.st.CloseWindow()
	u.st.ReleaseAll(func(r proxy.Request) bool { return proxy.GCHeld(&r) && mine(r) })
	// removeFinalizer ends the item: its write of the owner, or its GET
	// finding the owner gone, or the finalizer gone
	_, ok, err := u.st.AwaitAnswer(ctx, StepBound, since, func(r proxy.Request) bool {
		return o.is(r) && (isWrite(r) && !u.decided.held(r) && !removesOther(r, ownerUID) || r.Verb == proxy.VerbGet && u.otherGET(r) && (r.Code == 404 || !finalizer && r.Code != 0))
	})
	if err != nil {
		return err
	}
	if !ok {
		return &proxy.Divergence{Expected: "the GC's write of " + o.String() + " removing the orphan finalizer (or its GET finding it gone)", Observed: "none answered within " + StepBound.String() + held(u.st)}
	}
	_, err = u.st.Quiet(ctx, QuietWindow, StepBound)
	return err
}

// removesOther reports whether r, a PATCH, deletes owner references and
// none to the owner of UID ownerUID: another orphan worker's PATCH of a
// dependent of its owner (or an attemptToDelete worker's removing
// dangling references).
func removesOther(r proxy.Request, ownerUID string) bool {
	return len(r.RemovedOwners) > 0 && !slices.Contains(r.RemovedOwners, ownerUID)
}

// orphanPass reports whether a GC request is one of a pass of o's orphan
// worker (attemptToOrphanWorker), whose owner has the real UID ownerUID:
// orphanDependents' PATCH of each dependent deleting its reference to
// ownerUID (deleteOwnerRefStrategicMergePatch; the proxy reads the body,
// proxy.Request.RemovedOwners) and, for a dependent whose kind takes no
// strategic merge patch (a custom resource), the GET and JSON merge
// PATCH that follow that PATCH's 415; then removeFinalizer's GET of o and
// its PATCH of o's finalizers. Not one: the first GET of an
// attemptToDelete pass (other false), which waits for its own step; a
// write an attemptToDelete step decided (decided), held for its `gc
// delete|patch|unblock`; and another orphan worker's PATCH of a dependent
// of its own owner, o included (a reference to another owner deleted).
// It is stateful: a dependent's GET and merge PATCH are its after its
// strategic merge PATCH was accepted.
func orphanPass(o object, ownerUID string, decided, other func(proxy.Request) bool) func(proxy.Request) bool {
	var patched []object
	return func(r proxy.Request) bool {
		if decided(r) || r.Verb == proxy.VerbGet && !other(r) {
			return false
		}
		target := object{group: r.Group, resource: r.Resource, ns: r.Namespace, name: r.Name}
		switch {
		case r.Verb == proxy.VerbPatch && slices.Contains(r.RemovedOwners, ownerUID):
			patched = append(patched, target)
			return true
		case r.Verb == proxy.VerbPatch && len(r.RemovedOwners) > 0:
			return false
		case r.Verb != proxy.VerbGet && r.Verb != proxy.VerbPatch:
			return false
		case o.names(r):
			return true
		}
		return slices.Contains(patched, target)
	}
}

// upstreamSteppedSkip says why a trace cannot run on upstream-stepped: it
// runs the traces written for upstream or for impl (whose stepped traces
// describe upstream's GC) that take GC steps, need no bug, and take no
// step UnsteppableOps names.
func upstreamSteppedSkip(tr *traces.Trace) string {
	if !replay.Runnable(tr, Upstream) && !replay.Runnable(tr, Impl) && !replay.Runnable(tr, UpstreamStepped) {
		return fmt.Sprintf("its targets header (%s) names neither upstream nor impl", tr.Header(traces.HeaderTargets))
	}
	if bs, err := implBugs(tr); err != nil {
		return err.Error()
	} else if len(bs) > 0 {
		return fmt.Sprintf("it needs bug %s, which only the model and impl can switch on", bs)
	}
	if !NeedsSteps(tr) {
		return "it takes no GC step: it runs on upstream"
	}
	if why := unsteppable(tr); why != "" {
		return why
	}
	if why := scalesPods(tr); why != "" {
		return why
	}
	return syncAfterUnmappedItem(tr)
}

// usesCustomKinds: the trace names a CRD or a custom resource, so the
// GC's discovery syncs may have started monitors the model's next trace
// does not have.
func usesCustomKinds(tr *traces.Trace) bool {
	custom := func(k model.KindID) bool {
		return k != model.NoKind && (k.Info().Custom || k.Info().Short == "crd")
	}
	return anyCommand(tr, func(c traces.Command) bool {
		return !c.Settle && (custom(c.Step.Target.Kind) || (c.Step.By.Name != "" && custom(c.Step.By.Kind)))
	})
}

// holdFor starts holding the traffic about d's objects once the proxy is
// idle (the namespaces the driver made before the trace are behind the
// GC, as the model has no events for them).
func (t *Target) holdFor(ctx context.Context, d *driver.Driver) (upstreamStepped, error) {
	settle := proxyQuiet{p: t.Proxy, then: replay.DefaultQuiet}
	t.stepper.Hold(false)
	if err := settle.Settle(ctx, d); err != nil {
		return upstreamStepped{}, err
	}
	// the model starts with no monitor of a custom kind: after a trace
	// that made CRDs, let the GC's next discovery sync stop the monitors
	// of those its cleanup deleted
	if t.customUsed {
		if ok, err := t.stepper.AwaitDiscovery(ctx, SyncBound); err != nil {
			return upstreamStepped{}, err
		} else if !ok {
			return upstreamStepped{}, fmt.Errorf("the GC sent no discovery request within %s (its sync runs every 30 s)", SyncBound)
		}
		t.customUsed = false
	}
	t.stepper.SetScope(inScope(d.Prefix()))
	u := upstreamStepped{st: t.stepper, proxy: t.Proxy, d: d, decided: decided{}, passes: t.kcmPasses}
	u.hold()
	return u, nil
}
