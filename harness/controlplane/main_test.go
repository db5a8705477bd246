package controlplane_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// The smoke tests share one control plane (etcd, kube-apiserver with an
// audit log, and the upstream kube-controller-manager), started in TestMain,
// and give every test a fresh namespace.

const (
	poll    = 50 * time.Millisecond
	timeout = 30 * time.Second // generous: reaching it is a failure, not a performance verdict

	// holdFinalizer is a finalizer no controller knows, so an object carrying
	// it stays until the test removes it.
	holdFinalizer = "cascade.dev/hold"
	// driverUser is the user the tests act as, so audit records tell the
	// driver's requests from the controllers'.
	driverUser = "cascade-driver"

	// lifelineHelperEnv switches the test binary into a helper that starts
	// its own control plane and then dies (see TestNoSurvivors).
	lifelineHelperEnv = "CASCADE_LIFELINE_HELPER"
)

var (
	binDir = flag.String("kube-bin-dir", "", "directory holding etcd, kube-apiserver and kube-controller-manager "+
		"(default: $KUBEBUILDER_ASSETS, else <repo>/bin/kube/"+controlplane.KubeVersion+")")

	cp *controlplane.ControlPlane
	cs kubernetes.Interface // acts as driverUser
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	flag.Parse()
	if os.Getenv(lifelineHelperEnv) != "" {
		return m.Run() // the helper starts its own control plane
	}
	start := time.Now()
	var err error
	cp, err = controlplane.Start(context.Background(), controlplane.Options{BinDir: *binDir, ControllerManager: true, Audit: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "controlplane: started from %s in %s (working directory %s)\n",
		cp.BinDir(), time.Since(start).Round(time.Millisecond), cp.Dir())
	procs := cp.Processes()

	code := func() int {
		cfg, err := cp.AddUser(envtest.User{Name: driverUser, Groups: []string{"system:masters"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cfg.UserAgent = "cascade-smoke"
		if cs, err = kubernetes.NewForConfig(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "controlplane_test:", err)
			return 1
		}
		return m.Run()
	}()

	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	// Nothing this suite started may outlive it.
	if s := cp.Survivors(); len(s) > 0 {
		fmt.Fprintf(os.Stderr, "controlplane_test: still running after Stop: %v\n", s)
		code = 1
	}
	if len(procs) != 3 {
		fmt.Fprintf(os.Stderr, "controlplane_test: expected to track etcd, kube-apiserver and kube-controller-manager, tracked %v\n", procs)
		code = 1
	}
	return code
}

// newNamespace creates a fresh namespace for one test and arranges for the
// controller manager's log tail to be printed if the test fails. Namespaces
// are never deleted: the namespace controller does not run, and the control
// plane is thrown away after the suite.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "smoke-",
		Labels:       map[string]string{"cascade.dev/harness": "smoke"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("namespace %s; kube-controller-manager log tail (%s):\n%s",
				ns.Name, cp.ControllerManagerLog(), controlplane.LogTail(cp.ControllerManagerLog(), 60))
		}
	})
	return ns.Name
}

// TestNoSurvivors starts a control plane in a child test binary that then
// dies without running any deferred code, and checks that etcd (or kine,
// when bin/kine holds it), kube-apiserver and kube-controller-manager all
// go with it. A test that
// times out dies the same way as one that panics (the testing package's
// alarm panics).
func TestNoSurvivors(t *testing.T) {
	if mode := os.Getenv(lifelineHelperEnv); mode != "" {
		lifelineHelper(mode)
		return
	}
	modes := []string{"panic", "sigkill"}
	if _, err := controlplane.ResolveKine(""); err == nil {
		modes = append(modes, "kine-sigkill") // kine, kube-apiserver and kube-controller-manager
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			g := NewWithT(t)
			child := exec.Command(os.Args[0], "-test.run=^TestNoSurvivors$", "-kube-bin-dir="+cp.BinDir())
			child.Env = append(os.Environ(), lifelineHelperEnv+"="+mode)
			out := &syncBuffer{}
			child.Stdout, child.Stderr = out, out
			g.Expect(child.Start()).To(Succeed())
			done := make(chan error, 1)
			go func() { done <- child.Wait() }()

			var procs []controlplane.Process
			g.Eventually(func() []controlplane.Process {
				procs = parsePIDs(out.String())
				return procs
			}).WithTimeout(2*timeout).WithPolling(poll).Should(HaveLen(3), "helper output:\n%s", out)
			if strings.HasSuffix(mode, "sigkill") {
				g.Expect(child.Process.Kill()).To(Succeed())
			}
			var err error
			g.Eventually(done).WithTimeout(timeout).Should(Receive(&err))
			g.Expect(err).To(HaveOccurred(), "the helper must die, output:\n%s", out)
			g.Eventually(func() []controlplane.Process {
				var alive []controlplane.Process
				for _, p := range procs {
					if p.Running() {
						alive = append(alive, p)
					}
				}
				return alive
			}).WithTimeout(5*time.Second).WithPolling(poll).Should(BeEmpty(), "processes outlived their parent")
			// The helper could not clean up; a later Start would sweep its
			// directory, but do not leave etcd's 64 MiB WAL until then.
			if dir := lineValue(out.String(), "DIR "); dir != "" {
				g.Expect(os.RemoveAll(dir)).To(Succeed())
			}
		})
	}
}

// lifelineHelper runs in the child of TestNoSurvivors: it starts a control
// plane, reports its processes on one line and dies without calling Stop.
func lifelineHelper(mode string) {
	opts := controlplane.Options{BinDir: *binDir, ControllerManager: true}
	if strings.HasPrefix(mode, "kine-") {
		opts.Datastore = controlplane.DatastoreKine
	}
	cp, err := controlplane.Start(context.Background(), opts)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	var b strings.Builder
	for _, p := range cp.Processes() {
		fmt.Fprintf(&b, " %s=%d", p.Name, p.PID)
	}
	fmt.Printf("DIR %s\nPIDS%s\n", cp.Dir(), b.String())
	if mode == "panic" {
		panic("lifeline helper: deliberate panic with a running control plane")
	}
	time.Sleep(time.Hour) // sigkill: wait to be killed
}

// parsePIDs reads the helper's "PIDS name=pid ..." line.
func parsePIDs(out string) []controlplane.Process {
	var procs []controlplane.Process
	for _, f := range strings.Fields(lineValue(out, "PIDS ")) {
		name, pid, _ := strings.Cut(f, "=")
		if n, err := strconv.Atoi(pid); err == nil {
			procs = append(procs, controlplane.Process{Name: name, PID: n})
		}
	}
	return procs
}

// lineValue returns the rest of the first line of out that starts with
// prefix, or "".
func lineValue(out, prefix string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe for one writer (the child's output
// copier) and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
