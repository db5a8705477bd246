// Package target starts the targets cascade replays traces on, in one
// place for the CLI (cascade replay, conform, cluster, fuzz) and the
// randomized runs:
//
//	model         the model itself; nothing to start
//	upstream      envtest + kube-controller-manager (its garbage collector
//	              and workload controllers), talking to kube-apiserver
//	              through cascade's API proxy (harness/proxy; NoProxy:
//	              directly) + cascade's deletion-protection webhook + the
//	              limited principal
//	impl          envtest + kube-controller-manager's workload controllers
//	              without its GC + impl (Auto, with Spec.Inject) + webhook;
//	              with Spec.Adopter (cascade fuzz) or adopt-without-recheck
//	              injected, impl's adopter adopts for Deployments,
//	              ReplicaSets and RCs instead of kube-controller-manager's
//	              controllers, which then run only for Jobs and CronJobs
//	impl-stepped  envtest without kube-controller-manager; every trace gets
//	              its own impl in Stepped mode, its adopter stepping the
//	              built-in workloads (SteppedAdopterKinds)
//	upstream-stepped  envtest + kube-controller-manager's garbage collector
//	              behind the API proxy, which holds its traffic about a
//	              trace's objects until the trace's GC steps release it
//	kubeconfig    an existing cluster named by a kubeconfig and context
//
// On a kubeconfig cluster the harness works only inside namespaces it
// created and labelled and touches only objects it created (see
// harness/driver); the cascade.dev CRDs some traces create are created and
// deleted only when the cluster does not have them already (Target.Skip).
package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/crds"
	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/impl/step"
	"github.com/cascade-k8s/cascade/impl/webhook"
	"github.com/cascade-k8s/cascade/model"
)

// Target names.
const (
	Model       = "model"
	Upstream    = "upstream"
	Impl        = "impl"
	ImplStepped = "impl-stepped"
	Kubeconfig  = "kubeconfig"
	// UpstreamStepped is kube-controller-manager's garbage collector
	// behind the API proxy, stepped by the trace (upstream_stepped.go).
	UpstreamStepped = "upstream-stepped"
)

// Names lists every target, in the order help texts show them.
var Names = []string{Model, Upstream, Impl, ImplStepped, UpstreamStepped, Kubeconfig}

// WorkloadControllers are kube-controller-manager's controllers without
// its garbage collector: the impl target runs cascade's own GC next to
// them, so that adoption and release behave as on upstream.
var WorkloadControllers = []string{"replicaset", "deployment", "replicationcontroller", "job", "cronjob"}

// Spec says which target to start and how.
type Spec struct {
	// Name is one of Names.
	Name string
	// Inject switches on impl bugs: on impl for the whole run, on
	// impl-stepped in addition to each trace's `# bug:` header.
	Inject bugs.Set
	// Kubeconfig and Context name the cluster of the kubeconfig target
	// ("" means kubectl's defaults: $KUBECONFIG or ~/.kube/config, and
	// the current context).
	Kubeconfig, Context string
	// LimitedContext is, on kubeconfig, a context of the same kubeconfig
	// whose principal may not update */finalizers (the traces' as=limited;
	// `cascade cluster` writes one named cascade-limited). Without it
	// traces that use as=limited are skipped there.
	LimitedContext string
	// Webhook, on kubeconfig, serves cascade's deletion-protection
	// webhook on this machine and registers it with the cluster for the
	// run. Without it protection traces run there only if the cluster
	// already has the webhook (as `cascade cluster` installs it).
	Webhook bool
	// WebhookHost is the address the webhook listens on and the API
	// server dials ("" means 127.0.0.1, enough for a cluster on this
	// machine).
	WebhookHost string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager for
	// the envtest targets ("" means $KUBEBUILDER_ASSETS, else
	// bin/kube/<version> of the checkout around the working directory or
	// around the running executable).
	BinDir string
	// Datastore is what the envtest targets' kube-apiserver stores
	// objects in: controlplane.DatastoreEtcd ("" means etcd) or
	// controlplane.DatastoreKine, kine over SQLite from bin/kine of the
	// checkout (controlplane.Options.Datastore).
	Datastore string
	// Release is the Kubernetes release the target's control plane runs
	// (the zero value: model.DefaultRelease). Traces whose releases
	// header excludes it are skipped, the model target replays on it,
	// and history checks judge it (lin.Options.Release). cascade's CLI
	// sets it from --kube-version or from the binaries in BinDir. It may
	// be skewed (model.Release.WithKCM): kube-controller-manager's
	// release is then judged for the GC's behaviour and known races,
	// kube-apiserver's for the API's answers.
	Release model.Release
	// KCMNamed says that Release's kube-controller-manager release was
	// named (--kcm-version), not left to the binaries: an envtest target
	// that starts kube-controller-manager refuses a binary of another
	// release, where it otherwise takes that binary's release as
	// kube-controller-manager's (detectRelease).
	KCMNamed bool
	// Audit turns the envtest API server's audit log on
	// (controlplane.Options.Audit).
	Audit bool
	// History checks the history of every replay for linearizability
	// against the model, as fuzzing does (harness/lin): every request of
	// every actor, read from the audit log, must linearize, with each GC
	// and controller write permitted where it lands. A trace's stanzas
	// show states after steps and settles; the history shows what
	// happened between, such as a GC write that breaks a safety property
	// and is undone before the cluster settles. Envtest targets (upstream,
	// impl) only; it turns the audit log on.
	History bool
	// InformerLag, on impl, delays each of the GC's informer events by a
	// random time up to it, each resource's in order
	// (gc.Options.InformerLag), and each event of every watch stream of
	// impl's adopter likewise, each stream's in order
	// (adopter.Options.InformerLag): a fault under which the GC's lookup
	// races, and the adopter's orphan-adoption race, happen on
	// components that run by themselves. On upstream the proxy holds
	// each event of every watch stream of kube-controller-manager
	// likewise (proxy.Faults.Lag).
	InformerLag time.Duration
	// InformerRelist, on impl, breaks each of the GC's watches now and
	// then and relists a random time up to it later, handing on each
	// object's last state only (gc.Options.InformerRelist): a fault
	// under which an owner can be created and deleted without the graph
	// builder seeing either. On upstream the proxy ends an informer's
	// watch with 410 Expired now and then and holds its relist
	// (proxy.Faults.Relist).
	InformerRelist time.Duration
	// WriteDelay, on impl and upstream, holds each GC write a random time
	// up to it (gc.Options.WriteDelay; on upstream the proxy holds them,
	// proxy.Faults.WriteDelay): a fault under which a client write lands
	// between the GC's GET and its DELETE.
	WriteDelay time.Duration
	// FaultSeed seeds the random times of the faults (0: the clock).
	FaultSeed uint64
	// NoProxy, on upstream, lets kube-controller-manager talk to
	// kube-apiserver directly, without the proxy: no evidence, no faults
	// (for measuring the proxy's overhead).
	NoProxy bool
	// RestartKCM, on upstream, asks a concurrent fuzz run to kill
	// kube-controller-manager and start it again once per run, at a
	// random time up to it after the run's clients start
	// (controlplane.ControlPlane.RestartControllerManager; harness/fuzz).
	RestartKCM time.Duration
	// Adopter, on impl, runs impl's adopter (impl/adopter) for the
	// built-in workloads (SteppedAdopterKinds: Deployments, ReplicaSets,
	// ReplicationControllers) in place of kube-controller-manager's
	// deployment, replicaset and replicationcontroller controllers, which
	// are then not started: it adopts and releases as they do, but
	// creates and scales nothing (no Pods for replicas, no ReplicaSets for
	// Deployments), as the model's controller. kube-controller-manager
	// still runs the job and cronjob controllers, whose adoption impl's
	// adopter does not cover. cascade fuzz sets it, so that concurrent
	// runs exercise impl's own adopter, as impl-stepped's do; trace
	// replays leave it off. The adopt-without-recheck bug implies it.
	Adopter bool
	// GCOnly, on upstream-stepped, starts kube-controller-manager's
	// garbage collector alone, without the second process of workload
	// controllers (SteppedWorkloadControllers). cascade fuzz sets it: its
	// stepped runs on upstream-stepped draw no controller step, and their
	// model runs no controller. With the real controllers, the model's
	// settle would have to run its own (as conform's fuzz phase does,
	// fuzz.SteppedEnv.SettleControllers), and where two workloads can
	// adopt one orphan the real choice depends on timing, the model's on
	// a fixed order (upstream-stepped --checks 30 --seed 2, run 10: rs/a
	// adopted by deploy/a, the model's deploy/b).
	GCOnly bool
	// RestartAPIServer, on upstream and impl, asks a concurrent fuzz run
	// to restart kube-apiserver on the same etcd once per run, at a
	// random time up to it after the run's clients start
	// (controlplane.ControlPlane.RestartAPIServer; harness/fuzz).
	RestartAPIServer time.Duration
	// RestartGC, on impl, asks a concurrent fuzz run to restart impl's
	// GC once per run, at a random time up to it after the run's clients
	// start (impl.Target.RestartGC).
	RestartGC time.Duration
	// Log receives one-line progress messages (nil: none).
	Log io.Writer
	// TraceTimeout bounds one trace replay; zero means three minutes.
	TraceTimeout time.Duration
}

// implAdopts reports whether impl's adopting controller, rather than
// kube-controller-manager's, adopts for the built-in workloads on the impl
// target: when asked (Adopter), or when the adopter's own bug is
// injected, which only impl's adopter can have.
func (s Spec) implAdopts() bool { return s.Adopter || s.Inject.Has(bugs.AdoptWithoutRecheck) }

// implControllers are the kube-controller-manager controllers of the impl
// target: the workload controllers, less those impl's adopter stands in
// for (implAdopts). Without them nothing creates Pods for replicas; the
// model keeps none either.
func (s Spec) implControllers() []string {
	if !s.implAdopts() {
		return WorkloadControllers
	}
	return slices.DeleteFunc(slices.Clone(WorkloadControllers), func(c string) bool {
		return c == "replicaset" || c == "deployment" || c == "replicationcontroller"
	})
}

// InputError is a Start error caused by what the Spec names, not by the
// harness: an unknown target, a bad kubeconfig, an unreachable cluster,
// missing control-plane binaries. Command-line tools report it as a usage
// error.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// Validate checks that the Spec's fields fit its target.
func (s Spec) Validate() error {
	if !slices.Contains(Names, s.Name) {
		return inputErr("unknown target %q (valid: %s)", s.Name, strings.Join(Names, ", "))
	}
	if len(s.Inject) > 0 && s.Name != Impl && s.Name != ImplStepped {
		return inputErr("bugs can be injected into impl and impl-stepped only, not %s", s.Name)
	}
	for b := range s.Inject {
		if !b.Injectable() {
			return inputErr("bug %s cannot be injected into impl (valid: %s)", b, strings.Join(bugs.InjectableNames(), ", "))
		}
	}
	if s.Name != Kubeconfig {
		switch {
		case s.Kubeconfig != "" || s.Context != "" || s.LimitedContext != "":
			return inputErr("a kubeconfig and its contexts name the kubeconfig target, not %s", s.Name)
		case s.Webhook || s.WebhookHost != "":
			return inputErr("the webhook options apply to the kubeconfig target (%s installs the webhook itself)", s.Name)
		}
	}
	if (s.Release.Skewed() || s.KCMNamed) && (s.Name == Impl || s.Name == ImplStepped) {
		return inputErr("%s runs cascade's own garbage collector (impl, v1.36 and v1.37's semantics), not kube-controller-manager: a kube-controller-manager release applies to the model, upstream, upstream-stepped and kubeconfig targets", s.Name)
	}
	if (s.Name == Kubeconfig || s.Name == Model) && (s.BinDir != "" || s.Audit) {
		return inputErr("the control-plane binaries and the audit log belong to the envtest targets, not %s", s.Name)
	}
	if s.Datastore != "" {
		if err := controlplane.CheckDatastore(s.Datastore); err != nil {
			return &InputError{Err: err}
		}
		if s.Name == Kubeconfig || s.Name == Model {
			return inputErr("a datastore is chosen for the envtest targets (upstream, impl, impl-stepped), not %s", s.Name)
		}
	}
	proxied := s.Name == Upstream && !s.NoProxy
	if s.NoProxy && s.Name != Upstream {
		return inputErr("the API proxy runs on target upstream only; --no-proxy does not apply to %s", s.Name)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"an informer lag", s.InformerLag}, {"an informer relist gap", s.InformerRelist}, {"a write delay", s.WriteDelay}} {
		if f.d < 0 || (f.d > 0 && s.Name != Impl && !proxied) {
			return inputErr("%s is a fault of impl's GC running by itself (target impl) or of kube-controller-manager behind the API proxy (target upstream without --no-proxy), and positive; not %s with %s", f.name, s.Name, f.d)
		}
	}
	if s.RestartKCM < 0 || (s.RestartKCM > 0 && s.Name != Upstream) {
		return inputErr("a kube-controller-manager restart is a fault of target upstream, and positive; not %s with %s", s.Name, s.RestartKCM)
	}
	switch {
	case s.RestartAPIServer < 0 || (s.RestartAPIServer > 0 && s.Name != Upstream && s.Name != Impl):
		return inputErr("an API server restart is a fault of an envtest target's kube-apiserver (upstream, impl), and positive; not %s with %s", s.Name, s.RestartAPIServer)
	case s.RestartGC < 0 || (s.RestartGC > 0 && s.Name != Impl):
		return inputErr("a GC restart is a fault of impl's GC running by itself (target impl), and positive; not %s with %s", s.Name, s.RestartGC)
	}
	if s.History && s.Name != Upstream && s.Name != Impl {
		return inputErr("checking the history needs the audit log of an envtest target that runs a GC by itself (upstream, impl), not %s", s.Name)
	}
	return nil
}

// Target is a started target. Close it when done.
type Target struct {
	// Spec is what it was started from.
	Spec Spec
	// Where describes the cluster for messages: the API server's URL and,
	// on kubeconfig, the context and kubeconfig file.
	Where string
	// Admin is a client configuration with every permission (nil on
	// model).
	Admin *rest.Config
	// Limited is the as=limited principal's configuration (nil on model
	// and on kubeconfig without Spec.LimitedContext).
	Limited *rest.Config
	// CP is the envtest control plane (nil on model and kubeconfig).
	CP *controlplane.ControlPlane
	// Impl is the impl target's implementation, running in Auto mode
	// (nil on every other target; impl-stepped starts one per trace).
	Impl *impl.Target

	webhook     *webhook.Webhook // upstream's, or the one Spec.Webhook installed on kubeconfig
	hasWebhook  bool             // the cluster calls a deletion-protection webhook
	probeNS     string           // kubeconfig: the namespace made for the webhook's probe
	graph       *GraphRecorder   // impl: its GC's applied graph events
	kcmSyncs    *kcmSyncLog      // upstream: the GC's discovery syncs, from kube-controller-manager's log
	kcmGraph    *kcmGraphLog     // upstream: the order the GC's graph builder took events in, from the same log
	kcmPasses   *kcmPasses       // upstream-stepped: which GC GET begins a work item's pass, from the same log
	kcmVirtuals *kcmVirtuals     // upstream-stepped: the virtual delete events the graph builder took, from the same log

	// Proxy is the API proxy kube-controller-manager talks through on
	// upstream and upstream-stepped (nil elsewhere, and with
	// Spec.NoProxy): read its evidence after a run (proxy.Proxy.Take).
	Proxy *proxy.Proxy
	// stepper is the proxy's Controller on upstream-stepped
	stepper *proxy.Stepper
	// customUsed: the last trace on upstream-stepped named custom kinds
	// (holdFor waits for the GC's next discovery sync)
	customUsed bool

	// GCTap records the impl GC's writes that get no answer, on impl
	// with a restart fault (Spec.RestartAPIServer, Spec.RestartGC), and
	// kube-controller-manager's, on upstream behind the proxy with
	// Spec.RestartKCM: a concurrent run attaches its recorder (nil
	// otherwise).
	GCTap *history.Tap

	closeOnce sync.Once
	closeErr  error
}

// Start starts the target s names and returns once it serves: the
// control plane is up, kube-controller-manager's GC collects, impl's
// informers have synced and the webhook is called. On error nothing Start
// started keeps running. Errors caused by s or the cluster it names are
// *InputError.
func Start(ctx context.Context, s Spec) (_ *Target, retErr error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	t := &Target{Spec: s}
	if s.Name == Model {
		t.Where = "the model"
		return t, nil
	}
	defer func() {
		if retErr != nil {
			_ = t.Close()
		}
	}()
	if s.Name == Kubeconfig {
		return t, t.startKubeconfig(ctx)
	}
	binDir, source, err := resolveBinDir(s.BinDir)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	opts := controlplane.Options{BinDir: binDir, Audit: s.Audit || s.History, Datastore: s.Datastore}
	what := "etcd and kube-apiserver"
	if s.Datastore == controlplane.DatastoreKine {
		what = "kine (SQLite) and kube-apiserver"
		if opts.KinePath, err = resolveKine(); err != nil {
			return nil, &InputError{Err: err}
		}
	}
	switch s.Name {
	case Upstream:
		opts.ControllerManager = true
		what += " with kube-controller-manager (" + strings.Join(controlplane.DefaultControllers, ",") + ")"
		if !s.NoProxy {
			what += " behind cascade's API proxy"
			opts.ControllerManagerVia = t.startProxy
		}
	case Impl:
		opts.ControllerManager, opts.Controllers = true, s.implControllers()
		what += " with kube-controller-manager (" + strings.Join(opts.Controllers, ",") + ")"
	case UpstreamStepped:
		opts.ControllerManager, opts.Controllers = true, SteppedControllers
		opts.ControllerManagerVia = t.startProxy
		if s.GCOnly {
			what += " with kube-controller-manager (" + strings.Join(opts.Controllers, ",") + ") alone behind cascade's API proxy, stepped"
			break
		}
		opts.WorkloadControllers = SteppedWorkloadControllers
		what += " with kube-controller-manager (" + strings.Join(opts.Controllers, ",") + ") and a second one (" +
			strings.Join(opts.WorkloadControllers, ",") + ") behind cascade's API proxy, stepped"
		opts.WorkloadControllersVia = func() (string, error) { return t.Proxy.Listen(proxy.WorkloadsProcess) }
	}
	need := []string{controlplane.EtcdBinary, controlplane.APIServerBinary}
	if opts.KinePath != "" {
		need = need[1:]
	}
	if opts.ControllerManager {
		need = append(need, controlplane.ControllerManagerBinary)
	}
	for _, b := range need {
		if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.IsDir() {
			return nil, inputErr("%s not found in %s %s", b, binDir, binDirHint(source))
		}
	}
	// impl starts kube-controller-manager too, for its other
	// controllers: the GC judged is impl's own
	if err := t.detectRelease(binDir, JudgesKCM(s.Name)); err != nil {
		return nil, err
	}
	if s.Name == UpstreamStepped && (t.Spec.Release.APIServer().Less(watchListDefault) || t.Spec.Release.KCM().Less(watchListDefault)) {
		// upstream-stepped steps an informer's list object by object
		// (`gc coalesce`, `gc sync`), which a WatchList stream allows and a
		// LIST answer does not; before v1.35 client-go lists with a LIST
		// unless its WatchListClient gate is on, and kube-apiserver
		// refuses sendInitialEvents unless its WatchList gate is (then
		// the reflector falls back to a LIST). The GC sees the same
		// either way: the reflector hands a WatchList's initial events to
		// its store in one Replace, as a LIST's items.
		// Each side's gate is set where its release has it off (a skewed
		// control plane may need one only).
		var on []string
		if t.Spec.Release.KCM().Less(watchListDefault) {
			opts.ControllerManagerArgs = []string{"--feature-gates=WatchListClient=true"}
			on = append(on, "kube-controller-manager "+t.Spec.Release.KCM().String())
		}
		if t.Spec.Release.APIServer().Less(watchListDefault) {
			opts.APIServerFeatureGates = "WatchList=true"
			on = append(on, "kube-apiserver "+t.Spec.Release.APIServer().String())
		}
		what += " (WatchList on in " + strings.Join(on, " and ") + ", where it is off by default)"
	}
	begin := time.Now()
	t.logf("%s: starting %s %s from %s", s.Name, what, t.Spec.Release, binDir)
	if t.CP, err = controlplane.Start(ctx, opts); err != nil {
		return nil, err
	}
	t.Admin, t.Where = quiet(t.CP.Config), t.CP.Config.Host
	if t.Limited, err = t.CP.Limited(ctx); err != nil {
		return nil, err
	}
	t.Limited = quiet(t.Limited)
	// The webhook server and impl outlive ctx: a cancelled run still
	// cleans up its objects through them, and Close stops them.
	long := context.WithoutCancel(ctx)
	switch s.Name {
	case Upstream, UpstreamStepped:
		if t.webhook, err = webhook.Install(long, t.Admin, webhook.Options{}); err != nil {
			return nil, err
		}
		t.hasWebhook = true
		log := newKCMLog(t.CP.ControllerManagerLog())
		t.kcmSyncs = newKCMSyncLog(log)
		t.kcmGraph = newKCMGraphLog(log)
		if s.Name == UpstreamStepped {
			t.kcmPasses = newKCMPasses(log)
			t.kcmVirtuals = newKCMVirtuals(log)
		}
	case Impl:
		seed := s.faultSeed()
		io := impl.Options{Mode: step.Auto, Bugs: s.Inject, Webhook: true,
			GC: gc.Options{InformerLag: s.InformerLag, InformerRelist: s.InformerRelist, LagSeed: seed, WriteDelay: s.WriteDelay}}
		t.graph = &GraphRecorder{}
		io.GC.OnGraphChange = t.graph.Add
		if s.RestartAPIServer > 0 || s.RestartGC > 0 {
			t.GCTap = &history.Tap{}
			io.GCConfig = func(cfg *rest.Config) *rest.Config { return t.GCTap.Wrap(cfg, history.ActorGC) }
		}
		if s.InformerLag > 0 {
			t.logf("impl: the GC's informer events lag by up to %s each", s.InformerLag)
		}
		if s.InformerRelist > 0 {
			t.logf("impl: the GC's watches break now and then and relist up to %s later", s.InformerRelist)
		}
		if s.WriteDelay > 0 {
			t.logf("impl: the GC's writes wait up to %s each before they are sent", s.WriteDelay)
		}
		if s.implAdopts() {
			io.Adopter, io.AdopterKinds = true, SteppedAdopterKinds
			io.AdopterLag, io.AdopterLagSeed = s.InformerLag, seed+1
			t.logf("impl: impl's adopter adopts for %s in place of kube-controller-manager's controllers", strings.Join(SteppedAdopterKinds, ", "))
			if s.InformerLag > 0 {
				t.logf("impl: the adopter's watch events lag by up to %s each", s.InformerLag)
			}
		}
		if t.Impl, err = impl.Start(long, t.Admin, io); err != nil {
			return nil, err
		}
		t.hasWebhook = true
	}
	t.logf("%s: ready at %s in %s", s.Name, t.Where, time.Since(begin).Round(100*time.Millisecond))
	return t, nil
}

// startKubeconfig connects to the kubeconfig's cluster and, as asked,
// installs the webhook.
func (t *Target) startKubeconfig(ctx context.Context) error {
	s := t.Spec
	cfg, where, err := LoadKubeconfig(s.Kubeconfig, s.Context)
	if err != nil {
		return &InputError{Err: err}
	}
	if err := Reachable(cfg); err != nil {
		return &InputError{Err: Unreachable(cfg, where, err)}
	}
	throttle(cfg)
	t.Admin, t.Where = quiet(cfg), fmt.Sprintf("%s (%s)", cfg.Host, where)
	if s.LimitedContext != "" {
		lim, lwhere, err := LoadKubeconfig(s.Kubeconfig, s.LimitedContext)
		if err != nil {
			return &InputError{Err: err}
		}
		if err := Reachable(lim); err != nil {
			return &InputError{Err: Unreachable(lim, lwhere, err)}
		}
		throttle(lim)
		t.Limited = quiet(lim)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhook.ConfigName, metav1.GetOptions{})
	switch {
	case err == nil && s.Webhook:
		return inputErr("the cluster of %s already has the webhook configuration %s: leave out --webhook", where, webhook.ConfigName)
	case err == nil:
		t.hasWebhook = true
		t.logf("kubeconfig: the cluster has cascade's deletion-protection webhook (%s)", webhook.ConfigName)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("kubeconfig: look up webhook configuration %s: %s", webhook.ConfigName, OneLine(err))
	}
	if !s.Webhook {
		return nil
	}
	// the webhook's readiness probe is a ConfigMap: put it in a namespace
	// of this run, not in the cluster's default namespace
	t.probeNS = "cascade-" + driver.NewRunID() + "-webhook"
	ns := map[string]string{driver.RunLabel: t.probeNS}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, namespace(t.probeNS, ns), metav1.CreateOptions{}); err != nil {
		t.probeNS = ""
		return fmt.Errorf("kubeconfig: create the webhook's probe namespace: %s", OneLine(err))
	}
	host := s.WebhookHost
	w, err := webhook.Install(context.WithoutCancel(ctx), cfg, webhook.Options{Host: host, ExternalHost: host, ProbeNamespace: t.probeNS})
	if err != nil {
		return err
	}
	t.webhook, t.hasWebhook = w, true
	t.logf("kubeconfig: deletion-protection webhook registered at %s", w.URL())
	return nil
}

// Close stops what Start started: impl, the webhook (removing its
// registration), the probe namespace and the control plane. It is
// idempotent.
func (t *Target) Close() error {
	t.closeOnce.Do(func() {
		var errs []error
		if t.Impl != nil {
			errs = append(errs, t.Impl.Stop())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.webhook != nil {
			errs = append(errs, t.webhook.Stop(ctx))
		}
		if t.probeNS != "" {
			if kube, err := kubernetes.NewForConfig(t.Admin); err != nil {
				errs = append(errs, err)
			} else if err := kube.CoreV1().Namespaces().Delete(ctx, t.probeNS, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete namespace %s: %s", t.probeNS, OneLine(err)))
			}
		}
		if t.CP != nil {
			errs = append(errs, t.CP.Stop())
		}
		if t.Proxy != nil {
			errs = append(errs, t.Proxy.Close())
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// HasWebhook reports whether the target's cluster runs cascade's
// deletion-protection webhook: always on upstream and impl, on kubeconfig
// when the cluster has it or Spec.Webhook installed it. The webhook on
// impl is impl's, and protection-disabled switches its denials off.
func (t *Target) HasWebhook() bool { return t.hasWebhook }

// watchListDefault is the first release whose client-go lists with a
// WatchList by default (k8s.io/client-go features: WatchListClient).
var watchListDefault = model.Release{Major: 1, Minor: 35}

// Settler is how a trace's `settle` (and a concurrent fuzz run's) waits
// on this target: replay.DefaultQuiet, a quiet window, on kubeconfig;
// behind the proxy on upstream the same window stretched to outlast the
// real GC's back-off of an item it failed on (proxyQuiet); on impl,
// first until impl's queues are empty and each item of the run waiting
// out a back-off has been tried once more (ImplSettler). A quiet window
// alone ends before a failed item's next pass once its back-off is
// longer (traces/scenarios/retry-after-backoff.trace). After a CRD was created it waits for the GC's
// next discovery sync: on upstream and impl until it sees that sync take
// the CRD in (kube-controller-manager's log, impl's monitors; see
// gcsync.go), at most DefaultQuiet.GCSync; on kubeconfig that long. It is
// nil on model and impl-stepped, which settle through the model and
// through each trace's stepped impl (Stepped).
func (t *Target) Settler() replay.Target {
	q := replay.DefaultQuiet
	switch t.Spec.Name {
	case Upstream:
		q.Synced = t.kcmSyncs.Synced
		if t.Proxy != nil {
			return proxyQuiet{p: t.Proxy, then: q}
		}
	case Impl:
		q.Synced = func(crd string, since time.Time) bool {
			plural, group, _ := strings.Cut(crd, ".")
			return t.Impl.GC.MonitorSynced(schema.GroupResource{Group: group, Resource: plural}, since)
		}
		return ImplSettler(t.Impl, q)
	case Kubeconfig:
	default:
		return nil
	}
	return q
}

// StartStepped starts impl in Stepped mode on an impl-stepped target,
// with the given bugs, the adopting controller (for Herds; the harness
// installs the Herd CRD first when the cluster lacks it) and the
// deletion-protection webhook as asked, and settles it once: the
// informers' initial lists hold every system object the cluster already
// has, and a trace names only its own. Stop it after the trace.
func (t *Target) StartStepped(ctx context.Context, bs bugs.Set, adopter, withWebhook bool) (*impl.Target, error) {
	var kinds []string
	if adopter {
		kinds = []string{crds.Herd.Kind}
	}
	return t.startStepped(ctx, bs, kinds, withWebhook)
}

// StartSteppedKinds is StartStepped with the adopter managing the owner
// kinds named (adopter.Kinds, e.g. SteppedAdopterKinds; none: no
// adopter).
func (t *Target) StartSteppedKinds(ctx context.Context, bs bugs.Set, kinds []string, withWebhook bool) (*impl.Target, error) {
	return t.startStepped(ctx, bs, kinds, withWebhook)
}

// startStepped is StartSteppedKinds.
func (t *Target) startStepped(ctx context.Context, bs bugs.Set, kinds []string, withWebhook bool) (*impl.Target, error) {
	if t.Spec.Name != ImplStepped {
		return nil, fmt.Errorf("target %s cannot be stepped (impl-stepped can)", t.Spec.Name)
	}
	if slices.Contains(kinds, crds.Herd.Kind) {
		if err := crds.Install(ctx, t.Admin, crds.Herd); err != nil {
			return nil, err
		}
	}
	it, err := impl.Start(context.WithoutCancel(ctx), t.Admin, impl.Options{Mode: step.Stepped, Bugs: bs,
		Adopter: len(kinds) > 0, AdopterKinds: kinds, Webhook: withWebhook})
	if err != nil {
		return nil, err
	}
	if err := it.Settle(ctx); err != nil {
		_ = it.Stop()
		return nil, fmt.Errorf("stepped impl: initial settle: %w", err)
	}
	return it, nil
}

func (t *Target) logf(format string, args ...any) {
	if t.Spec.Log != nil {
		fmt.Fprintf(t.Spec.Log, format+"\n", args...)
	}
}

// quiet is a copy of cfg that drops the API server's warnings, which
// client-go would log: traces send questionable requests on purpose
// (duplicate ownerReferences, deletes of Jobs without a policy).
func quiet(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.WarningHandler = rest.NoWarnings{}
	return c
}

// throttle raises client-go's default client-side limit (5 requests/s,
// bursts of 10) for a kubeconfig that sets none: settling polls the
// driver's objects every 50ms. The server's own priority and fairness
// still applies.
func throttle(cfg *rest.Config) {
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 100, 200
	}
}

// detectRelease sets Spec.Release, when zero, to the release of the
// kube-apiserver in binDir and, when the target starts it (kcm), of the
// kube-controller-manager there, which may differ (a skewed control
// plane, model.Release.WithKCM), and refuses a Spec.Release those
// binaries contradict. A kube-controller-manager release Spec does not
// name (KCMNamed) is the binary's.
func (t *Target) detectRelease(binDir string, kcm bool) error {
	rel, err := BinaryRelease(binDir, controlplane.APIServerBinary)
	if err != nil {
		return err
	}
	if kcm {
		k, err := BinaryRelease(binDir, controlplane.ControllerManagerBinary)
		if err != nil {
			return err
		}
		rel = rel.WithKCM(k)
	}
	named := t.Spec.Release
	if named != (model.Release{}) && !t.Spec.KCMNamed && !named.Skewed() {
		named = named.WithKCM(rel.KCM())
	}
	if named != (model.Release{}) && named != rel {
		return inputErr("the binaries in %s are Kubernetes %s, not %s", binDir, rel, named)
	}
	t.Spec.Release = rel
	return nil
}

// JudgesKCM reports whether target name's GC is kube-controller-manager's
// (upstream, upstream-stepped), so that the release of the
// kube-controller-manager binary it starts is judged; impl starts one
// for its other controllers, and its GC is cascade's.
func JudgesKCM(name string) bool { return name == Upstream || name == UpstreamStepped }

// BinaryRelease is the release the binary name in dir reports (`NAME
// --version`); an error is an InputError.
func BinaryRelease(dir, name string) (model.Release, error) {
	v, err := controlplane.BinaryVersionOf(dir, name)
	if err != nil {
		return model.Release{}, &InputError{Err: err}
	}
	rel, err := model.ParseRelease(v)
	if err != nil {
		return rel, inputErr("%s/%s: %v", dir, name, err)
	}
	return rel, nil
}

// resolveBinDir is controlplane.ResolveBinDir, falling back to the
// checkout around the running executable (bin/cascade lives in
// <checkout>/bin), so that the binary works from any directory.
func resolveBinDir(flag string) (dir, source string, err error) {
	dir, source, err = controlplane.ResolveBinDir(flag)
	if err == nil {
		return dir, source, nil
	}
	if root, ok := executableRoot(); ok {
		return filepath.Join(root, "bin", "kube", controlplane.KubeVersion), "repository", nil
	}
	return "", "", fmt.Errorf("%v (or pass --kube-bin-dir)", err)
}

// resolveKine is controlplane.ResolveKine from the checkout around the
// working directory, else around the running executable.
func resolveKine() (string, error) {
	if os.Getenv(controlplane.KineEnv) != "" {
		return controlplane.ResolveKine("")
	}
	if wd, err := os.Getwd(); err == nil {
		if _, err := controlplane.RepoRoot(wd); err == nil {
			return controlplane.ResolveKine("")
		}
	}
	if root, ok := executableRoot(); ok {
		return controlplane.ResolveKine(filepath.Join(root, "bin", "kine", controlplane.KineVersion, controlplane.KineBinary))
	}
	return controlplane.ResolveKine("")
}

// executableRoot is the cascade checkout around the running executable
// (bin/cascade lives in <checkout>/bin).
func executableRoot() (string, bool) {
	exe, err := os.Executable()
	if err != nil {
		return "", false
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	root, err := controlplane.RepoRoot(filepath.Dir(exe))
	return root, err == nil
}

// binDirHint is the advice for a binary missing from a directory that
// came from source (controlplane.ResolveBinDir): advice that works from
// there. 'make kube' builds into bin/kube, which the harness reads only
// when neither --kube-bin-dir nor $KUBEBUILDER_ASSETS names a directory.
func binDirHint(source string) string {
	need := "etcd, kube-apiserver and kube-controller-manager"
	switch source {
	case "KUBEBUILDER_ASSETS":
		return fmt.Sprintf("(the directory $KUBEBUILDER_ASSETS names: point it at a directory holding %s, or unset it to use bin/kube/%s of the checkout, which 'make kube' builds)", need, controlplane.KubeVersion)
	case "flag":
		return fmt.Sprintf("(the directory --kube-bin-dir names: give one holding %s, or leave the flag out to use bin/kube/%s of the checkout, which 'make kube' builds)", need, controlplane.KubeVersion)
	}
	return "(run 'make kube' in the cascade checkout, or pass --kube-bin-dir)"
}
