package gc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/impl/internal/testenv"
)

// The tests of this package share one control plane and one GC in Auto
// mode, upstream behaviour (no bug switched on), started in TestMain; each
// test works in its own namespace. No kube-controller-manager runs: every
// collection the tests see is impl's.

var (
	env       *testenv.Env
	collector *gc.GarbageCollector
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, func(e *testenv.Env) (func() error, error) {
		env = e
		var err error
		collector, err = gc.New(e.Admin, gc.Options{SyncPeriod: time.Second})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- collector.Run(ctx) }()
		syncCtx, syncCancel := context.WithTimeout(ctx, 60*time.Second)
		defer syncCancel()
		if err := collector.WaitForSync(syncCtx); err != nil {
			cancel()
			<-done
			return nil, err
		}
		return func() error {
			cancel()
			select {
			case err := <-done:
				return err
			case <-time.After(30 * time.Second):
				return errors.New("gc.Run did not return within 30s of cancellation")
			}
		}, nil
	}))
}

// seen waits until the GC's graph has observed every object (not only as
// a virtual node), as upstream's integration tests wait for GraphHasUID
// before deleting owners: orphaning and foreground blocking are
// best-effort for dependents the graph has not seen.
func seen(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		testenv.WaitFor(t, "gc observes "+string(u.GetUID()), func() error {
			n, ok := collector.Node(u.GetUID())
			if !ok || n.Virtual {
				return fmt.Errorf("not observed (in graph: %v)", ok)
			}
			return nil
		})
	}
}

// quiet waits until the GC has had nothing to do for a while, so that a
// following Consistently checks a settled state.
func quiet(t *testing.T) {
	t.Helper()
	since := time.Now()
	testenv.WaitFor(t, "gc quiet", func() error {
		if !collector.Stats().Idle() {
			since = time.Now()
		}
		if time.Since(since) < time.Second {
			return fmt.Errorf("busy: %+v", collector.Stats())
		}
		return nil
	})
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
