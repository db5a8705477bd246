package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl/crds"
)

// gcProcess is `cascade gc` running as its own process (the test binary
// as cascade, see asCascade), with its stderr collected.
type gcProcess struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	ready  chan struct{} // closed when it says it is collecting
	exited chan error
}

func startGC(t *testing.T, args ...string) *gcProcess {
	t.Helper()
	p := &gcProcess{cmd: exec.Command(os.Args[0]), stderr: &lockedBuffer{}, ready: make(chan struct{}), exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), asCascade+"="+strings.Join(append([]string{"gc"}, args...), " "))
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		said := false
		for sc.Scan() {
			fmt.Fprintln(p.stderr, sc.Text())
			if !said && strings.HasPrefix(sc.Text(), "cascade gc: collecting garbage on ") {
				said = true
				close(p.ready)
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	// if the test fails before it stops the process
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

// wait returns the process's exit code once it has exited.
func (p *gcProcess) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		t.Fatalf("cascade gc: %v\n%s", err, p.stderr)
	case <-time.After(within):
		t.Fatalf("cascade gc did not exit within %s:\n%s", within, p.stderr)
	}
	return -1
}

// TestGCKubeconfig runs `cascade gc --kubeconfig PATH --adopter` as its
// own process against an envtest control plane without
// kube-controller-manager, so that impl is the only garbage collector:
// deleting an owner with Background propagation collects its dependent,
// a dependent with a second, live owner loses only the dangling
// reference, an unrelated object is untouched, and the adopting
// controller (whose Herd CRD `cascade gc` installs) adopts a matching
// Pod. SIGTERM then stops it with exit code 0, and neither it nor the
// control plane leaves a process behind. An unreachable kubeconfig exits
// 2 with one line naming it.
func TestGCKubeconfig(t *testing.T) {
	cp, err := controlplane.Start(context.Background(), controlplane.Options{BinDir: *kubeBinDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
		if s := cp.Survivors(); len(s) > 0 {
			t.Errorf("control-plane processes survived: %v", s)
		}
	})
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if _, err := target.WriteKubeconfig(kc, target.Context{Name: "cascade", Config: cp.Config}); err != nil {
		t.Fatal(err)
	}
	gc := startGC(t, "--kubeconfig", kc, "--adopter", "--sync-period", "2s")
	select {
	case <-gc.ready:
	case <-time.After(2 * time.Minute):
		t.Fatalf("cascade gc not collecting within 2 minutes:\n%s", gc.stderr)
	}

	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns.Name)
	create := func(name string, owners ...*corev1.ConfigMap) *corev1.ConfigMap {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, o := range owners {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID})
		}
		got, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	owner := create("owner")
	keeper := create("keeper")
	unrelated := create("unrelated")
	dep := create("dep", owner)
	shared := create("shared", owner, keeper)
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	state := func(cm *corev1.ConfigMap) string {
		got, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && got.UID != cm.UID):
			return "gone"
		case err != nil:
			return "error: " + err.Error()
		}
		var owners []string
		for _, r := range got.OwnerReferences {
			owners = append(owners, r.Name)
		}
		return fmt.Sprintf("live owners=%v", owners)
	}
	want := map[*corev1.ConfigMap]string{owner: "gone", dep: "gone", shared: "live owners=[keeper]", keeper: "live owners=[]", unrelated: "live owners=[]"}
	eventually(t, gc, func() []string {
		var bad []string
		for cm, w := range want {
			if got := state(cm); got != w {
				bad = append(bad, fmt.Sprintf("cm/%s: %s, want %s", cm.Name, got, w))
			}
		}
		return bad
	})

	// the adopter, with the CRD `cascade gc --adopter` installed
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	herd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crds.Group + "/" + crds.Version, "kind": crds.Herd.Kind,
		"metadata": map[string]any{"name": "web"},
		"spec":     map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
	}}
	if herd, err = dyn.Resource(crds.Herd.GVR()).Namespace(ns.Name).Create(ctx, herd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, gc, func() []string {
		got, err := kube.CoreV1().Pods(ns.Name).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return []string{err.Error()}
		}
		if refs := got.OwnerReferences; len(refs) != 1 || refs[0].Kind != crds.Herd.Kind || refs[0].UID != herd.GetUID() ||
			!ptr.Deref(refs[0].Controller, false) || !ptr.Deref(refs[0].BlockOwnerDeletion, false) {
			return []string{fmt.Sprintf("pod/web-1 owners %+v, want the controller reference to herd/web", refs)}
		}
		return nil
	})

	if err := gc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := gc.wait(t, time.Minute); code != 0 || !strings.Contains(gc.stderr.String(), "cascade gc: stopping") {
		t.Fatalf("cascade gc after SIGTERM: exit %d, want 0 after saying it stops:\n%s", code, gc.stderr)
	}
	if err := syscall.Kill(gc.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("cascade gc (pid %d) survived (kill -0: %v)", gc.cmd.Process.Pid, err)
	}
	// the webhook option was off: nothing registered
	if list, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("webhook configurations after cascade gc: %v %v", list, err)
	}

	// an unreachable cluster: exit 2, one line naming the kubeconfig
	dead := filepath.Join(t.TempDir(), "dead.kubeconfig")
	// port 1 on the loopback address refuses connections at once
	if _, err := target.WriteKubeconfig(dead, target.Context{Name: "dead", Config: &rest.Config{
		Host: "https://127.0.0.1:1", BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}}); err != nil {
		t.Fatal(err)
	}
	bad := startGC(t, "--kubeconfig", dead)
	code := bad.wait(t, time.Minute)
	msg := strings.TrimSuffix(bad.stderr.String(), "\n")
	wantMsg := `cascade: cannot reach the cluster of context "dead" in kubeconfig ` + dead + " at https://127.0.0.1:1: "
	if code != 2 || !strings.HasPrefix(msg, wantMsg) || strings.Contains(msg, "\n") {
		t.Fatalf("unreachable kubeconfig: exit %d, want 2 with the one line %q...; stderr:\n%s", code, wantMsg, msg)
	}
}

// eventually polls check until it reports nothing wrong, failing the test
// after a minute or when cascade gc exits.
func eventually(t *testing.T, gc *gcProcess, check func() []string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		bad := check()
		if len(bad) == 0 {
			return
		}
		select {
		case err := <-gc.exited:
			t.Fatalf("cascade gc exited (%v):\n%s", err, gc.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute:\n  %s\ncascade gc's stderr:\n%s", strings.Join(bad, "\n  "), gc.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
