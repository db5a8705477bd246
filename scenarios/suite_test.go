package scenarios

import (
	"context"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/step"
	"github.com/cascade-k8s/cascade/impl/webhook"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

var (
	targetsFlag = flag.String("targets", "model,upstream,impl,impl-stepped", "comma-separated targets to run: model, upstream, impl, impl-stepped")
	kubeBinDir  = flag.String("kube-bin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager (default: KUBEBUILDER_ASSETS, then bin/kube/v1.36.3)")
)

func TestScenarios(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "cascade scenarios")
}

// traceFiles lists the suite's traces, loaded at tree-construction time so
// that each one becomes its own Entry.
func traceFiles() []*traces.Trace {
	var out []*traces.Trace
	for _, dir := range []string{"../traces/scenarios", "../traces/races"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.trace"))
		if err != nil {
			panic(err)
		}
		for _, f := range files {
			tr, err := traces.ParseFile(f)
			if err != nil {
				panic(err) // a malformed trace is a broken suite: say where
			}
			out = append(out, tr)
		}
	}
	return out
}

func enabled(target string) bool {
	return slices.Contains(strings.Split(*targetsFlag, ","), target)
}

// labels turns a trace's `# labels:` header into Ginkgo labels.
func labels(tr *traces.Trace, target string) Labels {
	ls := Labels{target}
	for _, l := range strings.Split(tr.Header(traces.HeaderLabels), ",") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

func name(tr *traces.Trace) string {
	return strings.TrimSuffix(filepath.Base(filepath.Dir(tr.Path)), "s") + "/" + strings.TrimSuffix(filepath.Base(tr.Path), ".trace")
}

var all = traceFiles()

var _ = Describe("on the model", Label("model"), func() {
	for _, tr := range all {
		if !replay.Runnable(tr, "model") {
			continue
		}
		It(name(tr), labels(tr, "model"), func() {
			if !enabled("model") {
				Skip("target model not selected (-targets)")
			}
			results, _, err := traces.Replay(tr)
			Expect(err).NotTo(HaveOccurred())
			Expect(traces.Diff(tr, results)).To(Succeed())
			Expect(traces.CheckHeaders(tr, results)).To(Succeed())
		})
	}
})

var _ = Describe("on upstream kube-controller-manager", Ordered, ContinueOnFailure, Label("upstream"), func() {
	var cp *controlplane.ControlPlane
	var limited *rest.Config
	BeforeAll(func(ctx SpecContext) {
		if !enabled("upstream") {
			Skip("target upstream not selected (-targets)")
		}
		cp, limited = startControlPlane(ctx, true, nil)
		// the webhook outlives this node: Ginkgo cancels ctx when it ends
		w, err := webhook.Install(context.WithoutCancel(ctx), cp.Config, webhook.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) { Expect(w.Stop(ctx)).To(Succeed()) })
	}, NodeTimeout(3*time.Minute))
	for _, tr := range all {
		if !replay.Runnable(tr, "upstream") {
			continue
		}
		It(name(tr), labels(tr, "upstream"), func(ctx SpecContext) {
			runOnCluster(ctx, tr, "upstream", cp, limited, func(*driver.Driver) replay.Target { return replay.DefaultQuiet })
		}, SpecTimeout(3*time.Minute))
	}
})

var _ = Describe("on impl", Ordered, ContinueOnFailure, Label("impl"), func() {
	var cp *controlplane.ControlPlane
	var limited *rest.Config
	BeforeAll(func(ctx SpecContext) {
		if !enabled("impl") {
			Skip("target impl not selected (-targets)")
		}
		cp, limited = startControlPlane(ctx, true, workloadControllers)
		t, err := impl.Start(context.WithoutCancel(ctx), cp.Config, impl.Options{Mode: step.Auto, Webhook: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(t.Stop()).To(Succeed()) })
	}, NodeTimeout(3*time.Minute))
	for _, tr := range all {
		if !replay.Runnable(tr, "impl") || needsSteps(tr) || tr.Header(traces.HeaderBug) != "" {
			continue // stepped, or needs its own impl with the trace's bugs
		}
		It(name(tr), labels(tr, "impl"), func(ctx SpecContext) {
			runOnCluster(ctx, tr, "impl", cp, limited, func(*driver.Driver) replay.Target { return replay.DefaultQuiet })
		}, SpecTimeout(3*time.Minute))
	}
})

var _ = Describe("on impl, stepped", Ordered, ContinueOnFailure, Label("impl-stepped"), func() {
	var cp *controlplane.ControlPlane
	var limited *rest.Config
	BeforeAll(func(ctx SpecContext) {
		if !enabled("impl-stepped") {
			Skip("target impl-stepped not selected (-targets)")
		}
		// no kube-controller-manager at all: every GC and controller step
		// is the trace's to take
		cp, limited = startControlPlane(ctx, false, nil)
	}, NodeTimeout(3*time.Minute))
	for _, tr := range all {
		if !replay.Runnable(tr, "impl") || (!needsSteps(tr) && tr.Header(traces.HeaderBug) == "") {
			continue
		}
		It(name(tr), labels(tr, "impl"), func(ctx SpecContext) {
			if why := steppedUnsupported(tr); why != "" {
				Skip(why)
			}
			bugs, err := tr.Bugs()
			Expect(err).NotTo(HaveOccurred())
			set, err := implBugs(bugs)
			if err != nil {
				Skip(err.Error())
			}
			t, err := impl.Start(context.WithoutCancel(ctx), cp.Config, impl.Options{Mode: step.Stepped, Bugs: set, Adopter: usesHerds(tr), Webhook: strings.Contains(tr.Header(traces.HeaderLabels), "protection")})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { Expect(t.Stop()).To(Succeed()) })
			// the informers' initial lists hold every system object the
			// cluster already has; a trace names only its own
			Expect(t.Settle(ctx)).To(Succeed())
			runOnCluster(ctx, tr, "impl", cp, limited, func(d *driver.Driver) replay.Target { return steppedImpl{t: t, d: d} })
		}, SpecTimeout(3*time.Minute))
	}
})

// startControlPlane starts envtest, with kube-controller-manager running
// controllers when kcm is set (nil: the default set, garbage collector
// included), and provisions the limited principal.
func startControlPlane(ctx context.Context, kcm bool, controllers []string) (*controlplane.ControlPlane, *rest.Config) {
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: *kubeBinDir, ControllerManager: kcm, Controllers: controllers})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if kcm && CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("kube-controller-manager log tail:\n%s\n", controlplane.LogTail(cp.ControllerManagerLog(), 40))
		}
		Expect(cp.Stop()).To(Succeed())
	})
	limited, err := cp.Limited(ctx)
	Expect(err).NotTo(HaveOccurred())
	return cp, limited
}

// runOnCluster replays one trace through a fresh driver (its own
// namespaces) and compares every stanza.
func runOnCluster(ctx context.Context, tr *traces.Trace, target string, cp *controlplane.ControlPlane, limited *rest.Config, make func(*driver.Driver) replay.Target) {
	d, err := driver.New(cp.Config, limited, "cascade-"+driver.NewRunID())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) { _ = d.Cleanup(ctx) })
	outs, err := replay.Run(ctx, tr, d, make(d))
	Expect(err).NotTo(HaveOccurred())
	if err := replay.Diff(tr, target, outs); err != nil {
		for i, out := range outs { // the real messages, which the comparison leaves out
			GinkgoWriter.Printf("stanza %d on %s:\n  %s\n", i+1, target, strings.Join(out, "\n  "))
		}
		Fail(err.Error())
	}
}

// needsSteps reports whether a trace names GC or controller steps, which
// only a stepped target can take.
func needsSteps(tr *traces.Trace) bool {
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if !c.Settle && c.Step.Actor != model.ActorClient {
				return true
			}
		}
	}
	return false
}

// steppedUnsupported names what a stepped impl run cannot replay: impl's
// adopting controller manages Herds only, so controller steps on the
// built-in workloads (which kube-controller-manager's own controllers
// take, unstepped) have no stepped counterpart.
func steppedUnsupported(tr *traces.Trace) string {
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if c.Step.Actor == model.ActorController && c.Step.By.Kind.Info().Short != "herd" {
				return "impl's stepped adopter manages Herds; controller steps on " + c.Step.By.Kind.Info().Kind + " have no stepped counterpart"
			}
		}
	}
	return ""
}

func usesHerds(tr *traces.Trace) bool {
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if strings.Contains(c.Text, "herd/") {
				return true
			}
		}
	}
	return false
}

// implBugs maps the trace's bug switches onto impl's catalogue.
func implBugs(set model.BugSet) (bugs.Set, error) {
	var names []string
	for _, b := range set.List() {
		names = append(names, b.String())
	}
	return bugs.Parse(names)
}
