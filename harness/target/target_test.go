package target

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/impl/adopter"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

func embedded(t *testing.T, name string) *traces.Trace {
	t.Helper()
	tr, err := traces.FindEmbedded(name)
	if err != nil || tr == nil {
		t.Fatalf("embedded trace %s: %v", name, err)
	}
	return tr
}

// TestSpecSkip: the reasons a trace cannot run follow its headers and
// commands, target by target, as the scenario suite selects them.
func TestSpecSkip(t *testing.T) {
	cases := []struct {
		spec  Spec
		trace string
		want  string // substring of the reason; "" means it runs
	}{
		{Spec{Name: Model}, "race/finalizer-after-deletion", ""},
		{Spec{Name: Upstream}, "scenario/background", ""},
		{Spec{Name: Upstream}, "race/orphan-adoption", "does not name upstream"},
		{Spec{Name: Upstream}, "scenario/crd-monitor-sync", "does not name upstream"},
		{Spec{Name: Kubeconfig}, "scenario/background", ""},
		{Spec{Name: Kubeconfig}, "scenario/bad-requests", "no limited principal"},
		{Spec{Name: Kubeconfig, LimitedContext: "lim"}, "scenario/bad-requests", ""},
		{Spec{Name: Kubeconfig}, "race/orphan-adoption", "does not name upstream"},
		{Spec{Name: Impl}, "scenario/crd-monitor-sync", "GC or controller steps"},
		{Spec{Name: Impl}, "race/protection-disabled", "needs exactly bug protection-disabled"},
		{Spec{Name: Impl, Inject: bugs.Of(bugs.ProtectionDisabled)}, "race/protection-disabled", ""},
		{Spec{Name: Impl, Inject: bugs.Of(bugs.ProtectionDisabled)}, "scenario/background", ""},
		{Spec{Name: ImplStepped}, "scenario/background", "runs on impl"},
		{Spec{Name: ImplStepped}, "race/delete-without-rv-owner-moved", ""},
		{Spec{Name: ImplStepped}, "race/kubernetes-114603", "holds for before v1.34.0, not v1.37.2"},
		{Spec{Name: Model}, "race/kubernetes-114603", ""},
		{Spec{Name: Model, Release: model.Release{Major: 1, Minor: 37, Patch: 2}}, "race/kubernetes-114603", "holds for before v1.34.0, not v1.37.2"},
		{Spec{Name: Model, Release: model.Release{Major: 1, Minor: 33, Patch: 13}}, "race/kubernetes-114603-fixed", "holds for v1.34.0 and later, not v1.33.13"},
		{Spec{Name: Upstream, Release: model.Release{Major: 1, Minor: 33, Patch: 13}}, "scenario/background", ""},
		{Spec{Name: ImplStepped}, "race/protection-disabled", ""},
		{Spec{Name: ImplStepped}, "race/orphan-adoption", ""},
		{Spec{Name: ImplStepped}, "race/orphan-adoption-fixed", ""},
		{Spec{Name: ImplStepped}, "race/finalizer-after-deletion", "does not name impl"},
		{Spec{Name: UpstreamStepped}, "race/kubernetes-26120", ""},
		{Spec{Name: UpstreamStepped}, "race/gc-retry-overrides-orphan", ""},
		{Spec{Name: UpstreamStepped}, "scenario/background", "takes no GC step: it runs on upstream"},
		{Spec{Name: UpstreamStepped}, "race/orphan-adoption", "needs bug adopt-without-recheck"},
		{Spec{Name: UpstreamStepped}, "race/orphan-adoption-fixed", ""},
		{Spec{Name: UpstreamStepped}, "race/relist-uid-change", ""},
		{Spec{Name: UpstreamStepped}, "scenario/crd-sync-lists-before-next-create", ""},
		{Spec{Name: UpstreamStepped}, "scenario/crd-initial-list-in-any-order", ""},
		{Spec{Name: UpstreamStepped}, "scenario/crd-status-events", ""},
		{Spec{Name: UpstreamStepped}, "scenario/crd-monitor-sync", "work item for Widget/owner waits in attemptToDelete for that sync"},
		{Spec{Name: UpstreamStepped}, "race/kubernetes-115570-relist", ""},
		{Spec{Name: UpstreamStepped}, "race/kubernetes-115570", "needs bug lost-first-update"},
		{Spec{Name: UpstreamStepped}, "scenario/controller-release", "rs/web controls 2 active Pods with replicas=0; the real controller scales its Pods"},
		{Spec{Name: UpstreamStepped}, "race/stranded-virtual-node", "names neither upstream nor impl"},
		{Spec{Name: UpstreamStepped}, "race/kubernetes-114603", "holds for before v1.34.0"},
		{Spec{Name: UpstreamStepped, Release: model.Release{Major: 1, Minor: 33, Patch: 13}}, "race/kubernetes-114603", ""},
		{Spec{Name: Upstream, Release: model.Release{Major: 1, Minor: 33, Patch: 13}}, "race/kubernetes-114603", "does not name upstream"},
		{Spec{Name: Impl, Release: model.Release{Major: 1, Minor: 33, Patch: 13}}, "race/gc-retry-overrides-orphan", "holds for v1.34.0 and later, not v1.33.13"},
		// a deliver-virtual right after the worker step of its key that
		// queued the event, as the real graph builder takes it
		{Spec{Name: UpstreamStepped}, "scenario/orphan-reference-added-back", ""},
		{Spec{Name: UpstreamStepped}, "scenario/virtual-owner-two-identities", ""},
		{Spec{Name: UpstreamStepped}, "scenario/foreground-ignores-cross-namespace-blocker", ""},
		{Spec{Name: UpstreamStepped}, "scenario/gc-delete-notfound", ""},
		// a CRD's cleanup right after the client's DELETE of the CRD, as
		// kube-apiserver begins it
		{Spec{Name: UpstreamStepped}, "scenario/crd-cleanup-deletes-in-key-order", ""},
		{Spec{Name: UpstreamStepped}, "scenario/crd-recreated-between-syncs", ""},
		// a monitor started again after a sync stopped it: the real
		// GC's informer outlived the first
		{Spec{Name: UpstreamStepped}, "scenario/crd-recreated-after-sync-stops-monitor", "the GC monitors gizmos again after an earlier sync stopped the monitor"},
		{Spec{Name: UpstreamStepped}, "scenario/crd-stopped-monitor-forgets-events", "the GC monitors widgets again after an earlier sync stopped the monitor"},
	}
	for _, c := range cases {
		got := SpecSkip(c.spec, embedded(t, c.trace))
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s on %s (inject %s): skip %q, want %q", c.trace, c.spec.Name, c.spec.Inject, got, c.want)
		}
	}
	// a stepped trace that creates the Herd CRD itself runs on
	// impl-stepped with its Herds unmanaged (impl's stepped adopter needs
	// the CRD before it starts), unless the Herd controller can decide
	// its outcome
	herds := func(extra string) *traces.Trace {
		tr, err := traces.Parse("herds.trace", strings.NewReader(`# targets: model, impl

create crd/herds.cascade.dev
create herd/web selector=app=web
gc deliver herd/web
`+extra+`----
crd/herds.cascade.dev live
herd/web live selector=app=web
`))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for _, c := range []struct{ extra, want string }{
		{"", ""},
		{"controller deliver herd/web\n", "its Herds' controller can decide its outcome"},
		{"create pod/p labels=app=web\nsettle\n", "its Herds' controller can decide its outcome"},
		{"create cm/p\nsettle\n", ""},
	} {
		if got := SpecSkip(Spec{Name: ImplStepped}, herds(c.extra)); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("a stepped trace creating the Herd CRD, with %q, on impl-stepped: skip %q, want %q", c.extra, got, c.want)
		}
	}
}

// TestDeliverVirtualOnlyAfterItsWorkerStep: upstream-stepped produces a
// `gc deliver-virtual KEY` only right after the worker step of KEY that
// queued the event, client requests at most between: the real graph
// builder takes the event at once, before any later GC step, so another
// GC step, a settle or another key's step between is an interleaving it
// does not have.
func TestDeliverVirtualOnlyAfterItsWorkerStep(t *testing.T) {
	skipsBetween(t, `create cm/a
create cm/b owner=cm/a
settle
----
cm/a live
cm/b live owner=cm/a

delete cm/a
gc deliver cm/a
delete cm/b
gc attemptToDelete cm/b
BETWEEN
gc deliver-virtual cm/b
----
`, []betweenCase{
		{"", ""},
		{"create cm/c", ""},
		{"----\n\n", ""}, // a new stanza: a virtual event changes nothing a dump reads
		{"gc deliver cm/b", `it follows "gc deliver cm/b"`},
		{"settle", `it follows "settle"`},
	})
	st, err := model.ParseStep("gc deliver-virtual cm/b")
	if err != nil {
		t.Fatal(err)
	}
	if why := Unsteppable(st); why == "" {
		t.Error("a deliver-virtual alone is steppable: lockstep would draw it, though the real GC takes the event by itself")
	}
}

// TestCleanupOnlyAfterItsDelete: upstream-stepped produces an
// `apiextensions cleanup crd/X` only right after the client's `delete
// crd/X`: kube-apiserver begins the cleanup by itself at once, so any
// step between is an interleaving the real API server does not have.
func TestCleanupOnlyAfterItsDelete(t *testing.T) {
	skipsBetween(t, `create crd/widgets.cascade.dev
gc sync
create widget/a
gc deliver widget/a
----
crd/widgets.cascade.dev live
widget/a live

delete crd/widgets.cascade.dev
BETWEEN
apiextensions cleanup crd/widgets.cascade.dev
----
`, []betweenCase{
		{"", ""},
		{"create widget/b", `it follows "create widget/b"`},
		{"gc deliver crd/widgets.cascade.dev", `it follows "gc deliver crd/widgets.cascade.dev"`},
		{"----\n\n", "it comes first"}, // the dump would read the cleanup under way
		{"delete crd/widgets.cascade.dev", "the DELETE just before did not begin the CRD's deletion"},
	})
	// a custom resource's finalizer holds the CRD: the real cleanup waits
	skipsBetween(t, `create crd/widgets.cascade.dev
gc sync
create widget/a finalizers=cascade.dev/hold
----
crd/widgets.cascade.dev live
widget/a live finalizers=[cascade.dev/hold]

delete crd/widgets.cascade.dev
BETWEEN
apiextensions cleanup crd/widgets.cascade.dev
----
`, []betweenCase{{"", "the cleanup leaves the CRD in place"}})
}

// betweenCase is a command put between two steps of a trace, and the
// skip reason upstream-stepped must give ("": it runs).
type betweenCase struct{ between, want string }

// skipsBetween parses body (after a targets header) with each case's
// command in place of the line BETWEEN (none for "") and checks
// upstream-stepped's skip reason.
func skipsBetween(t *testing.T, body string, cases []betweenCase) {
	t.Helper()
	for _, c := range cases {
		text := strings.Replace(body, "BETWEEN\n", c.between+"\n", 1)
		if c.between == "" {
			text = strings.Replace(body, "BETWEEN\n", "", 1)
		}
		tr, err := traces.Parse("between.trace", strings.NewReader("# targets: model, impl\n\n"+text))
		if err != nil {
			t.Fatal(err)
		}
		if got := SpecSkip(Spec{Name: UpstreamStepped}, tr); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("with %q between: skip %q, want %q", c.between, got, c.want)
		}
	}
}

// TestTargetSkip: what only a started target knows; a hand-built Target
// stands for one, since these checks read its fields only.
func TestTargetSkip(t *testing.T) {
	kc := &Target{Spec: Spec{Name: Kubeconfig, LimitedContext: "lim"}, Admin: &rest.Config{}}
	if got := kc.Skip(context.Background(), embedded(t, "scenario/protection-always")); !strings.Contains(got, "deletion-protection webhook") {
		t.Errorf("protection trace without a webhook: skip %q", got)
	}
	up := &Target{Spec: Spec{Name: Upstream}, Admin: &rest.Config{}}
	if got := up.Skip(context.Background(), embedded(t, "scenario/bad-requests")); !strings.Contains(got, "no limited principal") {
		t.Errorf("as=limited without a limited principal: skip %q", got)
	}
	up.Limited = &rest.Config{}
	if got := up.Skip(context.Background(), embedded(t, "scenario/bad-requests")); got != "" {
		t.Errorf("as=limited with a limited principal: skip %q", got)
	}
	// a settle that must wait out the GC's back-off needs the proxy's
	// record of the GC's failed writes
	backoff := embedded(t, "scenario/retry-after-backoff")
	if got := up.Skip(context.Background(), backoff); got != "" {
		t.Errorf("the back-off trace on upstream: skip %q", got)
	}
	noProxy := &Target{Spec: Spec{Name: Upstream, NoProxy: true}, Admin: &rest.Config{}, hasWebhook: true}
	kc.hasWebhook = true
	for _, tg := range []*Target{noProxy, kc} {
		if got := tg.Skip(context.Background(), backoff); !strings.Contains(got, "back-off") {
			t.Errorf("the back-off trace on %s (no proxy %v): skip %q", tg.Spec.Name, tg.Spec.NoProxy, got)
		}
	}
}

// TestSuiteSelection: every trace runs on the model and on exactly one of
// impl and impl-stepped when it names impl, as in the scenario suite.
func TestSuiteSelection(t *testing.T) {
	all, err := traces.Embedded(traces.DirScenarios, traces.DirRaces)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range all {
		if why := SpecSkip(Spec{Name: Model}, tr); why != "" {
			t.Errorf("%s skipped on the model: %s", tr.Path, why)
		}
		if !strings.Contains(tr.Header(traces.HeaderTargets), "impl") {
			continue
		}
		auto, stepped := SpecSkip(Spec{Name: Impl}, tr) == "", SpecSkip(Spec{Name: ImplStepped}, tr) == ""
		if auto && stepped {
			t.Errorf("%s runs on impl and on impl-stepped", tr.Path)
		}
	}
}

// TestValidate: a Spec's fields must fit its target, and the errors say
// which.
func TestValidate(t *testing.T) {
	bad := []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "kind"}, `unknown target "kind" (valid: model, upstream, impl, impl-stepped, upstream-stepped, kubeconfig)`},
		{Spec{Name: Upstream, Inject: bugs.Of(bugs.NoCycleUnblock)}, "impl and impl-stepped only"},
		{Spec{Name: Impl, Inject: bugs.Set{bugs.FinalizerAfterDeletion: true}}, "cannot be injected"},
		{Spec{Name: Upstream, Kubeconfig: "x"}, "kubeconfig target"},
		{Spec{Name: Impl, Webhook: true}, "kubeconfig target"},
		{Spec{Name: Kubeconfig, BinDir: "/x"}, "envtest targets"},
		{Spec{Name: Upstream, Datastore: "sqlite"}, `unknown datastore "sqlite" (want etcd or kine)`},
		{Spec{Name: Model, Datastore: "kine"}, "a datastore is chosen for the envtest targets (upstream, impl, impl-stepped), not model"},
		{Spec{Name: Kubeconfig, Datastore: "etcd"}, "envtest targets"},
		{Spec{Name: Upstream, NoProxy: true, InformerLag: time.Second}, "behind the API proxy"},
		{Spec{Name: ImplStepped, WriteDelay: time.Second}, "behind the API proxy"},
		{Spec{Name: Impl, NoProxy: true}, "upstream only"},
		{Spec{Name: Impl, RestartKCM: time.Second}, "kube-controller-manager restart"},
		{Spec{Name: Upstream, RestartKCM: -time.Second}, "kube-controller-manager restart"},
	}
	for _, b := range bad {
		err := b.spec.Validate()
		var in *InputError
		if err == nil || !errors.As(err, &in) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: %v, want an InputError with %q", b.spec, err, b.want)
		}
	}
	for _, good := range []Spec{
		{Name: ImplStepped, Inject: bugs.Of(bugs.NoCycleUnblock)},
		{Name: ImplStepped, Datastore: "kine"},
		{Name: Upstream, Datastore: "etcd"},
		// the faults on the real binary, through the proxy
		{Name: Upstream, InformerLag: time.Second, InformerRelist: time.Second, WriteDelay: time.Second, RestartKCM: time.Second},
		{Name: Upstream, NoProxy: true, RestartKCM: time.Second},
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("%+v: %v", good, err)
		}
	}
}

// TestKubeconfigRoundTrip: WriteKubeconfig writes what LoadKubeconfig
// reads back, context by context, with the file private.
func TestKubeconfigRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "kubeconfig")
	admin := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}
	limited := &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "token", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	if _, err := WriteKubeconfig(path, Context{Name: "cascade", Config: admin}, Context{Name: "cascade-limited", Config: limited}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig file: %v %v", fi, err)
	}
	cfg, where, err := LoadKubeconfig(path, "")
	if err != nil || cfg.Host != admin.Host || string(cfg.CertData) != "cert" || string(cfg.CAData) != "ca" || where != `context "cascade" in kubeconfig `+path {
		t.Fatalf("current context: %+v %q %v", cfg, where, err)
	}
	cfg, _, err = LoadKubeconfig(path, "cascade-limited")
	if err != nil || cfg.BearerToken != "token" {
		t.Fatalf("limited context: %+v %v", cfg, err)
	}
	if _, err := WriteKubeconfig(filepath.Join(t.TempDir(), "x"), Context{Name: "x", Config: &rest.Config{Host: "https://h"}}); err == nil {
		t.Fatal("a configuration without inline credentials must be refused")
	}
}

// TestKubeconfigErrors: a missing file, an unknown context and an
// unreachable cluster are InputErrors of one line that name the
// kubeconfig and the context.
func TestKubeconfigErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	_, err := Start(context.Background(), Spec{Name: Kubeconfig, Kubeconfig: missing})
	var in *InputError
	if !errors.As(err, &in) || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "\n") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	path := filepath.Join(dir, "kubeconfig")
	// port 1 on the loopback address refuses connections at once
	dead := &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if _, err := WriteKubeconfig(path, Context{Name: "dead", Config: dead}); err != nil {
		t.Fatal(err)
	}
	_, err = Start(context.Background(), Spec{Name: Kubeconfig, Kubeconfig: path, Context: "nope"})
	if !errors.As(err, &in) || !strings.Contains(err.Error(), `context "nope" in kubeconfig `+path) {
		t.Errorf("unknown context: %v", err)
	}
	_, err = Start(context.Background(), Spec{Name: Kubeconfig, Kubeconfig: path})
	if !errors.As(err, &in) || !strings.Contains(err.Error(), `cannot reach the cluster of context "dead" in kubeconfig `+path+" at https://127.0.0.1:1") || strings.Contains(err.Error(), "\n") {
		t.Errorf("unreachable cluster: %v", err)
	}
}

// TestImplAdopterReplacesWorkloadControllers: with impl's adopter (asked
// for, as cascade fuzz does, or implied by its bug) the impl target does
// not start kube-controller-manager's deployment, replicaset and
// replicationcontroller controllers, which would adopt alongside it, and
// keeps the job and cronjob controllers, whose adoption the adopter does
// not cover; without it, all of them run.
func TestImplAdopterReplacesWorkloadControllers(t *testing.T) {
	adopterOnly := []string{"job", "cronjob"}
	for _, c := range []struct {
		spec    Spec
		adopts  bool
		running []string
	}{
		{Spec{Name: Impl}, false, WorkloadControllers},
		{Spec{Name: Impl, Adopter: true}, true, adopterOnly},
		{Spec{Name: Impl, Inject: bugs.Of(bugs.AdoptWithoutRecheck)}, true, adopterOnly},
	} {
		if got := c.spec.implAdopts(); got != c.adopts {
			t.Errorf("%+v: impl's adopter adopts = %v, want %v", c.spec, got, c.adopts)
		}
		if got := c.spec.implControllers(); !slices.Equal(got, c.running) {
			t.Errorf("%+v: kube-controller-manager runs %v, want %v", c.spec, got, c.running)
		}
	}
	for _, k := range SteppedAdopterKinds {
		if !slices.Contains(adopter.Kinds, k) {
			t.Errorf("impl's adopter does not manage %s", k)
		}
	}
}
