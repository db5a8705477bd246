package history_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/lin"
	"github.com/cascade-k8s/cascade/model"
)

// observerRun is a hand-built kubeconfig run: a client creates an rc,
// the replication controller writes its status (seen only by watch), and
// a client patches the rc.
type observerRun struct {
	t0     time.Time
	rc     history.Object // the rc as created, at rv 615
	status history.Object // after the controller's status write, rv 616
}

func newObserverRun(t *testing.T) observerRun {
	rc, ok := model.KindByShort("rc")
	if !ok {
		t.Fatal("no kind rc")
	}
	o := history.Object{Kind: rc, Namespace: "obs-default", Name: "c", UID: "u-rc", RV: 615, Replicas: 1,
		Labels: map[string]string{"app": "web"}}
	st := o
	st.RV = 616 // status.replicas and observedGeneration changed: nothing the history decodes
	return observerRun{t0: time.Unix(1000, 0), rc: o, status: st}
}

func (r observerRun) at(ms int) int64 {
	return r.t0.Add(time.Duration(ms) * time.Millisecond).UnixNano()
}

func (r observerRun) create() history.Op {
	got := r.rc
	return history.Op{Actor: "client-3", Verb: history.Create, Kind: r.rc.Kind, Namespace: r.rc.Namespace, Name: r.rc.Name,
		Sent: &history.Object{Kind: r.rc.Kind, Namespace: r.rc.Namespace, Name: r.rc.Name, Replicas: 1},
		Code: 201, Got: &got, Call: r.at(10), Return: r.at(20)}
}

// patch is a client's merge patch carrying the precondition pre and
// answered with the object at got.
func (r observerRun) patch(pre uint64, got history.Object, call, ret int) history.Op {
	return history.Op{Actor: "client-1", Verb: history.Patch, Kind: r.rc.Kind, Namespace: r.rc.Namespace, Name: r.rc.Name,
		Sent: &history.Object{RV: pre, Replicas: -1}, PatchType: "application/merge-patch+json",
		Code: 200, Got: &got, Call: r.at(call), Return: r.at(ret)}
}

// TestObserverNoOpAnswerIsNoWrite pins what fuzzing the kubeconfig target
// found (seed 4): a client read the rc at the controller's revision 616
// and sent a patch that changed nothing (unlabel of a label the rc did
// not have) with 616 as its precondition; the API server wrote nothing
// and answered the live object at 616. The observer took that answer for
// the write of 616 and dropped the controller's, and the checker then
// found the patch's precondition failed on rv 615. A write never keeps
// the revision it was checked against, so the patch did not write 616:
// the controller's write must stay, with the patch's Return as the
// latest instant it can have happened at.
func TestObserverNoOpAnswerIsNoWrite(t *testing.T) {
	r := newObserverRun(t)
	o := history.NewObserverAt(r.t0)
	o.See(&r.rc, false, r.at(25))
	o.See(&r.status, false, r.at(60)) // the watch lags behind the client's read
	recorded := history.Merge([]history.Op{r.create(), r.patch(616, r.status, 40, 45)})

	observed := o.Ops(recorded)
	if len(observed) != 1 {
		t.Fatalf("want the controller's write of rv 616 observed, got %d ops: %+v", len(observed), observed)
	}
	w := observed[0]
	if w.Verb != history.Observed || w.Got.RV != 616 || w.Call != r.at(10) || w.Return != r.at(45) {
		t.Errorf("observed %s at rv %d in [%d, %d], want rv 616 in [create's Call %d, the patch's Return %d]",
			w.String(), w.Got.RV, w.Call, w.Return, r.at(10), r.at(45))
	}
	if res := lin.Check(history.Merge(recorded, observed), lin.Options{}); res.Verdict != "Ok" {
		t.Errorf("%s", res.Summary)
	}
}

// TestObserverAnswerExplainsItsWrite: a patch whose answer is a new
// revision wrote it; its watch event is no other write. An answer that
// cannot have written its revision, because the revision existed before
// the answer's request was sent, leaves the event to another actor.
func TestObserverAnswerExplainsItsWrite(t *testing.T) {
	r := newObserverRun(t)
	labeled := r.status
	labeled.Labels = map[string]string{"app": "web", "tier": "x"}

	o := history.NewObserverAt(r.t0)
	o.See(&r.rc, false, r.at(25))
	o.See(&labeled, false, r.at(60))
	recorded := history.Merge([]history.Op{r.create(), r.patch(615, labeled, 40, 45)})
	if observed := o.Ops(recorded); len(observed) != 0 {
		t.Errorf("the patch wrote rv 616; want no observed op, got %+v", observed)
	}

	// The same answer without a precondition, from a patch sent after the
	// watch had delivered rv 616: the revision is older than the patch.
	o = history.NewObserverAt(r.t0)
	o.See(&r.rc, false, r.at(25))
	o.See(&r.status, false, r.at(30))
	noop := r.patch(0, r.status, 40, 45)
	noop.Sent = &history.Object{Replicas: -1}
	recorded = history.Merge([]history.Op{r.create(), noop})
	observed := o.Ops(recorded)
	if len(observed) != 1 || observed[0].Got.RV != 616 || observed[0].Return != r.at(30) {
		t.Fatalf("want the write of rv 616 observed by [.., %d], got %+v", r.at(30), observed)
	}
	if res := lin.Check(history.Merge(recorded, observed), lin.Options{}); res.Verdict != "Ok" {
		t.Errorf("%s", res.Summary)
	}
}

// TestObserverLowerBoundFromAnswers: every answer at a revision saw it
// live after its Call, so the next write of the object came after that
// Call, even when the answer wrote nothing.
func TestObserverLowerBoundFromAnswers(t *testing.T) {
	r := newObserverRun(t)
	next := r.status
	next.RV = 617
	o := history.NewObserverAt(r.t0)
	o.See(&r.rc, false, r.at(25))
	o.See(&r.status, false, r.at(35))
	o.See(&next, false, r.at(80))
	recorded := history.Merge([]history.Op{r.create(), r.patch(616, r.status, 40, 45)})
	observed := o.Ops(recorded)
	if len(observed) != 2 {
		t.Fatalf("want rv 616 and 617 observed, got %+v", observed)
	}
	if w := observed[1]; w.Got.RV != 617 || w.Call != r.at(40) || w.Return != r.at(80) {
		t.Errorf("observed rv %d in [%d, %d], want rv 617 in [the no-op patch's Call %d, %d]", w.Got.RV, w.Call, w.Return, r.at(40), r.at(80))
	}
	if res := lin.Check(history.Merge(recorded, observed), lin.Options{}); res.Verdict != "Ok" {
		t.Errorf("%s", res.Summary)
	}
}

// TestObserverDeleteAnsweredAtItsRemoval pins the second false alarm
// fuzzing the kubeconfig target found (seed 58): a client's DELETE
// (propagation Orphan) put the orphan finalizer on a PV, and another
// client's DELETE, which had read it bare, removed it at once
// (kubernetes#77988), answering the version it removed (being deleted,
// orphan finalizer on) at the deletion's revision. That answer alone
// looks like a DELETE that kept the object, so the watch's DELETED event
// at the same revision stood as a second removal. The event shows the
// DELETE removed the object: marked so, the history is linearizable
// through the known race, as on the audit path.
func TestObserverDeleteAnsweredAtItsRemoval(t *testing.T) {
	pv, ok := model.KindByShort("pv")
	if !ok {
		t.Fatal("no kind pv")
	}
	t0 := time.Unix(2000, 0)
	at := func(ms int) int64 { return t0.Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	bare := history.Object{Kind: pv, Name: "obs-a", UID: "u-pv", RV: 5274, Replicas: -1}
	orphaning := bare
	orphaning.RV, orphaning.Deleting, orphaning.Finalizers = 5276, true, []string{model.FinalizerOrphan}
	removed := orphaning
	removed.RV = 5277
	op := func(actor string, verb history.Verb, got history.Object, call, ret int) history.Op {
		return history.Op{Actor: actor, Verb: verb, Kind: pv, Name: bare.Name, Code: 200, Got: &got, Call: at(call), Return: at(ret)}
	}
	create := op("client-1", history.Create, bare, 10, 20)
	create.Code, create.Sent = 201, &history.Object{Kind: pv, Name: bare.Name, Replicas: -1}
	orphan := op("client-0", history.Delete, orphaning, 15, 40)
	orphan.Delete = &history.DeleteOptions{Propagation: "Orphan"}
	racing := op("client-1", history.Delete, removed, 25, 45) // sent before the orphan DELETE returned
	racing.Delete = &history.DeleteOptions{}

	o := history.NewObserverAt(t0)
	o.See(&bare, false, at(22))
	o.See(&orphaning, false, at(38))
	o.See(&removed, true, at(44))
	recorded := history.Merge([]history.Op{create, orphan, racing})
	observed := o.Ops(recorded)
	if len(observed) != 0 {
		t.Errorf("want the removal explained by the DELETE answered at its revision, got observed %+v", observed)
	}
	var marked bool
	for _, op := range recorded {
		if op.Got.RV == removed.RV {
			marked = op.Removed
		}
	}
	if !marked {
		t.Errorf("the DELETE answered at the deletion's revision is not marked Removed")
	}
	res := lin.Check(history.Merge(recorded, observed), lin.Options{})
	if res.Verdict != "Ok" || len(res.Known) != 1 || res.Known[0].Issue != "kubernetes#77988" {
		t.Errorf("want Ok through kubernetes#77988, got %s", res.Summary)
	}
}

// podRun is the third false alarm fuzzing the kubeconfig target found
// (seed 77): a Pod with a finalizer of its own is deleted in foreground,
// the GC removes foregroundDeletion (seen only by watch), and a second
// DELETE without options, a no-op on a Pod being deleted, is answered
// the GC's revision before the watch delivers it.
type podRun struct {
	at                       func(ms int) int64
	created, fg, gcDone      history.Object
	create, fgDelete, second history.Op
}

func newPodRun(t *testing.T) podRun {
	pod, ok := model.KindByShort("pod")
	if !ok {
		t.Fatal("no kind pod")
	}
	t0 := time.Unix(3000, 0)
	r := podRun{at: func(ms int) int64 { return t0.Add(time.Duration(ms) * time.Millisecond).UnixNano() }}
	r.created = history.Object{Kind: pod, Namespace: "obs-ns2", Name: "b", UID: "u-pod", RV: 6860, Replicas: -1,
		Finalizers: []string{"cascade.dev/hold"}}
	r.fg = r.created
	r.fg.RV, r.fg.Deleting, r.fg.Finalizers = 6861, true, []string{"cascade.dev/hold", model.FinalizerForeground}
	r.gcDone = r.fg
	r.gcDone.RV, r.gcDone.Finalizers = 6862, []string{"cascade.dev/hold"}
	op := func(actor string, verb history.Verb, got history.Object, call, ret int) history.Op {
		return history.Op{Actor: actor, Verb: verb, Kind: pod, Namespace: r.created.Namespace, Name: r.created.Name,
			Code: 200, Got: &got, Call: r.at(call), Return: r.at(ret)}
	}
	r.create = op("client-1", history.Create, r.created, 10, 20)
	r.create.Code, r.create.Sent = 201, &history.Object{Kind: pod, Namespace: r.created.Namespace, Name: r.created.Name,
		Finalizers: r.created.Finalizers, Replicas: -1}
	r.fgDelete = op("client-0", history.Delete, r.fg, 25, 30)
	r.fgDelete.Delete = &history.DeleteOptions{Propagation: "Foreground"}
	r.second = op("client-1", history.Delete, r.gcDone, 40, 45)
	r.second.Delete = &history.DeleteOptions{}
	return r
}

// TestObserverNoOpDeleteIsNoWrite: the second DELETE found the Pod
// being deleted, and its options change none of the finalizers, so it
// wrote nothing: the revision it answered is the GC's. Taken for the
// DELETE's write, the GC's removal of foregroundDeletion was charged to
// the DELETE, whose options keep it.
func TestObserverNoOpDeleteIsNoWrite(t *testing.T) {
	r := newPodRun(t)
	o := history.NewObserverAt(time.Unix(3000, 0))
	o.See(&r.created, false, r.at(22))
	o.See(&r.fg, false, r.at(31))
	o.See(&r.gcDone, false, r.at(50)) // delivered after the DELETE was sent
	recorded := history.Merge([]history.Op{r.create, r.fgDelete, r.second})
	observed := o.Ops(recorded)
	if len(observed) != 1 || observed[0].Got.RV != 6862 || observed[0].Call != r.at(25) || observed[0].Return != r.at(45) {
		t.Fatalf("want the GC's rv 6862 observed in [the foreground DELETE's Call %d, the second DELETE's Return %d], got %+v",
			r.at(25), r.at(45), observed)
	}
	if res := lin.Check(history.Merge(recorded, observed), lin.Options{}); res.Verdict != "Ok" {
		t.Errorf("%s", res.Summary)
	}

	// A DELETE whose options switch the finalizers may have written the
	// revision it answered: Orphan on a foreground deletion.
	switched := r.gcDone
	switched.Finalizers = []string{"cascade.dev/hold", model.FinalizerOrphan}
	second := r.second
	second.Got, second.Delete = &switched, &history.DeleteOptions{Propagation: "Orphan"}
	o = history.NewObserverAt(time.Unix(3000, 0))
	o.See(&r.created, false, r.at(22))
	o.See(&r.fg, false, r.at(31))
	o.See(&switched, false, r.at(50))
	if observed := o.Ops(history.Merge([]history.Op{r.create, r.fgDelete, second})); len(observed) != 0 {
		t.Errorf("want the switching DELETE taken for its write, got observed %+v", observed)
	}
}

// TestObserverFirstDeleteIsJudged: a DELETE of an object not yet being
// deleted is taken for the write of the revision it answered, and judged
// as that write: a foreground DELETE of a live Pod answered with the
// orphan finalizer stays illegal.
func TestObserverFirstDeleteIsJudged(t *testing.T) {
	r := newPodRun(t)
	wrong := r.fg
	wrong.Finalizers = []string{"cascade.dev/hold", model.FinalizerOrphan}
	fgDelete := r.fgDelete
	fgDelete.Got = &wrong
	o := history.NewObserverAt(time.Unix(3000, 0))
	o.See(&r.created, false, r.at(22))
	o.See(&wrong, false, r.at(31))
	recorded := history.Merge([]history.Op{r.create, fgDelete})
	if observed := o.Ops(recorded); len(observed) != 0 {
		t.Fatalf("want the DELETE taken for its write, got observed %+v", observed)
	}
	res := lin.Check(recorded, lin.Options{})
	if res.Verdict != "Illegal" || !strings.Contains(res.Summary, "the delete left finalizers") {
		t.Errorf("want the DELETE's finalizers illegal, got %s: %s", res.Verdict, res.Summary)
	}
}

// revisionRun is a kubeconfig run in which a replication controller
// creates a Pod and the GC later deletes it, both seen only by watch and
// late, while the driver's clients create ConfigMaps around them.
type revisionRun struct {
	at                      func(ms int) int64
	t0                      time.Time
	pod, podGone            history.Object
	cmBefore, cmAfter, cmGC history.Op
}

func newRevisionRun(t *testing.T) revisionRun {
	pod, ok := model.KindByShort("pod")
	cm, ok2 := model.KindByShort("cm")
	if !ok || !ok2 {
		t.Fatal("no kind pod or cm")
	}
	r := revisionRun{t0: time.Unix(4000, 0)}
	r.at = func(ms int) int64 { return r.t0.Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	r.pod = history.Object{Kind: pod, Namespace: "obs-ns", Name: "web-x", UID: "u-pod", RV: 700, Replicas: -1}
	r.podGone = r.pod
	r.podGone.RV = 720
	create := func(name string, rv uint64, call, ret int) history.Op {
		got := history.Object{Kind: cm, Namespace: "obs-ns", Name: name, UID: "u-" + name, RV: rv, Replicas: -1}
		return history.Op{Actor: "client-0", Verb: history.Create, Kind: cm, Namespace: "obs-ns", Name: name,
			Sent: &history.Object{Kind: cm, Namespace: "obs-ns", Name: name, Replicas: -1}, Code: 201, Got: &got,
			Call: r.at(call), Return: r.at(ret)}
	}
	r.cmBefore = create("a", 699, 100, 110) // written just before the Pod
	r.cmAfter = create("b", 701, 200, 210)  // and just after
	r.cmGC = create("c", 721, 600, 610)     // just after the Pod's deletion
	return r
}

// TestObservedWriteBoundedByRevisions: resourceVersions are one etcd's
// revisions, numbered in the order etcd applies writes, so a write seen
// only by watch came after every write of a smaller revision began and
// before any larger revision was seen. The controller's create of the
// Pod (rv 700) lies between the creates of rv 699 and 701, where the
// watch alone puts it anywhere from the observer's start to its late
// delivery; the GC's deletion (rv 720) lies after rv 701's create began and
// before rv 721 was answered.
func TestObservedWriteBoundedByRevisions(t *testing.T) {
	r := newRevisionRun(t)
	o := history.NewObserverAt(r.t0)
	o.See(&r.pod, false, r.at(500))    // the Pod's watch lags
	o.See(&r.podGone, true, r.at(900)) // and lags
	recorded := history.Merge([]history.Op{r.cmBefore, r.cmAfter, r.cmGC})
	observed := o.Ops(recorded)
	if len(observed) != 2 {
		t.Fatalf("want the Pod's create and deletion observed, got %+v", observed)
	}
	if w := observed[0]; w.Got.RV != 700 || w.Call != r.at(100) || w.Return != r.at(210) {
		t.Errorf("observed rv %d in [%d, %d], want rv 700 in [rv 699's Call %d, rv 701's Return %d]",
			w.Got.RV, w.Call, w.Return, r.at(100), r.at(210))
	}
	if w := observed[1]; !w.Removed || w.Call != r.at(200) || w.Return != r.at(610) {
		t.Errorf("observed %s in [%d, %d], want the deletion in [rv 701's Call %d, rv 721's Return %d]",
			w.String(), w.Call, w.Return, r.at(200), r.at(610))
	}
	if res := lin.Check(history.Merge(recorded, observed), lin.Options{}); res.Verdict != "Ok" {
		t.Errorf("%s", res.Summary)
	}
}

// TestObservedWriteNotBoundedByNoOps: only an answer that certainly
// wrote its revision bounds the writes of larger revisions from below.
// A patch without a resourceVersion precondition may have changed
// nothing and shown a revision written long before it was sent, so its
// Call says nothing of when the Pod's write came.
func TestObservedWriteNotBoundedByNoOps(t *testing.T) {
	r := newRevisionRun(t)
	noop := r.cmBefore
	noop.Verb, noop.Code, noop.Call, noop.Return = history.Patch, 200, r.at(150), r.at(160)
	noop.Sent = &history.Object{Replicas: -1}
	o := history.NewObserverAt(r.t0)
	o.See(&r.pod, false, r.at(500))
	observed := o.Ops(history.Merge([]history.Op{r.cmBefore, noop, r.cmAfter}))
	if len(observed) != 1 || observed[0].Call != r.at(100) {
		t.Fatalf("want the Pod's create observed from rv 699's Call %d, not the patch's %d: %+v", r.at(100), r.at(150), observed)
	}

	// With the resourceVersion it was checked against, an answer at
	// another revision is a write.
	noop.Sent.RV = 698
	observed = o.Ops(history.Merge([]history.Op{r.cmBefore, noop, r.cmAfter}))
	if len(observed) != 1 || observed[0].Call != r.at(150) {
		t.Fatalf("want the Pod's create observed from the patch's Call %d: %+v", r.at(150), observed)
	}
}
