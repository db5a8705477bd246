package controlplane_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// A kube-apiserver whose graceful stop outlasts envtest's stop timeout is
// killed, and the restart goes on as after a crash: once the killed
// process is gone a new one starts and serves, and nothing of the old one
// survives. Before, the restart returned the timeout and left no
// kube-apiserver running, and a fuzz run's clients resent their steps to
// it for 90 s each. The stop is made to time out by a restart that gives
// the next process a stop timeout of 1 ns.
func TestRestartAPIServerAfterStopTimeout(t *testing.T) {
	ctx := context.Background()
	own, err := controlplane.Start(ctx, controlplane.Options{BinDir: *binDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Stop() })
	controlplane.SetAPIServerStopTimeout(own, time.Nanosecond)
	if r, err := own.RestartAPIServer(ctx); err != nil || r.Killed {
		t.Fatalf("a graceful restart: %+v, %v", r, err)
	}
	controlplane.SetAPIServerStopTimeout(own, 20*time.Second)
	r, err := own.RestartAPIServer(ctx)
	if err != nil {
		t.Fatalf("the restart whose stop timed out: %v", err)
	}
	if !r.Killed {
		t.Fatalf("the stop did not time out (%+v): the test did not make it", r)
	}
	cs := kubernetes.NewForConfigOrDie(own.Config)
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-kill"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kube-apiserver does not serve after the restart: %v", err)
	}
	var apiservers int
	for _, p := range own.Survivors() {
		if p.Name == controlplane.APIServerBinary {
			apiservers++
		}
	}
	if apiservers != 1 {
		t.Fatalf("%d kube-apiserver processes running after the restart, want 1: %v", apiservers, own.Survivors())
	}
}
