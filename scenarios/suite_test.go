package scenarios

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/traces"
)

var (
	targetsFlag = flag.String("targets", "model,upstream,impl,impl-stepped,upstream-stepped", "comma-separated targets to run: model, upstream, impl, impl-stepped, upstream-stepped")
	kubeBinDir  = flag.String("kube-bin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager (default: KUBEBUILDER_ASSETS, then bin/kube/"+controlplane.KubeVersion+"); the suite judges the release of its kube-apiserver")
	datastore   = flag.String("datastore", "", "what the envtest targets' kube-apiserver stores objects in: etcd (default), or kine (bin/kine, 'make kine')")
)

func TestScenarios(t *testing.T) {
	// controller-runtime (the webhook) otherwise prints a warning with a
	// stack on stderr, among the progress lines; client-go's klog (impl's
	// reflectors retrying the resource of a deleted CRD) goes with the
	// spec's output, shown when it fails
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(GinkgoLogr)
	RegisterFailHandler(Fail)
	RunSpecs(t, "cascade scenarios")
}

// all are the suite's traces, loaded at tree-construction time so that
// each one becomes its own entry: the files of traces/scenarios and
// traces/races as the cascade binary embeds them.
var all = func() []*traces.Trace {
	trs, err := traces.Embedded(traces.DirScenarios, traces.DirRaces)
	if err != nil {
		panic(err) // a malformed trace is a broken suite: say where
	}
	return trs
}()

func enabled(name string) bool {
	return slices.Contains(strings.Split(*targetsFlag, ","), name)
}

// labels turns a trace's `# labels:` header into Ginkgo labels.
func labels(tr *traces.Trace, name string) Labels {
	ls := Labels{name}
	for _, l := range strings.Split(tr.Header(traces.HeaderLabels), ",") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

var _ = onTarget(target.Model, "on the model")
var _ = onTarget(target.Upstream, "on upstream kube-controller-manager")
var _ = onTarget(target.Impl, "on impl")
var _ = onTarget(target.ImplStepped, "on impl, stepped")
var _ = onTarget(target.UpstreamStepped, "on upstream kube-controller-manager, stepped through the API proxy")

// onTarget starts the target once (harness/target, as `cascade conform`
// does) and replays on it every trace it can run: one entry per trace
// whose headers and commands fit the target (target.SpecSkip). What only
// the started target can tell (target.Skip) skips the entry with the
// reason.
func onTarget(name, description string) bool {
	return Describe(description, Ordered, ContinueOnFailure, Label(name), func() {
		spec := target.Spec{Name: name}
		if name != target.Model {
			spec.BinDir, spec.Datastore = *kubeBinDir, *datastore
		}
		var t *target.Target
		BeforeAll(func(ctx SpecContext) {
			if !enabled(name) {
				Skip("target " + name + " not selected (-targets)")
			}
			var err error
			t, err = target.Start(ctx, spec)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() {
				if t.CP != nil && t.CP.ControllerManagerLog() != "" && CurrentSpecReport().Failed() {
					GinkgoWriter.Printf("kube-controller-manager log tail:\n%s\n", controlplane.LogTail(t.CP.ControllerManagerLog(), 40))
				}
				Expect(t.Close()).To(Succeed())
			})
		}, NodeTimeout(3*time.Minute))
		for _, tr := range all {
			if target.SpecSkip(spec, tr) != "" {
				continue
			}
			It(traces.ShortName(tr), labels(tr, name), func(ctx SpecContext) {
				v := t.Check(ctx, tr)
				if v.Skip != "" {
					Skip(v.Skip)
				}
				Expect(v.Err).NotTo(HaveOccurred())
				if v.Divergence != nil && name != target.Model {
					for i, out := range v.Outs { // the real messages, which the comparison leaves out
						GinkgoWriter.Printf("stanza %d on %s:\n  %s\n", i+1, name, strings.Join(out, "\n  "))
					}
				}
				Expect(v.Divergence).NotTo(HaveOccurred())
			}, SpecTimeout(3*time.Minute))
		}
	})
}

// Every target must run something, or the selection is broken.
var _ = Describe("the suite", func() {
	It("gives every target traces to run", func() {
		for _, name := range suiteTargets {
			n := 0
			for _, tr := range all {
				if target.SpecSkip(target.Spec{Name: name}, tr) == "" {
					n++
				}
			}
			Expect(n).To(BeNumerically(">", 0), "no trace runs on %s", name)
		}
	})
})
