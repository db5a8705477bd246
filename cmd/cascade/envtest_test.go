package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/target"
)

// The tests below start real control planes. They take the binaries from
// -kube-bin-dir, else $KUBEBUILDER_ASSETS, else bin/kube/<controlplane.KubeVersion> of the
// checkout, as `cascade` itself does ('make kube' builds them).

var kubeBinDir = flag.String("kube-bin-dir", "", "directory holding etcd, kube-apiserver and kube-controller-manager (default: $KUBEBUILDER_ASSETS, else <repo>/bin/kube/"+controlplane.KubeVersion+")")

// asCascade makes the test binary run cascade's main instead of the
// tests, so that a test can run `cascade cluster` as a separate process
// and signal it.
const asCascade = "CASCADE_TEST_AS_CASCADE"

func TestMain(m *testing.M) {
	if os.Getenv(asCascade) != "" {
		os.Args = append([]string{"cascade"}, strings.Fields(os.Getenv(asCascade))...)
		main()
		os.Exit(0)
	}
	flag.Parse()
	os.Exit(m.Run())
}

func binDirArgs() []string {
	if *kubeBinDir == "" {
		return nil
	}
	return []string{"--kube-bin-dir", *kubeBinDir}
}

// TestReplayUpstream replays one scenario on envtest with the upstream
// kube-controller-manager.
func TestReplayUpstream(t *testing.T) {
	args := append([]string{"replay", "--target", "upstream", "../../traces/scenarios/foreground-blocking.trace"}, binDirArgs()...)
	out, code := cascade(t, args...)
	if code != 0 || !strings.Contains(out, "ok   ../../traces/scenarios/foreground-blocking.trace") || !strings.Contains(out, "1 passed, 0 failed, 0 skipped on upstream") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// usersKubeconfig stands for a person's ~/.kube/config.
const usersKubeconfig = `# mine: keep
apiVersion: v1
kind: Config
clusters:
- cluster:
    server: https://prod.example:6443
  name: prod
contexts:
- context:
    cluster: prod
    user: me
  name: mine
current-context: mine
users:
- name: me
  user:
    token: secret-token
`

// TestClusterRefusesAUsersKubeconfig: `cascade cluster --kubeconfig-out`
// naming an existing file exits 2 with one line, before it starts a
// control plane, and leaves the file as it was. (It used to write over
// the file and delete it on SIGINT.)
func TestClusterRefusesAUsersKubeconfig(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kc, []byte(usersKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster := exec.Command(os.Args[0])
	cluster.Env = append(os.Environ(), asCascade+"="+strings.Join(append([]string{"cluster", "--kubeconfig-out", kc}, binDirArgs()...), " "))
	var stderr lockedBuffer
	cluster.Stderr = &stderr
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cluster.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("exit: %v, want 2", err)
		}
	case <-time.After(2 * time.Minute):
		_ = cluster.Process.Signal(syscall.SIGINT)
		<-exited
		t.Errorf("cascade cluster ran over an existing kubeconfig:\n%s", stderr.String())
	}
	msg := strings.TrimSpace(stderr.String())
	if strings.Contains(msg, "\n") || !strings.Contains(msg, kc+" already exists") || !strings.Contains(msg, "--merge") {
		t.Errorf("stderr:\n%s", msg)
	}
	if got, err := os.ReadFile(kc); err != nil || string(got) != usersKubeconfig {
		t.Fatalf("the user's kubeconfig was changed: %v\n%s", err, got)
	}
}

// TestClusterThroughKubeconfig runs `cascade cluster --merge` as its own
// process, merging into a user's kubeconfig, replays traces through it
// (the kubeconfig target, with its limited context and the webhook the
// cluster installed), checks that the runs left none of their objects
// behind, then stops the cluster with SIGTERM and checks that the user's
// kubeconfig is back to its exact bytes and that none of the cluster's
// processes survived.
func TestClusterThroughKubeconfig(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(usersKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster := exec.Command(os.Args[0])
	cluster.Env = append(os.Environ(), asCascade+"="+strings.Join(append([]string{"cluster", "--merge", "--kubeconfig-out", kc}, binDirArgs()...), " "))
	stdout, err := cluster.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cluster.Stderr = stderr
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cluster.Wait()
	}()
	t.Cleanup(func() { _ = cluster.Process.Kill() }) // if the test fails before SIGTERM

	deadline := time.After(2 * time.Minute)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("cascade cluster exited before it was ready:\n%s", stderr)
			}
			ready = strings.HasPrefix(l, "kubeconfig: "+kc)
		case <-deadline:
			t.Fatalf("cascade cluster not ready within 2 minutes:\n%s", stderr)
		}
	}
	go func() { // keep draining stdout
		for range lines {
		}
	}()

	dir := t.TempDir()
	out, code := cascade(t, "conform", "--target", "kubeconfig", "--kubeconfig", kc, "--limited-context", "cascade-limited",
		"--labels", "bad-request", "--fuzz-checks", "0", "--json", "-q", "--junit", filepath.Join(dir, "junit.xml"))
	if code != 0 {
		t.Fatalf("conform through the kubeconfig: exit %d:\n%s", code, out)
	}
	var rep conformReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	results := map[string]string{}
	for _, c := range rep.Cases {
		results[c.Name] = c.Result
	}
	if rep.Failed+rep.Errors != 0 || results["scenario/bad-requests"] != "pass" || results["scenario/dry-run"] != "pass" || results["scenario/event-owner"] != "pass" {
		t.Fatalf("conform through the kubeconfig: %+v", rep)
	}
	// the cluster's webhook is found and used; the release judged is the
	// cluster's own, and one it contradicts is refused before anything
	out, code = cascade(t, "replay", "--target", "kubeconfig", "--kubeconfig", kc, "scenario/protection-already-deleting")
	if code != 0 || !strings.Contains(out, "1 passed, 0 failed, 0 skipped on kubeconfig") {
		t.Fatalf("replay through the kubeconfig: exit %d:\n%s", code, out)
	}
	if out, code := cascade(t, "replay", "--target", "kubeconfig", "--kubeconfig", kc, "--kube-version", "v1.33.13", "scenario/background"); code != 2 || !strings.Contains(out, "but the cluster of") || !strings.Contains(out, "runs "+controlplane.KubeVersion) {
		t.Fatalf("a --kube-version the cluster contradicts: exit %d:\n%s", code, out)
	}
	// a second webhook registration is refused, and the cluster's stays
	if out, code := cascade(t, "gc", "--kubeconfig", kc, "--webhook"); code == 0 || !strings.Contains(out, "already has the webhook configuration") {
		t.Fatalf("cascade gc --webhook over the cluster's registration: exit %d:\n%s", code, out)
	}
	assertNothingLeft(t, kc)

	if err := cluster.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("cascade cluster after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("cascade cluster did not stop within a minute of SIGTERM:\n%s", stderr)
	}
	if got, err := os.ReadFile(kc); err != nil || string(got) != usersKubeconfig {
		t.Errorf("the user's kubeconfig is not back to what it was: %v\n%s", err, got)
	}
	pids := regexp.MustCompile(`\(pid (\d+)\)`).FindAllStringSubmatch(stderr.String(), -1)
	if len(pids) != 3 {
		t.Fatalf("expected etcd, kube-apiserver and kube-controller-manager in the cluster's output:\n%s", stderr)
	}
	for _, m := range pids {
		pid, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d survived cascade cluster (kill -0: %v)", pid, err)
		}
	}
}

// assertNothingLeft checks that no object a driver labelled is left but
// its namespaces, which stay Terminating: the control plane runs no
// namespace controller.
func assertNothingLeft(t *testing.T, kubeconfig string) {
	t.Helper()
	cfg, _, err := target.LoadKubeconfig(kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: driver.RunLabel}
	cms, err := kube.CoreV1().ConfigMaps("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := kube.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cms.Items) + len(pods.Items); n != 0 {
		t.Errorf("%d labelled configmaps and pods outlived their runs", n)
	}
	nss, err := kube.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp == nil {
			t.Errorf("namespace %s was not deleted", ns.Name)
		}
	}
	if len(nss.Items) == 0 {
		t.Error("no namespace of the runs found: the label selector or the runs are wrong")
	}
}

// lockedBuffer collects a child's stderr for concurrent reading.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
