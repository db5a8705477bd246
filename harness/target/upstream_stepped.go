package target

import (
	"context"
	"errors"
	"fmt"
	"path"
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
//	gc deliver-virtual KEY  waits for the graph builder's log line of
//	                        KEY's virtual delete event (kcmVirtuals),
//	                        which the worker step just before queued
//	                        (unsteppable), then waits DeliverPause
//	apiextensions cleanup CRD
//	                        waits for the CRD to go and discovery to drop
//	                        its resource: kube-apiserver began the cleanup
//	                        at the DELETE just before (unsteppable)
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
	"gc lose": "it is the lost-first-update bug of client-go's informer, which the real binary does not have switched on",
}

// deliverVirtualWhy is why a `gc deliver-virtual` can be produced only
// right after the worker step of its key that queued the event.
const deliverVirtualWhy = "a virtual delete event goes from an attemptToDelete worker to the graph builder inside the GC's process (enqueueVirtualDeleteEvent), with no IO the proxy could hold, and the graph builder takes it at once: " +
	"only a deliver-virtual right after the worker step of its key that queued it (client requests at most between) is what the real GC does"

// cleanupWhy is why an `apiextensions cleanup` can be produced only
// right after the CRD's DELETE.
const cleanupWhy = "a CRD's cleanup is kube-apiextensions-apiserver's, inside kube-apiserver, behind no proxy, and it begins as soon as the CRD's DELETE is answered: " +
	"only a cleanup right after the client's DELETE of its CRD is what the real API server does"

// unsteppable names the first step of tr upstream-stepped cannot produce,
// with why ("" when there is none).
//
// An `apiextensions cleanup crd/X` is producible only right after the
// client's `delete crd/X`, in the same stanza, nothing between:
// kube-apiserver begins the cleanup by itself as soon as the DELETE is
// answered, and the step waits for it to end (the CRD gone, discovery
// without its resource), as on impl-stepped. The GC's watch events of
// the cleanup stay held for the trace's `gc deliver` steps. That the
// DELETE began the CRD's deletion, and that the cleanup removes it, is
// the model's to say (causedByStepBefore).
//
// A `gc deliver-virtual KEY` is producible only right after a worker step
// of KEY (`gc attemptToDelete KEY`, or `gc delete KEY` answered 404),
// with client requests at most between: the real graph
// builder takes the virtual delete event as soon as the worker queues
// it, before any later step, and the step waits for its log line
// (deliverVirtual). Client requests between commute with it: their
// watch events are held. That the worker step queued that event is the
// model's to say (causedByStepBefore). A deliver-virtual alone
// (lockstep asks of one step at a time) is not producible here: lockstep
// takes it right after the step that queued it, as the model offers it
// (upstreamSystem.eager).
func unsteppable(tr *traces.Trace) string {
	var last *traces.Command // the last command that is not a client request
	for _, st := range tr.Stanzas {
		// a stanza's dump is read before the next stanza begins, and the
		// real cleanup, begun at the DELETE, changes what it reads: a
		// cleanup first in its stanza is not the DELETE's at once (a
		// virtual delete event changes nothing a dump reads)
		var before *traces.Command // the command before c
		for i := range st.Commands {
			c := &st.Commands[i]
			justBefore := before
			before = c
			if c.Step.Actor == model.ActorAPIExtensions && !c.Settle {
				if p := justBefore; p == nil || p.Settle || p.Step.Actor != model.ActorClient || p.Step.Op != model.OpDelete || p.Step.Target != c.Step.Target {
					after := "it comes first"
					if p != nil {
						after = fmt.Sprintf("it follows %q", p.Text)
					}
					return fmt.Sprintf("its step %q cannot be produced through the API proxy: %s; %s", c.Text, cleanupWhy, after)
				}
				last = c
				continue
			}
			if c.Settle || c.Step.Actor == model.ActorClient {
				if c.Settle {
					last = c
				}
				continue
			}
			prev := last
			last = c
			if c.Step.Op == model.OpDeliverVirtual {
				if prev == nil || prev.Settle || (prev.Step.Op != model.OpAttemptToDelete && prev.Step.Op != model.OpSend) || prev.Step.Target != c.Step.Target {
					after := "it comes first"
					if prev != nil {
						after = fmt.Sprintf("it follows %q", prev.Text)
					}
					return fmt.Sprintf("its step %q cannot be produced through the API proxy: %s; %s", c.Text, deliverVirtualWhy, after)
				}
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
	// virtuals are the virtual delete events the GC's graph builder took
	// since the trace's hold began (nil: unknown)
	virtuals *kcmVirtuals
}

// passGET reports whether r, a GET, may be the first GET of a pass of
// its object's work item whose real UID is uid ("": any) and whose
// identity names real namespace ns: the one an attemptToDelete step
// releases. Not one the log cannot attribute to a single item
// (kcmPasses.Ambiguous).
func (u upstreamStepped) passGET(r proxy.Request, uid, ns string) bool {
	if u.passes == nil {
		return true
	}
	item, itemNS := u.passes.Identity(r)
	return item != "" && (uid == "" || item == uid && itemNS == ns) && !u.passes.Ambiguous(r)
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
	if u.virtuals != nil {
		u.virtuals.Reset()
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

// identityNS is the real namespace st's GC identity names: for a
// cluster-scoped kind the one a virtual node borrowed ("" for the
// observed object), which its object leaves out.
func (u upstreamStepped) identityNS(st model.Step) string {
	line, err := u.d.RealLine(st.String())
	if err != nil {
		return ""
	}
	if parts := strings.Split(strings.Fields(line)[2], "/"); len(parts) == 3 {
		return parts[1]
	}
	return ""
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
	// a deliver-virtual and a CRD's cleanup are producible after the
	// step that begins them, which the whole trace's check
	// (upstreamSteppedSkip) looked at
	if why := unsteppable(&traces.Trace{Stanzas: []traces.Stanza{{Commands: []traces.Command{{Text: st.String(), Step: st}}}}}); why != "" && st.Op != model.OpDeliverVirtual && st.Actor != model.ActorAPIExtensions {
		return model.Result{}, errors.New(why)
	}
	if st.Actor == model.ActorAPIExtensions {
		// kube-apiserver cleans the deleted CRD up by itself, begun at
		// the DELETE just before (unsteppable): wait for the CRD to go
		// and for discovery to drop its resource, so that a later `gc
		// sync` reads what the model's does
		if err := u.d.WaitCRDGone(ctx, st.Target.Name); err != nil {
			return model.Result{}, err
		}
		return model.Result{Code: 200}, nil
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
		u.virtualsFrom()
		gets := u.owners(st, prev)
		if removesForegroundFinalizer(prev, st) {
			gets = append(gets, o) // removeFinalizer's GET of the item
		}
		err = u.attemptToDelete(ctx, o, u.itemUID(prev, st), u.identityNS(st), gets, prev, next)
		res = model.Result{Code: 200}
	case model.OpDeliverVirtual:
		err = u.deliverVirtual(ctx, st, o, prev)
		if err == nil {
			time.Sleep(DeliverPause)
		}
		res = model.Result{Code: 200}
	case model.OpSend:
		u.virtualsFrom()
		res, err = u.send(ctx, st, o, next, want)
	case model.OpAttemptToOrphan:
		err = u.attemptToOrphan(ctx, o, u.orphanUID(prev, st), u.orphanDependents(prev, st), orphanFinalizer(prev, st))
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

// virtualsFrom forgets the virtual delete events logged so far, at a
// worker step: a deliver-virtual right after it (unsteppable) then
// counts only an event logged from the step on.
func (u upstreamStepped) virtualsFrom() {
	if u.virtuals != nil {
		u.virtuals.Reset()
	}
}

// deliverVirtual waits for kube-controller-manager's graph builder to
// take the virtual delete event st delivers, as its log line shows it
// (kcmVirtuals): the worker step that queued the event came just before
// (unsteppable), and the graph builder takes it at once, so the line is
// there or soon will be. The event is the model's head virtual event of
// st's key in prev; the line must name its kind, namespace (the
// identity's, which a virtual node of a cluster-scoped kind borrows),
// name and, where the run made it, its real UID.
func (u upstreamStepped) deliverVirtual(ctx context.Context, st model.Step, o object, prev *model.State) error {
	if u.virtuals == nil {
		return errors.New("upstream-stepped follows no kube-controller-manager log: it cannot see the GC take a virtual delete event")
	}
	ns := o.ns
	if idNS := u.identityNS(st); idNS != "" {
		ns = idNS
	}
	kind := st.Target.Kind.Info().Kind
	uid := ""
	for _, id := range prev.GC.VirtualEvents {
		if id.Kind == kind && id.Namespace == st.Target.Namespace && id.Name == st.Target.Name {
			uid = u.d.RealUID(prev.UIDLabel(id.UID))
			break
		}
	}
	match := func(ev virtualEvent) bool {
		return ev.kind == kind && ev.ns == ns && ev.name == o.name && (uid == "" || ev.uid == uid)
	}
	want := fmt.Sprintf("the GC's graph builder taking the virtual delete event of %s %s", kind, path.Join(ns, o.name))
	if uid != "" {
		want += " (uid " + uid + ")"
	}
	deadline := time.Now().Add(StepBound)
	for {
		if _, ok := u.virtuals.take(match); ok {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &proxy.Divergence{Expected: want + ", as kube-controller-manager's log shows it", Observed: "no such line within " + StepBound.String() + held(u.st)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
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
	// deleteObject's GET comes after the 409; a GET of the object held
	// before the answer is another worker's (the orphan worker's
	// removeFinalizer GET, the same request at the proxy)
	heldBefore := u.st.HeldIDs()
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
		u.st.ReleaseAll(func(q proxy.Request) bool { return q.ID > r.ID && !slices.Contains(heldBefore, q.ID) && admits(q) })
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
	if why := causedByStepBefore(tr); why != "" {
		return why
	}
	if why := monitorRestarted(tr); why != "" {
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
	u := upstreamStepped{st: t.stepper, proxy: t.Proxy, d: d, decided: decided{}, passes: t.kcmPasses, virtuals: t.kcmVirtuals}
	u.hold()
	return u, nil
}
