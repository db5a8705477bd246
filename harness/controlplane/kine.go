package controlplane

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The datastores kube-apiserver can run on (Options.Datastore).
const (
	// DatastoreEtcd is etcd, started by envtest: the default.
	DatastoreEtcd = "etcd"
	// DatastoreKine is kine (github.com/k3s-io/kine) over SQLite, the
	// etcd API k3s runs kube-apiserver on; hack/kine/build.sh builds it.
	DatastoreKine = "kine"
)

// Datastores lists the datastores in the order --help names them.
var Datastores = []string{DatastoreEtcd, DatastoreKine}

// KineVersion is the kine release hack/kine/build.sh builds; the default
// kine binary is <repo root>/bin/kine/<KineVersion>/kine.
const KineVersion = "v0.17.5"

// KineBinary is the name of the kine executable.
const KineBinary = "kine"

// CheckDatastore returns a one-line error unless name is a datastore.
func CheckDatastore(name string) error {
	for _, d := range Datastores {
		if name == d {
			return nil
		}
	}
	return fmt.Errorf("controlplane: unknown datastore %q (want etcd or kine)", name)
}

// KineEnv names the environment variable that, when set, names the kine
// executable to run instead of bin/kine/<KineVersion>/kine (another kine
// release, built by hand).
const KineEnv = "CASCADE_KINE"

// ResolveKine returns the kine executable to run: path if non-empty, else
// $CASCADE_KINE if set, else <repo root>/bin/kine/<KineVersion>/kine. It
// fails in one line, advising `make kine`, when that is not an executable
// file.
func ResolveKine(path string) (string, error) {
	hint := "run 'make kine' to build it"
	if path == "" {
		if path = os.Getenv(KineEnv); path != "" {
			hint = fmt.Sprintf("the file $%s names; unset it to use bin/kine/%s/kine, which 'make kine' builds", KineEnv, KineVersion)
		}
	}
	if path == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("controlplane: find kine: %w", err)
		}
		root, err := RepoRoot(wd)
		if err != nil {
			return "", err
		}
		path = filepath.Join(root, "bin", "kine", KineVersion, KineBinary)
	}
	path = abs(path)
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "", fmt.Errorf("controlplane: kine not found at %s (%s)", path, hint)
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("controlplane: kine at %s is not an executable file (%s)", path, hint)
	}
	return path, nil
}

// kine is a running kine process serving the etcd API on a unix socket
// in the control plane's working directory, its SQLite database beside it.
type kine struct {
	cmd     *exec.Cmd
	socket  string
	logPath string
	done    chan struct{} // closed when the process has exited and been reaped
	exitErr error         // valid after done
}

// kineArgs are the flags kine runs with; dir holds its socket and
// database.
//
//   - --listen-address: a unix socket, as k3s's default (unix://kine.sock),
//     rather than a TCP port: its path is unique to the control plane, so
//     concurrent control planes never race for a port, and nothing else on
//     the machine can connect to it by accident.
//   - --endpoint: SQLite in the working directory, with the parameters of
//     kine's own default DSN (sqlite.DefaultParams: WAL journal, 30 s busy
//     timeout, immediate transactions, shared cache), which an explicit
//     endpoint would otherwise lose.
//   - --metrics-bind-address=0: kine serves metrics on :8080 by default,
//     which a second control plane on the machine could not bind.
//   - compaction: left at kine's defaults, as k3s runs it. kine does not
//     compact on its own (--compact-interval 0); kube-apiserver compacts
//     every 5 minutes (--etcd-compaction-interval) through the etcd
//     compaction transaction kine emulates, and kine then keeps at least
//     the last 1000 revisions (--compact-min-retain). A watch resumed from a
//     compacted revision gets 410 Gone and relists, as on etcd.
//   - watch progress notifications every 5 s and an emulated etcd 3.6.11
//     (kine's defaults): kube-apiserver's watch cache asks the datastore for
//     progress to serve consistent lists, and checks the version for it.
func kineArgs(dir string) []string {
	const sqliteParams = "_journal_mode=WAL&_busy_timeout=30000&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=20&cache=shared"
	return []string{
		"--listen-address=unix://" + filepath.Join(dir, "kine.sock"),
		"--endpoint=sqlite://" + filepath.Join(dir, "state.db") + "?" + sqliteParams,
		"--metrics-bind-address=0",
	}
}

// startKine starts kine from path with its socket and database in dir and
// its log in logPath, and returns once the socket accepts connections.
func startKine(path, dir, logPath string, timeout time.Duration) (*kine, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	k := &kine{socket: filepath.Join(dir, "kine.sock"), logPath: logPath, done: make(chan struct{})}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	k.cmd = exec.Command(path, kineArgs(dir)...)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // beside the binary's own lifeline
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("controlplane: start %s: %w", path, err)
	}
	go func() {
		k.exitErr = k.cmd.Wait()
		close(k.done)
	}()
	deadline := time.Now().Add(timeout)
	for {
		if c, err := net.DialTimeout("unix", k.socket, time.Second); err == nil {
			c.Close()
			return k, nil
		}
		select {
		case <-k.done:
			return nil, fmt.Errorf("controlplane: kine exited during start (%v); last log line: %s; log: %s", k.exitErr, lastLine(logPath), logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = k.stop()
			return nil, fmt.Errorf("controlplane: kine did not listen on %s within %s; last log line: %s; log: %s", k.socket, timeout, lastLine(logPath), logPath)
		}
	}
}

// url is the etcd endpoint kube-apiserver's --etcd-servers names.
func (k *kine) url() *url.URL { return &url.URL{Scheme: "unix", Path: k.socket} }

// stop asks kine to stop (SIGTERM: it stops its gRPC server gracefully
// and closes the database), kills it after 10 s, and waits for it.
func (k *kine) stop() error {
	if k == nil {
		return nil
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, 0} {
		select {
		case <-k.done:
			return nil
		case <-time.After(10 * time.Second):
		}
		if sig != 0 {
			_ = k.cmd.Process.Signal(sig)
		}
	}
	return fmt.Errorf("controlplane: kine (pid %d) did not exit 10s after SIGKILL", k.cmd.Process.Pid)
}

// startOnKine does for a control plane on kine what envtest's
// Environment.Start does on etcd, whose ControlPlane.Start always starts
// an etcd: it starts kine, then envtest's kube-apiserver with
// --etcd-servers pointing at kine, provisions the admin user and waits for
// the default namespace. envtest's Stop and the API server's Stop and Start
// (RestartAPIServer) then work as on etcd, with ControlPlane.Etcd nil.
func (cp *ControlPlane) startOnKine(kinePath string, timeout time.Duration) (*rest.Config, error) {
	var err error
	cp.kine, err = startKine(kinePath, filepath.Join(cp.dir, "kine"), filepath.Join(cp.dir, "kine.log"), timeout)
	if err != nil {
		return nil, err
	}
	cp.env.ControlPlane.Etcd = nil
	api := cp.env.ControlPlane.GetAPIServer()
	api.EtcdURL = cp.kine.url()
	api.StartTimeout, api.StopTimeout = timeout, cp.env.ControlPlaneStopTimeout
	if err := api.Start(); err != nil {
		return nil, err
	}
	admin, err := cp.env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("provision admin user: %w", err)
	}
	cfg := admin.Config()
	cp.env.Config = cfg
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, corev1.NamespaceDefault, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("default namespace did not appear within %s", timeout)
	}
	return cfg, nil
}
