package history_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/history"
)

// The envtest tests share one control plane (etcd, kube-apiserver with an
// audit log, and the upstream kube-controller-manager with its garbage
// collector), started by the first test that needs it and stopped by
// TestMain, which also checks that none of its processes survive. Each
// test works under its own scope prefix.

const (
	poll    = 50 * time.Millisecond
	timeout = 30 * time.Second // generous: reaching it is a failure, not a performance verdict
	// driverUser is the user the tests act as.
	driverUser = "cascade-driver"
	// holdFinalizer is a finalizer no controller knows.
	holdFinalizer = "cascade.dev/hold"
)

var (
	binDir = flag.String("kube-bin-dir", "", "directory holding etcd, kube-apiserver and kube-controller-manager "+
		"(default: $KUBEBUILDER_ASSETS, else <repo>/bin/kube/"+controlplane.KubeVersion+")")

	cpOnce sync.Once
	cp     *controlplane.ControlPlane
	cpErr  error
	driver *rest.Config // driverUser, user agent cascade-driver/client-0
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	flag.Parse()
	code := m.Run()
	if cp == nil {
		return code
	}
	procs := cp.Processes()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if s := cp.Survivors(); len(s) > 0 {
		fmt.Fprintf(os.Stderr, "history_test: still running after Stop: %v\n", s)
		code = 1
	}
	if len(procs) != 3 {
		fmt.Fprintf(os.Stderr, "history_test: expected to track etcd, kube-apiserver and kube-controller-manager, tracked %v\n", procs)
		code = 1
	}
	return code
}

// controlPlane starts the shared control plane on first use.
func controlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cpOnce.Do(func() {
		start := time.Now()
		cp, cpErr = controlplane.Start(context.Background(), controlplane.Options{BinDir: *binDir, ControllerManager: true, Audit: true})
		if cpErr != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "history_test: control plane started from %s in %s\n", cp.BinDir(), time.Since(start).Round(time.Millisecond))
		driver, cpErr = cp.AddUser(envtest.User{Name: driverUser, Groups: []string{"system:masters"}})
		if cpErr == nil {
			driver.UserAgent = history.DriverUserAgentPrefix + "0"
		}
	})
	if cpErr != nil {
		t.Fatal(cpErr)
	}
	return cp
}

// newScope returns a fresh scope and creates its namespace, as the driver
// would (the Namespace object is in scope).
func newScope(t *testing.T, cs kubernetes.Interface) (history.Scope, string) {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	s := history.Scope{Prefix: "hist-" + hex.EncodeToString(b)}
	ns := s.Prefix + "-default"
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if t.Failed() && cp != nil && cp.ControllerManagerLog() != "" {
			t.Logf("scope %s; kube-controller-manager log tail:\n%s", s.Prefix, controlplane.LogTail(cp.ControllerManagerLog(), 40))
		}
	})
	return s, ns
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
