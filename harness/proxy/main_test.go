package proxy_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/proxy"
)

// The envtest tests share one control plane whose kube-controller-manager
// talks through one proxy, started in TestMain; each test sets the
// proxy's Controller it needs (faults) through swap, and works in a
// namespace of its own.

var (
	binDir = flag.String("kube-bin-dir", "", "directory holding etcd, kube-apiserver and kube-controller-manager")

	cp *controlplane.ControlPlane
	px *proxy.Proxy
	cs kubernetes.Interface
	sw = &swap{}
)

// swap is a Controller that passes everything to the Controller set last
// (everything passes when none is).
type swap struct {
	mu sync.Mutex
	c  proxy.Controller
}

func (s *swap) set(c proxy.Controller) {
	s.mu.Lock()
	s.c = c
	s.mu.Unlock()
}

func (s *swap) get() proxy.Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

func (s *swap) Admit(ctx context.Context, r *proxy.Request) error {
	if c := s.get(); c != nil {
		return c.Admit(ctx, r)
	}
	return nil
}

func (s *swap) Deliver(ctx context.Context, st *proxy.Request, ev *proxy.Delivery) (proxy.Verdict, error) {
	if c := s.get(); c != nil {
		return c.Deliver(ctx, st, ev)
	}
	return proxy.Pass, nil
}

func (s *swap) Ended(st *proxy.Request) {
	if c := s.get(); c != nil {
		c.Ended(st)
	}
}

func (s *swap) Answered(r proxy.Request) {
	if o, ok := s.get().(proxy.Observer); ok {
		o.Answered(r)
	}
}

func (s *swap) Pending() int {
	if p, ok := s.get().(proxy.Pending); ok {
		return p.Pending()
	}
	return 0
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // the envtest tests skip themselves
	}
	if _, _, err := controlplane.ResolveBinDir(*binDir); err != nil {
		fmt.Fprintln(os.Stderr, "proxy_test: no control-plane binaries, envtest tests skip:", err)
		return m.Run()
	}
	start := time.Now()
	var err error
	cp, err = controlplane.Start(context.Background(), controlplane.Options{BinDir: *binDir, ControllerManager: true,
		ControllerManagerVia: func(id *rest.Config) (string, error) {
			if px, err = proxy.New(proxy.Options{Upstream: id, Controller: sw}); err != nil {
				return "", err
			}
			return px.URL(), nil
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if px != nil {
			_ = px.Close()
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "proxy_test: control plane behind the proxy started in %s\n", time.Since(start).Round(time.Millisecond))
	code := func() int {
		if cs, err = kubernetes.NewForConfig(cp.Config); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := px.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// needControlPlane skips a test without the control plane.
func needControlPlane(t *testing.T) {
	t.Helper()
	if cp == nil {
		t.Skip("no control plane (-short, or no binaries)")
	}
}
