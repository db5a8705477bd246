package target

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/crds"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// cleanupTimeout bounds the removal of a run's objects, which runs on a
// fresh context so that an interrupted run still cleans up.
const cleanupTimeout = 2 * time.Minute

// HeaderName is the name a trace's `# targets:` header uses for a target:
// a kubeconfig cluster is held to what upstream does, impl-stepped to
// what impl does.
func HeaderName(target string) string {
	switch target {
	case Kubeconfig:
		return Upstream
	case ImplStepped:
		return Impl
	}
	return target
}

// Skip says why a trace cannot run on this target ("" when it can):
// SpecSkip, then what only the started target knows (a limited principal,
// a deletion-protection webhook, and on kubeconfig whether the cluster
// already has a CRD the trace creates).
func (t *Target) Skip(ctx context.Context, tr *traces.Trace) string {
	if why := SpecSkip(t.Spec, tr); why != "" || t.Spec.Name == Model {
		return why
	}
	if usesLimited(tr) && t.Limited == nil {
		return "it acts as=limited and this target has no limited principal (kubeconfig: --limited-context)"
	}
	if t.Spec.Name == Kubeconfig && usesProtection(tr) && !t.hasWebhook {
		return "it needs the deletion-protection webhook, which this cluster does not have (--webhook installs it)"
	}
	if hasLabel(tr, LabelBackoff) && (t.Spec.Name == Kubeconfig || t.Spec.NoProxy) {
		return "its settles must wait out the GC's back-off, which only the API proxy's record of the GC's failed writes tells (upstream, without --no-proxy)"
	}
	if t.Spec.Name == Kubeconfig {
		return t.foreignCRDs(ctx, tr)
	}
	return ""
}

// SpecSkip says why a trace cannot run on the target s names, as far as
// the trace's headers and commands tell without starting it: its targets
// header, GC or controller steps on a target that cannot take them, bugs
// the target cannot switch on.
func SpecSkip(s Spec, tr *traces.Trace) string {
	name := s.Name
	rel := s.Release.Or()
	if name == Model && s.Release == (model.Release{}) {
		rel = model.Release{} // each trace on its own releases (Trace.ReleaseFor)
	}
	if _, err := tr.ReleaseFor(rel); err != nil {
		var nf *traces.NotForRelease
		if errors.As(err, &nf) {
			return fmt.Sprintf("its releases header holds for %s, not %s", nf.HoldsFor(), nf.Release.Or())
		}
		return err.Error()
	}
	if name == UpstreamStepped {
		return upstreamSteppedSkip(tr)
	}
	if !replay.Runnable(tr, HeaderName(name)) {
		return fmt.Sprintf("its targets header (%s) does not name %s", tr.Header(traces.HeaderTargets), HeaderName(name))
	}
	if name == Model {
		return ""
	}
	traceBugs, err := implBugs(tr)
	if err != nil {
		return err.Error()
	}
	steps := NeedsSteps(tr)
	switch name {
	case Upstream, Kubeconfig:
		if steps {
			return "it takes GC or controller steps, which only the model and impl-stepped can take"
		}
		if len(traceBugs) > 0 {
			return fmt.Sprintf("it needs bug %s, which only the model and impl can switch on", traceBugs)
		}
	case Impl:
		if steps {
			return "it takes GC or controller steps: replay it on impl-stepped"
		}
		if len(traceBugs) > 0 && !slices.Equal(traceBugs.Names(), s.Inject.Names()) {
			return fmt.Sprintf("it needs exactly bug %s and impl runs with %s: replay it on impl-stepped, which applies a trace's # bug: header", traceBugs, s.Inject)
		}
	case ImplStepped:
		if !steps && len(traceBugs) == 0 {
			return "it takes no GC or controller step and needs no bug: it runs on impl (impl-stepped runs none of kube-controller-manager's controllers)"
		}
		if why := steppedUnsupported(tr); why != "" {
			return why
		}
	}
	if name == Kubeconfig && usesLimited(tr) && s.LimitedContext == "" {
		return "it acts as=limited and this target has no limited principal (kubeconfig: --limited-context)"
	}
	return ""
}

// foreignCRDs names a CRD the trace creates that the cluster already has:
// the harness creates and deletes cascade.dev CRDs (their names are fixed
// by their group) only when no one else has them.
func (t *Target) foreignCRDs(ctx context.Context, tr *traces.Trace) string {
	dyn, err := dynamic.NewForConfig(t.Admin)
	if err != nil {
		return err.Error()
	}
	for _, name := range createdCRDs(tr) {
		_, err := dyn.Resource(crds.CRDResource).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			return fmt.Sprintf("it creates crd/%s, which the cluster already has: the harness touches only CRDs it created", name)
		case !apierrors.IsNotFound(err):
			return fmt.Sprintf("cannot tell whether the cluster has crd/%s: %s", name, OneLine(err))
		}
	}
	return ""
}

// ReplayTrace runs one trace on the target: on a fresh driver (its own
// namespaces and name prefix), with a stepped impl of the trace's bugs
// (plus Spec.Inject) on impl-stepped, and removes the driver's objects
// afterwards on a fresh context, even when ctx was cancelled. It returns
// each stanza's output for replay.Diff, or skip saying why the trace
// cannot run here (Skip). On the model it returns the model's outputs.
func (t *Target) ReplayTrace(ctx context.Context, tr *traces.Trace) (outs [][]string, skip string, err error) {
	outs, skip, _, err = t.replayTrace(ctx, tr)
	return outs, skip, err
}

// replayTrace is ReplayTrace, and with Spec.History the verdict on the
// replay's history (nil: linearizable).
func (t *Target) replayTrace(ctx context.Context, tr *traces.Trace) (outs [][]string, skip string, hist, err error) {
	if skip = t.Skip(ctx, tr); skip != "" {
		return nil, skip, nil, nil
	}
	if t.Spec.Name == Model {
		results, _, err := traces.ReplayOn(tr, t.Spec.Release)
		if err != nil {
			return nil, "", nil, err
		}
		for _, r := range results {
			outs = append(outs, r.Output)
		}
		return outs, "", nil, nil
	}
	timeout := t.Spec.TraceTimeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, err := driver.New(t.Admin, t.Limited, "cascade-"+driver.NewRunID())
	if err != nil {
		return nil, "", nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := d.Cleanup(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup of %s: %s", d.Prefix(), OneLine(cerr)))
		}
	}()
	settler := t.Settler()
	if t.Spec.Name == ImplStepped {
		bs, err := implBugs(tr)
		if err != nil {
			return nil, "", nil, err
		}
		bs = merge(bs, t.Spec.Inject)
		var kinds []string
		if usesWorkloads(tr) {
			kinds = SteppedAdopterKinds
		}
		// the namespaces exist before impl starts, so that their events
		// are behind its GC before the first step (the model has none
		// for namespaces a trace never created)
		if err := d.EnsureNamespaces(ctx, traceNamespaces(tr)); err != nil {
			return nil, "", nil, err
		}
		it, err := t.startStepped(ctx, bs, kinds, usesProtection(tr))
		if err != nil {
			return nil, "", nil, err
		}
		defer func() {
			if serr := it.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("stop stepped impl: %w", serr))
			}
		}()
		settler = Stepped(it, d)
	}
	if t.Spec.Name == UpstreamStepped {
		if err := d.EnsureNamespaces(ctx, traceNamespaces(tr)); err != nil {
			return nil, "", nil, err
		}
		u, err := t.holdFor(ctx, d)
		if err != nil {
			return nil, "", nil, err
		}
		defer t.stepper.Hold(false)
		t.customUsed = usesCustomKinds(tr)
		settler = u
	}
	var rec *auditTail
	if t.Spec.History {
		if rec, err = t.tailAudit(ctx); err != nil {
			return nil, "", nil, err
		}
		defer rec.close()
		t.TakeGraphChanges() // the earlier replays': the check reads this one's
	}
	outs, err = replay.Run(ctx, tr, d, settler)
	if err == nil && rec != nil {
		hist, err = rec.check(ctx, d.Prefix(), t.hasWebhook, t.Spec.Release, t.TakeGraphChanges())
	}
	return outs, "", hist, err
}

// Verdict is the outcome of Check.
type Verdict struct {
	// Skip says why the trace did not run ("" if it ran).
	Skip string
	// Divergence is the first stanza that differs from the trace, with a
	// line diff, or with Spec.History a *HistoryError when the stanzas
	// agree but the replay's history is not linearizable (nil when the
	// trace agrees).
	Divergence error
	// Err is why the replay could not be completed: a step the target
	// could not take, a cluster that never went quiet, a failed cleanup.
	Err error
	// Outs are the target's outputs, stanza by stanza, with the real
	// messages the comparison leaves out.
	Outs [][]string
	// Elapsed is the replay's wall time, cleanup included.
	Elapsed time.Duration
}

// Verdict results.
const (
	Pass    = "pass"
	Fail    = "fail"
	Error   = "error"
	Skipped = "skip"
)

// Result is pass, fail (a divergence), error or skip.
func (v Verdict) Result() string {
	switch {
	case v.Skip != "":
		return Skipped
	case v.Err != nil:
		return Error
	case v.Divergence != nil:
		return Fail
	}
	return Pass
}

// Check replays a trace and compares it with its expectations: on the
// model every stanza line for line and the trace's property headers, on
// real targets as replay.Diff does.
func (t *Target) Check(ctx context.Context, tr *traces.Trace) Verdict {
	begin := time.Now()
	if t.Spec.Name == Model {
		if skip := t.Skip(ctx, tr); skip != "" {
			return Verdict{Skip: skip}
		}
		results, _, err := traces.ReplayOn(tr, t.Spec.Release)
		v := Verdict{Err: err}
		if err == nil {
			for _, r := range results {
				v.Outs = append(v.Outs, r.Output)
			}
			if v.Divergence = traces.Diff(tr, results); v.Divergence == nil {
				v.Divergence = traces.CheckHeaders(tr, results)
			}
		}
		v.Elapsed = time.Since(begin)
		return v
	}
	outs, skip, hist, err := t.replayTrace(ctx, tr)
	v := Verdict{Skip: skip, Err: err, Outs: outs, Elapsed: time.Since(begin)}
	var div *proxy.Divergence
	if errors.As(err, &div) {
		// the real controller manager did not take a step as the model
		// did: a divergence, not a failure of the harness
		v.Err, v.Divergence = nil, err
	}
	if skip == "" && len(outs) == len(tr.Stanzas) {
		// a completed replay whose cleanup failed still has a verdict
		v.Divergence = replay.Diff(tr, t.Spec.Name, outs)
	}
	if v.Divergence == nil {
		v.Divergence = hist
	}
	return v
}

// Stepped replays GC and controller steps one at a time on impl in
// Stepped mode, mapping the trace's keys to the run's real objects.
func Stepped(it *impl.Target, d *driver.Driver) replay.Target { return stepped{t: it, d: d} }

type stepped struct {
	t *impl.Target
	d *driver.Driver
}

func (s stepped) Settle(ctx context.Context, _ *driver.Driver) error { return s.t.Settle(ctx) }

func (s stepped) Step(ctx context.Context, st model.Step) (model.Result, error) {
	if st.Actor == model.ActorAPIExtensions {
		// a real apiextensions-apiserver cleans up a deleted CRD by
		// itself and cannot be stepped: wait for the CRD to go and for
		// discovery to drop its resource, so that a later `gc sync`
		// reads what the model's does
		if err := s.d.WaitCRDGone(ctx, st.Target.Name); err != nil {
			return model.Result{}, err
		}
		return model.Result{Code: 200}, nil
	}
	line, err := s.d.RealLine(st.String())
	if err != nil {
		return model.Result{}, err
	}
	writeErr, err := s.t.Step(ctx, line)
	if err != nil {
		return model.Result{}, err
	}
	if writeErr == nil {
		return model.Result{Code: 200}, nil
	}
	var status apierrors.APIStatus
	if errors.As(writeErr, &status) {
		s := status.Status()
		return model.Result{Code: int(s.Code), Reason: string(s.Reason), Message: s.Message}, nil
	}
	return model.Result{}, writeErr
}

// NeedsSteps reports whether a trace names GC or controller steps, which
// only the model and a stepped target can take.
func NeedsSteps(tr *traces.Trace) bool {
	return anyCommand(tr, func(c traces.Command) bool { return !c.Settle && c.Step.Actor != model.ActorClient })
}

// SteppedAdopterKinds are the owner kinds impl's stepped adopter manages
// for every trace on impl-stepped that names Pods or workloads: the built-in workloads whose
// kube-controller-manager controllers adopt and release (ReplicaSets and
// ReplicationControllers their Pods, Deployments their ReplicaSets), as the
// model's controller runs them all. Each is stepped; none creates or
// scales anything, as on the model.
var SteppedAdopterKinds = []string{"Deployment", "ReplicaSet", "ReplicationController"}

// steppedUnsupported names what a stepped impl run cannot replay. impl's
// adopter manages Herds only when their CRD exists before it starts, so
// on impl-stepped it never manages them (a trace with Herds creates their
// CRD), while the model's replay runs every controller: a trace whose
// outcome the Herd controller can decide cannot run here, one that takes a
// controller step on a Herd or settles with Pods, which Herds adopt. Any
// other trace that creates the Herd CRD runs, the Herds unmanaged.
func steppedUnsupported(tr *traces.Trace) string {
	if !usesHerds(tr) || !slices.Contains(createdCRDs(tr), crds.Herd.Name()) {
		return ""
	}
	herdStep := anyCommand(tr, func(c traces.Command) bool {
		return !c.Settle && c.Step.Actor == model.ActorController && (isHerd(c.Step.Target.Kind) || (c.Step.By.Name != "" && isHerd(c.Step.By.Kind)))
	})
	settles := anyCommand(tr, func(c traces.Command) bool { return c.Settle })
	pods := anyCommand(tr, func(c traces.Command) bool { return strings.Contains(c.Text, "pod/") })
	if herdStep || (settles && pods) {
		return "it creates crd/" + crds.Herd.Name() + " and its Herds' controller can decide its outcome (a controller step on a Herd, or a settle with Pods), but impl's stepped adopter manages Herds only when their CRD exists before it starts"
	}
	return ""
}

func isHerd(k model.KindID) bool { return k != model.NoKind && k.Info().Short == "herd" }

// usesWorkloads: the trace names objects the stepped adopter would watch
// with SteppedAdopterKinds (Pods and the built-in workloads); without any
// the adopter has nothing to do and is not started.
func usesWorkloads(tr *traces.Trace) bool {
	watched := func(k model.KindID) bool {
		if k == model.NoKind {
			return false // a GC step on an owner of a kind nobody serves
		}
		switch k.Info().Short {
		case "pod", "rs", "rc", "deploy":
			return true
		}
		return false
	}
	return anyCommand(tr, func(c traces.Command) bool {
		return !c.Settle && (watched(c.Step.Target.Kind) || (c.Step.By.Name != "" && watched(c.Step.By.Kind)))
	})
}

func usesHerds(tr *traces.Trace) bool {
	return anyCommand(tr, func(c traces.Command) bool { return strings.Contains(c.Text, "herd/") })
}

func usesLimited(tr *traces.Trace) bool {
	return anyCommand(tr, func(c traces.Command) bool { return !c.Settle && c.Step.Principal == model.PrincipalLimited })
}

// usesProtection: the trace is labelled protection or sets the
// deletion-protection label.
func usesProtection(tr *traces.Trace) bool {
	return hasLabel(tr, "protection") || anyCommand(tr, func(c traces.Command) bool { return strings.Contains(c.Text, model.ProtectionLabel) })
}

// LabelBackoff labels a trace whose settles must wait out the GC's
// back-off after failed writes: a plain quiet window ends before the
// GC's next pass, so only a target that knows the GC's failures (the
// upstream targets, from the API proxy's record) can run it.
const LabelBackoff = "backoff"

// hasLabel reports whether the trace's labels header has label.
func hasLabel(tr *traces.Trace, label string) bool {
	for _, l := range strings.Split(tr.Header(traces.HeaderLabels), ",") {
		if strings.TrimSpace(l) == label {
			return true
		}
	}
	return false
}

// createdCRDs lists the names of the CRDs a trace creates.
func createdCRDs(tr *traces.Trace) []string {
	var out []string
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if !c.Settle && c.Step.Actor == model.ActorClient && c.Step.Op == model.OpCreate &&
				c.Step.Target.Kind.Info().Short == "crd" && !slices.Contains(out, c.Step.Target.Name) {
				out = append(out, c.Step.Target.Name)
			}
		}
	}
	return out
}

// traceNamespaces lists the namespaces a trace's client steps place
// objects in or look owners up in, but does not create as objects.
func traceNamespaces(tr *traces.Trace) []string {
	var out []string
	add := func(k model.KindID, ns string) {
		if k != model.NoKind && k.Info().Namespaced && ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	anyCommand(tr, func(c traces.Command) bool {
		if c.Settle || c.Step.Actor != model.ActorClient {
			return false
		}
		add(c.Step.Target.Kind, c.Step.Target.Namespace)
		for _, o := range append(slices.Clone(c.Step.Owners), c.Step.Owner) {
			if k, ok := model.KindByName(o.Kind); ok {
				add(k, o.Namespace)
			}
		}
		return false
	})
	created := func(ns string) bool {
		return anyCommand(tr, func(c traces.Command) bool {
			return !c.Settle && c.Step.Op == model.OpCreate && c.Step.Target.Kind.Info().Kind == "Namespace" && c.Step.Target.Name == ns
		})
	}
	return slices.DeleteFunc(out, created)
}

func anyCommand(tr *traces.Trace, f func(traces.Command) bool) bool {
	for _, st := range tr.Stanzas {
		if slices.ContainsFunc(st.Commands, f) {
			return true
		}
	}
	return false
}

// implBugs maps a trace's bug switches onto impl's catalogue.
func implBugs(tr *traces.Trace) (bugs.Set, error) {
	set, err := tr.Bugs()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, b := range set.List() {
		names = append(names, b.String())
	}
	bs, err := bugs.Parse(names)
	if err != nil {
		return nil, fmt.Errorf("its bug header cannot be switched on in impl: %v", err)
	}
	return bs, nil
}

// merge is a new set with the bugs of a and b.
func merge(a, b bugs.Set) bugs.Set {
	out := bugs.Set{}
	for _, s := range []bugs.Set{a, b} {
		for x := range s {
			out[x] = true
		}
	}
	return out
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}
