package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// DefaultControllers are the kube-controller-manager controllers the
// harness runs: the garbage collector and the workload controllers whose
// objects carry ownerReferences. The namespace controller is deliberately
// absent, so a deleted namespace stays Terminating; the harness never
// deletes its namespaces and throws the whole control plane away instead.
var DefaultControllers = []string{"garbagecollector", "replicaset", "deployment", "replicationcontroller", "job", "cronjob"}

// ControllerManagerUser is the user name kube-controller-manager
// authenticates as (with group system:masters). It is the name kubeadm
// gives the controller manager's identity, so audit records read as they
// would on a real cluster.
const ControllerManagerUser = "system:kube-controller-manager"

// ProbeNamespace is where Start creates the two ConfigMaps it uses to see
// the garbage collector work before returning.
const ProbeNamespace = "cascade-probe"

// controllerManager is a running kube-controller-manager process.
type controllerManager struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited and been reaped
	exitErr error         // valid after done
}

// controllerManagerArgs are the flags kube-controller-manager runs with.
// Without --use-service-account-credentials every controller uses the
// --kubeconfig identity, and client-go's rest.AddUserAgent gives each
// controller's clients the user agent
// "kube-controller-manager/<version> (<os>/<arch>) kubernetes/<commit>/<client name>"
// (k8s.io/controller-manager/pkg/clientbuilder.SimpleControllerClientBuilder);
// the garbage collector's client name is "generic-garbage-collector"
// (cmd/kube-controller-manager/app/core.go, newGarbageCollectorController).
func controllerManagerArgs(kubeconfig string, controllers []string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0", // no serving: nothing here scrapes it, and it needs no certificates
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=20", // upstream default, spelled out
		"--controller-start-interval=0s",
		// Client-side throttling only slows tests down; the default (20/30)
		// would make the GC's two calls per deletion queue up.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--v=2", // the GC logs each deletion and orphaning at level 2
		// ... and its graph builder, at level 5, each event it begins to
		// apply (processGraphChanges: "GraphBuilder process object"): the
		// order in which the graph took in the events of different
		// informers, which nothing else outside the process shows
		// (harness/target kcmGraphLog, lin.Options.GraphLog). And, at
		// level 5 in garbagecollector.go, each attemptToDelete pass that
		// ends without a GET of its item ("processing item returned at
		// once", "error syncing item"), so that upstream-stepped tells
		// a pass's first GET from another worker's GET of the same
		// object (harness/target kcmPasses). vmodule limits level 5 to
		// the two files.
		"--vmodule=graph_builder=5,garbagecollector=5",
	}
}

// writeControllerManagerKubeconfig provisions the controller manager's
// user and writes its kubeconfig: one naming kube-apiserver with the
// user's client certificate, or, with via, one naming the URL via
// returns for that identity, without credentials.
func writeControllerManagerKubeconfig(cp *ControlPlane, via func(*rest.Config) (string, error)) error {
	user, err := cp.env.ControlPlane.AddUser(envtest.User{Name: ControllerManagerUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("controlplane: provision user %s: %s", ControllerManagerUser, oneLine(err.Error()))
	}
	var kubeconfig []byte
	if via == nil {
		kubeconfig, err = user.KubeConfig()
		if err != nil {
			return fmt.Errorf("controlplane: kubeconfig for %s: %s", ControllerManagerUser, oneLine(err.Error()))
		}
	} else {
		url, err := via(user.Config())
		if err != nil {
			return fmt.Errorf("controlplane: proxy for kube-controller-manager: %w", err)
		}
		kubeconfig = proxyKubeconfig(url)
		cp.proxied = true
	}
	cp.kcmKubeconfig = filepath.Join(cp.dir, "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(cp.kcmKubeconfig, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}

// proxyKubeconfig is a kubeconfig naming url, plain HTTP on loopback,
// without credentials: the proxy adds the identity.
func proxyKubeconfig(url string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
users:
- name: kube-controller-manager
  user: {}
contexts:
- name: proxy
  context:
    cluster: proxy
    user: kube-controller-manager
current-context: proxy
`, url))
}

// writeWorkloadKubeconfig writes the kubeconfig of the workload
// controllers' kube-controller-manager (Options.WorkloadControllers): one
// naming the URL via returns, or, without via, the first process's.
func writeWorkloadKubeconfig(cp *ControlPlane, via func() (string, error)) (string, error) {
	if via == nil {
		return cp.kcmKubeconfig, nil
	}
	url, err := via()
	if err != nil {
		return "", fmt.Errorf("controlplane: proxy for the workload controllers' kube-controller-manager: %w", err)
	}
	path := filepath.Join(cp.dir, WorkloadControllerManagerName+".kubeconfig")
	if err := os.WriteFile(path, proxyKubeconfig(url), 0o600); err != nil {
		return "", fmt.Errorf("controlplane: %w", err)
	}
	return path, nil
}

// WorkloadControllerManagerName names the second kube-controller-manager
// process (Options.WorkloadControllers) in its log's and kubeconfig's
// file names and in Processes.
const WorkloadControllerManagerName = "kube-controller-manager-workloads"

// ProxiedArgs are the flags kube-controller-manager runs with in addition
// when it talks through the API proxy: JSON request bodies, which the
// proxy reads (harness/proxy explains why JSON).
var ProxiedArgs = []string{"--kube-api-content-type=application/json"}

// startControllerManager starts a process with the kubeconfig at kcPath
// (the one writeControllerManagerKubeconfig wrote, or the workload
// controllers' one), logging to logName in the working directory. It does
// not wait for readiness.
func startControllerManager(cp *ControlPlane, kcPath, logName string, controllers []string) (*controllerManager, error) {
	m := &controllerManager{logPath: filepath.Join(cp.dir, logName), done: make(chan struct{})}
	// a restarted controller manager appends to its predecessor's log
	logFile, err := os.OpenFile(m.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor

	args := controllerManagerArgs(kcPath, controllers)
	if cp.proxied {
		args = append(args, ProxiedArgs...)
	}
	args = append(args, cp.kcmArgs...)
	m.cmd = exec.Command(filepath.Join(cp.binDir, ControllerManagerBinary), args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	// Its own process group, so Stop can signal everything it might start;
	// Pdeathsig as a second lifeline beside the one built into the binary.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("controlplane: start %s: %w", m.cmd.Path, err)
	}
	go func() {
		m.exitErr = m.cmd.Wait()
		close(m.done)
	}()
	return m, nil
}

// waitCollecting returns once the garbage collector has deleted a probe
// dependent whose owner was deleted: a check of the whole path (informers
// synced, graph built, attemptToDelete worker running, API writes
// authorized) rather than of a log line.
func (m *controllerManager) waitCollecting(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("controlplane: client for the controller-manager probe: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ProbeNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("controlplane: create namespace %s for the garbage-collector probe: %w", ProbeNamespace, err)
	}
	cms := cs.CoreV1().ConfigMaps(ProbeNamespace)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-probe-owner-"}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("controlplane: create garbage-collector probe owner: %w", err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName:    "gc-probe-dependent-",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	if dep, err = cms.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("controlplane: create garbage-collector probe dependent: %w", err)
	}
	background := metav1.DeletePropagationBackground
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		return fmt.Errorf("controlplane: delete garbage-collector probe owner: %w", err)
	}

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := cms.Get(ctx, dep.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("controlplane: kube-controller-manager exited during start (%v); last log line: %s; log: %s",
				m.exitErr, lastLine(m.logPath), m.logPath)
		case <-ctx.Done():
			return fmt.Errorf("controlplane: kube-controller-manager's garbage collector did not collect %s/%s within %s; last log line: %s; log: %s",
				ProbeNamespace, dep.Name, timeout, lastLine(m.logPath), m.logPath)
		case <-tick.C:
		}
	}
}

// kill sends SIGKILL to the controller manager's process group, as a
// crash ends it, and waits for the process to be reaped.
func (m *controllerManager) kill() error {
	pid := m.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-m.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("controlplane: kube-controller-manager (pid %d) did not exit 10s after SIGKILL", pid)
	}
}

// stop sends SIGTERM to the controller manager's process group, waits up to
// 10s, then sends SIGKILL, and waits for the process to be reaped.
func (m *controllerManager) stop() error {
	pid := m.cmd.Process.Pid
	select {
	case <-m.done:
		return nil
	default:
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-m.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	return m.kill()
}

// LogTail returns the last n lines of the file at path, for printing a
// component's log when a test fails. It returns a one-line note instead
// when the file cannot be read.
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	const window = 256 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(fi.Size()-window, io.SeekStart); err != nil {
			return fmt.Sprintf("(cannot read log: %v)", err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func lastLine(path string) string { return LogTail(path, 1) }

// findProcesses scans /proc for processes whose executable is named as a
// key of match and whose command line holds the argument given as value.
// envtest keeps its process handles private, so the harness identifies
// etcd and kube-apiserver by their per-instance data and certificate
// directories.
func findProcesses(match map[string]string) []Process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		want, ok := match[filepath.Base(args[0])]
		if !ok {
			continue
		}
		for _, a := range args[1:] {
			if a == want {
				out = append(out, Process{Name: filepath.Base(args[0]), PID: pid})
				break
			}
		}
	}
	return out
}

// Running reports whether the process still runs: the pid exists, is not a
// zombie (exited, not yet reaped) and still runs a binary named p.Name, so
// that a recycled pid does not count.
func (p Process) Running() bool {
	dir := filepath.Join("/proc", strconv.Itoa(p.PID))
	raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil || len(raw) == 0 { // zombies have an empty command line
		return false
	}
	if argv0, _, _ := strings.Cut(string(raw), "\x00"); filepath.Base(argv0) != p.Name {
		return false
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

func killProcess(pid int) {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(os.Stderr, "controlplane: kill pid %d: %v\n", pid, err)
	}
}
