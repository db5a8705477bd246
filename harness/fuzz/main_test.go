package fuzz_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/model"
)

// The tests share one envtest control plane without kube-controller-manager:
// stepped runs bring their own impl, and concurrent runs on impl bring
// impl's GC in Auto mode.

var (
	binDir = flag.String("kube-bin-dir", "", "directory holding etcd, kube-apiserver and kube-controller-manager (default: $KUBEBUILDER_ASSETS, else <repo>/bin/kube/"+controlplane.KubeVersion+")")

	cp      *controlplane.ControlPlane
	limited *rest.Config
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	flag.Parse()
	if id := os.Getenv(disableEnv); id != "" {
		if _, err := model.DisableKnownRace(id); err != nil {
			panic(err)
		}
	}
	if testing.Short() {
		return m.Run() // the tests that need a control plane skip themselves
	}
	ctx := context.Background()
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{BinDir: *binDir, Audit: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzz tests:", err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	if limited, err = cp.Limited(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fuzz tests:", err)
		return 1
	}
	return m.Run()
}

func needControlPlane(t *testing.T) {
	t.Helper()
	if cp == nil {
		t.Skip("-short: no control plane")
	}
}
