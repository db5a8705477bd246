// Package testenv is what impl's envtest-backed tests share: one control
// plane per test package (started in TestMain through
// harness/controlplane), clients acting as a driver user, fresh
// namespaces, object builders in trace terms, polling assertions and a
// goroutine leak check.
// Only _test.go files import it.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/impl/crds"
)

const (
	// Poll is the polling interval of Eventually.
	Poll = 50 * time.Millisecond
	// Timeout is generous: reaching it is a failure, not a verdict on speed.
	Timeout = 60 * time.Second
	// Hold is a finalizer nothing removes but the test.
	Hold = "cascade.dev/hold"
	// DriverUser is the user tests act as.
	DriverUser = "cascade-driver"
)

var binDir = flag.String("kube-bin-dir", "", "directory holding etcd and kube-apiserver (default: $KUBEBUILDER_ASSETS, else <repo>/bin/kube/"+controlplane.KubeVersion+")")

// Env is a running control plane with driver clients.
type Env struct {
	CP *controlplane.ControlPlane
	// Admin is a system:masters configuration for components under test.
	Admin *rest.Config
	// Driver acts as DriverUser (also system:masters), for test requests.
	Driver *rest.Config
	Kube   kubernetes.Interface
	Dyn    dynamic.Interface
}

// Main starts a control plane, installs cascade's CRDs, runs setup, the
// tests and teardown, stops everything and checks that no goroutine of
// impl and no control-plane process survived. Use it as
// `func TestMain(m *testing.M) { os.Exit(testenv.Main(m, setup)) }`.
func Main(m *testing.M, setup func(*Env) (teardown func() error, err error)) int {
	flag.Parse()
	ctx := context.Background()
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: *binDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testenv: control plane from %s up in %s\n", cp.BinDir(), time.Since(start).Round(time.Millisecond))
	code := func() int {
		e := &Env{CP: cp, Admin: cp.Config}
		if e.Driver, err = cp.AddUser(envtest.User{Name: DriverUser, Groups: []string{"system:masters"}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		e.Driver.UserAgent = DriverUser
		e.Kube = kubernetes.NewForConfigOrDie(e.Driver)
		e.Dyn = dynamic.NewForConfigOrDie(e.Driver)
		if err := crds.Install(ctx, e.Admin, crds.All...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		teardown := func() error { return nil }
		if setup != nil {
			if teardown, err = setup(e); err != nil {
				fmt.Fprintln(os.Stderr, "testenv: setup:", err)
				return 1
			}
		}
		code := m.Run()
		if err := teardown(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: teardown:", err)
			code = 1
		}
		if err := WaitNoLeaks(10 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			code = 1
		}
		return code
	}()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if s := cp.Survivors(); len(s) > 0 {
		fmt.Fprintf(os.Stderr, "testenv: still running after Stop: %v\n", s)
		code = 1
	}
	return code
}

// Namespace creates a fresh namespace for one test. Namespaces are never
// deleted (no namespace controller runs); the control plane is thrown
// away after the package.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := e.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "t-", Labels: map[string]string{"cascade.dev/harness": "impl-test"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// Goroutine leaks. Leaked looks only at goroutines running code of impl,
// of client-go's informer, work-queue and event machinery, or of
// controller-runtime's webhook server: the goroutines impl starts. HTTP
// connection goroutines of client-go's shared transports are left alone,
// since client-go keeps them for the life of the process.

// suspicious are frames only impl's own goroutines run.
var suspicious = []string{
	"github.com/cascade-k8s/cascade/impl/",
	"k8s.io/client-go/tools/cache.",
	"k8s.io/client-go/util/workqueue.",
	"k8s.io/client-go/tools/record.",
	"k8s.io/apimachinery/pkg/watch.",
	"sigs.k8s.io/controller-runtime/pkg/webhook",
	"sigs.k8s.io/controller-runtime/pkg/certwatcher",
}

// ignored goroutines are the test framework's (which run test code).
var ignored = []string{
	"testing.(*M).",
	"testing.tRunner(",
	"testing.runTests",
}

// Leaked returns the stacks of goroutines that run impl's code.
func Leaked() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		// the first is the calling goroutine
		if i == 0 || containsAny(g, ignored) || !containsAny(g, suspicious) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// WaitNoLeaks polls until no goroutine of impl runs, for up to timeout, and
// returns an error listing the survivors.
func WaitNoLeaks(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l := Leaked()
		if len(l) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines outlived their component:\n%s", len(l), strings.Join(l, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
