package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// kineOrSkip returns the kine binary `make kine` builds, or skips the test
// saying how to build it.
func kineOrSkip(t *testing.T) string {
	t.Helper()
	path, err := controlplane.ResolveKine("")
	if err != nil {
		t.Skipf("no kine binary, so the control plane on kine is not tested: %v", err)
	}
	return path
}

// On kine, kube-apiserver stores its objects in kine's SQLite database
// rather than in an etcd: no etcd runs, kube-apiserver's --etcd-servers is
// kine's socket, the upstream GC collects (Start waits for its probe), an
// object survives an API-server restart with its resourceVersion, and Stop
// leaves nothing running.
func TestStartOnKine(t *testing.T) {
	kinePath := kineOrSkip(t)
	ctx := context.Background()
	kcp, err := controlplane.Start(ctx, controlplane.Options{BinDir: *binDir, ControllerManager: true, Datastore: controlplane.DatastoreKine, KinePath: kinePath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcp.Stop() })

	var names []string
	for _, p := range kcp.Processes() {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "kube-apiserver,kine,kube-controller-manager" {
		t.Fatalf("processes: want kube-apiserver, kine and kube-controller-manager (no etcd), got %v", kcp.Processes())
	}
	socket := filepath.Join(kcp.Dir(), "kine", "kine.sock")
	if args := cmdline(t, kcp.Processes()[0].PID); !strings.Contains(args, "--etcd-servers=unix://"+socket) {
		t.Fatalf("kube-apiserver does not store in kine's socket %s: %s", socket, args)
	}
	if _, err := os.Stat(filepath.Join(kcp.Dir(), "kine", "state.db")); err != nil {
		t.Fatalf("kine's SQLite database: %v", err)
	}

	cs := kubernetes.NewForConfigOrDie(kcp.Config)
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kcp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after an API-server restart on kine: %v", err)
	}
	if got.UID != cm.UID || got.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("after an API-server restart on kine: uid/rv %s/%s, want %s/%s", got.UID, got.ResourceVersion, cm.UID, cm.ResourceVersion)
	}
	err = cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Delete(ctx, "kept", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cm.ResourceVersion}})
	if err != nil {
		t.Fatalf("delete with the resourceVersion precondition after the restart: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kept", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after its delete: want NotFound, got %v", err)
	}

	if err := kcp.Stop(); err != nil {
		t.Fatal(err)
	}
	if s := kcp.Survivors(); len(s) > 0 {
		t.Fatalf("still running after Stop: %v", s)
	}
}

// A missing kine binary is a one-line error that says how to build it (or,
// when $CASCADE_KINE named it, how to do without), and an unknown
// datastore names the valid ones.
func TestKineErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kine")
	_, err := controlplane.Start(context.Background(), controlplane.Options{BinDir: *binDir, Datastore: controlplane.DatastoreKine, KinePath: missing})
	want := "controlplane: kine not found at " + missing + " (run 'make kine' to build it)"
	if err == nil || err.Error() != want {
		t.Fatalf("Start with no kine binary: want %q, got %v", want, err)
	}
	t.Setenv(controlplane.KineEnv, missing)
	_, err = controlplane.Start(context.Background(), controlplane.Options{BinDir: *binDir, Datastore: controlplane.DatastoreKine})
	want = "controlplane: kine not found at " + missing + " (the file $CASCADE_KINE names; unset it to use bin/kine/v0.17.5/kine, which 'make kine' builds)"
	if err == nil || err.Error() != want {
		t.Fatalf("Start with $CASCADE_KINE naming no file: want %q, got %v", want, err)
	}
	_, err = controlplane.Start(context.Background(), controlplane.Options{BinDir: *binDir, Datastore: "sqlite"})
	want = `controlplane: unknown datastore "sqlite" (want etcd or kine)`
	if err == nil || err.Error() != want {
		t.Fatalf("Start with datastore sqlite: want %q, got %v", want, err)
	}
}

func cmdline(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(raw), "\x00", " ")
}
