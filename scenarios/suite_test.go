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

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/traces"
)

var (
	targetsFlag = flag.String("targets", "model,upstream", "comma-separated targets to run: model, upstream")
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
	BeforeAll(func(ctx SpecContext) {
		if !enabled("upstream") {
			Skip("target upstream not selected (-targets)")
		}
		var err error
		cp, err = controlplane.Start(ctx, controlplane.Options{BinDir: *kubeBinDir, ControllerManager: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				GinkgoWriter.Printf("kube-controller-manager log tail:\n%s\n", controlplane.LogTail(cp.ControllerManagerLog(), 40))
			}
			Expect(cp.Stop()).To(Succeed())
		})
	}, NodeTimeout(3*time.Minute))
	for _, tr := range all {
		if !replay.Runnable(tr, "upstream") {
			continue
		}
		It(name(tr), labels(tr, "upstream"), func(ctx SpecContext) {
			if missing := unsupported(tr); missing != "" {
				Skip(missing)
			}
			d, err := driver.New(cp.Config, nil, "cascade-"+driver.NewRunID())
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx context.Context) { _ = d.Cleanup(ctx) })
			outs, err := replay.Run(ctx, tr, d, replay.DefaultQuiet)
			Expect(err).NotTo(HaveOccurred())
			Expect(replay.Diff(tr, "upstream", outs)).To(Succeed())
		}, SpecTimeout(3*time.Minute))
	}
})

// unsupported names what the upstream target of this build still lacks
// for a trace, or "".
func unsupported(tr *traces.Trace) string {
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if strings.Contains(c.Text, "as=limited") {
				return "needs a principal without finalizers permission and OwnerReferencesPermissionEnforcement on the target"
			}
		}
	}
	if strings.Contains(tr.Header(traces.HeaderLabels), "protection") {
		return "needs the deletion-protection webhook on the target"
	}
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if strings.HasPrefix(c.Text, "create pv/") {
				return "needs StorageObjectInUseProtection off on the target: no pv-protection controller runs, so its finalizer would hold PVs"
			}
		}
	}
	return ""
}
