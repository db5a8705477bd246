// Package controlplane starts a real Kubernetes control plane for cascade's
// conformance harness: etcd and kube-apiserver through controller-runtime's
// envtest, optionally the upstream kube-controller-manager (whose garbage
// collector is the reference behaviour the model is checked against), and
// optionally an API-server audit log that records every request of every
// actor with its timestamps (see AuditRecord).
//
// The binaries are the ones hack/kube/build.sh builds from the Go module
// proxy; envtest's own download is never used. Every binary carries a
// lifeline (hack/kube/internal/lifeline) and exits when the process that
// started it exits, so a test that panics or times out leaves nothing behind.
//
// Options.Datastore runs kube-apiserver on kine (github.com/k3s-io/kine,
// SQLite, built by hack/kine/build.sh) instead of etcd; see kine.go.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVersion is the Kubernetes version hack/kube/build.sh builds and the
// default binary directory is named after.
const KubeVersion = "v1.37.2"

// Names of the control-plane binaries looked up in the binary directory.
const (
	EtcdBinary              = "etcd"
	APIServerBinary         = "kube-apiserver"
	ControllerManagerBinary = "kube-controller-manager"
)

// Options configures Start. The zero value starts etcd and kube-apiserver
// only, like plain envtest.
type Options struct {
	// BinDir is the directory holding etcd, kube-apiserver and
	// kube-controller-manager. Empty means: $KUBEBUILDER_ASSETS if set,
	// else <repo root>/bin/kube/<KubeVersion> (see ResolveBinDir).
	BinDir string

	// ControllerManager runs the upstream kube-controller-manager with
	// Controllers against the API server, as the user
	// ControllerManagerUser in group system:masters. Start returns once
	// its garbage collector has collected a probe object.
	ControllerManager bool

	// Controllers overrides the --controllers list; empty means
	// DefaultControllers.
	Controllers []string

	// ControllerManagerVia, when set, puts an API proxy (harness/proxy)
	// between kube-controller-manager and kube-apiserver: it is called
	// once, before the controller manager first starts, with the
	// controller manager's identity (a client configuration for
	// kube-apiserver as ControllerManagerUser) and returns the URL the
	// controller manager talks to instead, with no credentials of its
	// own and JSON request bodies (ProxiedArgs).
	ControllerManagerVia func(identity *rest.Config) (url string, err error)

	// WorkloadControllers, when set with ControllerManager, runs a second
	// kube-controller-manager process with these --controllers
	// (upstream-stepped runs its garbage collector in the first and the
	// workload controllers here, so that their informers are separate
	// watch streams). Its kubeconfig names the URL WorkloadControllersVia
	// returns (a further listener of the same proxy), or, when that is
	// nil, is the first process's. RestartControllerManager restarts the
	// first process only.
	WorkloadControllers    []string
	WorkloadControllersVia func() (url string, err error)

	// ControllerManagerArgs are further flags for every
	// kube-controller-manager process (restarts included), after the
	// harness's own (controllerManagerArgs).
	ControllerManagerArgs []string
	// APIServerFeatureGates, when set, is kube-apiserver's
	// --feature-gates (restarts included).
	APIServerFeatureGates string

	// Audit enables the kube-apiserver audit log (JSON lines, blocking
	// mode) with the policy described at AuditPolicy; read it with
	// AuditRecords or FollowAudit.
	Audit bool

	// KeepDir keeps the working directory (logs, audit log, kubeconfig)
	// after Stop; by default Stop removes it.
	KeepDir bool

	// Datastore is what kube-apiserver stores objects in: DatastoreEtcd
	// (empty means etcd) or DatastoreKine, kine over SQLite.
	Datastore string

	// KinePath is the kine executable for DatastoreKine; empty means
	// <repo root>/bin/kine/<KineVersion>/kine (see ResolveKine).
	KinePath string

	// StartTimeout bounds each start phase (envtest start, controller
	// manager readiness). Zero means 60s.
	StartTimeout time.Duration
}

// ControlPlane is a running control plane started by Start. Call Stop when
// done; Stop is safe to call more than once.
type ControlPlane struct {
	// Config is an admin (system:masters) client configuration for the API
	// server, with envtest's QPS 1000 and burst 2000.
	Config *rest.Config

	env     *envtest.Environment
	binDir  string
	dir     string
	keepDir bool
	audit   string // audit log path, "" when disabled
	kcm     *controllerManager
	kcm2    *controllerManager // the workload controllers' (Options.WorkloadControllers)
	kine    *kine              // nil on etcd
	// kcmKubeconfig is the controller manager's kubeconfig, and proxied
	// says it names a proxy (Options.ControllerManagerVia)
	kcmKubeconfig string
	proxied       bool
	// kcmArgs are Options.ControllerManagerArgs
	kcmArgs []string
	// kcmControllers is its --controllers list, kcmMu guards kcm across
	// RestartControllerManager
	kcmControllers []string
	kcmMu          sync.Mutex
	procs          []Process

	stopOnce sync.Once
	stopErr  error
}

// Process names one operating-system process of a control plane.
type Process struct {
	// Name is the binary name, for example "kube-apiserver".
	Name string
	// PID is the process id.
	PID int
}

// Start starts etcd and kube-apiserver (and, as opts asks, an audit log and
// kube-controller-manager) and waits until they serve. ctx bounds the wait
// for the controller manager; each envtest process start is bounded by
// Options.StartTimeout. On error nothing that Start started is left
// running, and the working directory is kept for its logs.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, retErr error) {
	binDir, source, err := ResolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	need := []string{EtcdBinary, APIServerBinary}
	kinePath := ""
	switch opts.Datastore {
	case "", DatastoreEtcd:
	case DatastoreKine:
		need = need[1:]
		if kinePath, err = ResolveKine(opts.KinePath); err != nil {
			return nil, err
		}
	default:
		return nil, CheckDatastore(opts.Datastore)
	}
	if opts.ControllerManager {
		need = append(need, ControllerManagerBinary)
	}
	for _, name := range need {
		if err := checkBinary(binDir, source, name); err != nil {
			return nil, err
		}
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}

	sweepStaleDirs()
	dir, err := os.MkdirTemp("", workDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("controlplane: create working directory: %w", err)
	}
	if !opts.KeepDir {
		// Lets a later Start remove this directory if this process dies
		// without calling Stop (etcd preallocates 64 MiB of WAL in it).
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}
	subs := []string{"apiserver", "etcd"}
	if kinePath != "" {
		subs = subs[:1] // kine makes its own (startKine)
	}
	for _, sub := range subs {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}
	cp := &ControlPlane{binDir: binDir, dir: dir, keepDir: opts.KeepDir}
	defer func() {
		if retErr != nil {
			// Keep the logs the error points to; once this process has
			// exited, a later Start sweeps the directory (see ownerFile).
			cp.keepDir = true
			_ = cp.Stop()
		}
	}()

	apiLog, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	defer apiLog.Close() // the child process holds its own descriptor
	var etcdLog *os.File // nil on kine: envtest's etcd does not run
	if kinePath == "" {
		if etcdLog, err = os.Create(filepath.Join(dir, "etcd.log")); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		defer etcdLog.Close()
	}

	noExisting := false
	cp.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			APIServer: &envtest.APIServer{Path: filepath.Join(binDir, APIServerBinary), Out: apiLog, Err: apiLog,
				CertDir: filepath.Join(dir, "apiserver")},
			Etcd: &envtest.Etcd{Path: filepath.Join(binDir, EtcdBinary), Out: etcdLog, Err: etcdLog,
				DataDir: filepath.Join(dir, "etcd")},
			KubectlPath: filepath.Join(binDir, "kubectl"), // never run: the harness does not use envtest's kubectl helper
		},
		BinaryAssetsDirectory:    binDir,
		UseExistingCluster:       &noExisting,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	// cascade's control plane differs from envtest's defaults in two
	// admission plugins. OwnerReferencesPermissionEnforcement is on, as in
	// many distributions, so that blockOwnerDeletion needs update on the
	// owner's finalizers (the model's as=limited principal). The
	// StorageObjectInUseProtection plugin is off because no pv-protection
	// controller runs here to remove the finalizer it adds to every
	// PersistentVolume, which would hold every deleted PV forever.
	api := cp.env.ControlPlane.GetAPIServer().Configure()
	api.Set("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	api.Set("disable-admission-plugins", "ServiceAccount,StorageObjectInUseProtection")
	// A graceful stop (RestartAPIServer) ends the watches it serves at
	// once, so that its HTTP server closes its connections as soon as
	// the requests in flight are done; without this kube-apiserver waits
	// up to its request timeout (60 s) for informers' watches to end.
	api.Set("shutdown-watch-termination-grace-period", "2s")
	if opts.APIServerFeatureGates != "" {
		api.Set("feature-gates", opts.APIServerFeatureGates)
	}
	if opts.Audit {
		cp.audit = filepath.Join(dir, "audit.log")
		if err := configureAudit(cp.env.ControlPlane.GetAPIServer(), dir, cp.audit); err != nil {
			return nil, err
		}
	}

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	var cfg *rest.Config
	store := "etcd"
	if kinePath != "" {
		store = "kine"
		cfg, err = cp.startOnKine(kinePath, timeout)
	} else {
		cfg, err = cp.env.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("controlplane: start %s and kube-apiserver from %s: %s; last kube-apiserver log line: %s; logs in %s",
			store, binDir, oneLine(err.Error()), lastLine(apiLog.Name()), dir)
	}
	cp.Config = cfg
	match := map[string]string{APIServerBinary: "--cert-dir=" + cp.env.ControlPlane.APIServer.CertDir}
	if cp.kine == nil {
		match[EtcdBinary] = "--data-dir=" + cp.env.ControlPlane.Etcd.DataDir
	}
	cp.procs = findProcesses(match)
	if cp.kine != nil {
		cp.procs = append(cp.procs, Process{Name: KineBinary, PID: cp.kine.cmd.Process.Pid})
	}

	if opts.ControllerManager {
		controllers := opts.Controllers
		if len(controllers) == 0 {
			controllers = DefaultControllers
		}
		if err := writeControllerManagerKubeconfig(cp, opts.ControllerManagerVia); err != nil {
			return nil, err
		}
		cp.kcmControllers, cp.kcmArgs = controllers, opts.ControllerManagerArgs
		cp.kcm, err = startControllerManager(cp, cp.kcmKubeconfig, "kube-controller-manager.log", controllers)
		if err != nil {
			return nil, err
		}
		cp.procs = append(cp.procs, Process{Name: ControllerManagerBinary, PID: cp.kcm.cmd.Process.Pid})
		if len(opts.WorkloadControllers) > 0 {
			kc, err := writeWorkloadKubeconfig(cp, opts.WorkloadControllersVia)
			if err != nil {
				return nil, err
			}
			cp.kcm2, err = startControllerManager(cp, kc, WorkloadControllerManagerName+".log", opts.WorkloadControllers)
			if err != nil {
				return nil, err
			}
			cp.procs = append(cp.procs, Process{Name: WorkloadControllerManagerName, PID: cp.kcm2.cmd.Process.Pid})
		}
		// Without its garbage collector (the impl target runs cascade's
		// own) there is nothing to probe; the workload controllers start
		// with the process.
		if slices.Contains(controllers, "garbagecollector") {
			if err := cp.kcm.waitCollecting(ctx, cfg, timeout); err != nil {
				return nil, err
			}
		}
	}
	return cp, nil
}

// AddUser provisions a further user (for example a test driver with its
// own name, so that the audit log tells its requests apart) and returns a
// client configuration for it.
func (cp *ControlPlane) AddUser(user envtest.User) (*rest.Config, error) {
	u, err := cp.env.ControlPlane.AddUser(user, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("controlplane: add user %q: %s", user.Name, oneLine(err.Error()))
	}
	return u.Config(), nil
}

// Dir is the working directory holding everything the control plane
// writes: etcd's data, the API server's certificates, the logs, the audit
// log and the controller manager's kubeconfig.
func (cp *ControlPlane) Dir() string { return cp.dir }

// BinDir is the directory the binaries were started from.
func (cp *ControlPlane) BinDir() string { return cp.binDir }

// APIServerLog is the path of kube-apiserver's combined stdout and stderr.
func (cp *ControlPlane) APIServerLog() string { return filepath.Join(cp.dir, "kube-apiserver.log") }

// ControllerManagerLog is the path of kube-controller-manager's combined
// stdout and stderr, or "" when it does not run. Print its tail with
// LogTail when a test fails.
func (cp *ControlPlane) ControllerManagerLog() string {
	if cp.kcm == nil {
		return ""
	}
	return cp.kcm.logPath
}

// Processes lists the operating-system processes this control plane
// started (etcd, kube-apiserver and, if any, kube-controller-manager).
func (cp *ControlPlane) Processes() []Process { return append([]Process(nil), cp.procs...) }

// Survivors lists those Processes that still run. After Stop it must be
// empty; tests assert that.
func (cp *ControlPlane) Survivors() []Process {
	var out []Process
	for _, p := range cp.procs {
		if p.Running() {
			out = append(out, p)
		}
	}
	return out
}

// String renders the process as "name (pid N)".
func (p Process) String() string { return fmt.Sprintf("%s (pid %d)", p.Name, p.PID) }

// Stop stops kube-controller-manager first (so that it does not log
// errors against a vanishing API server), then kube-apiserver and etcd
// (or kine), checks that none of them survived, and removes the working
// directory unless Options.KeepDir is set. It is idempotent: later calls return the
// first call's result.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		for _, m := range []*controllerManager{cp.kcm2, cp.kcm} {
			if m != nil {
				if err := m.stop(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if cp.env != nil {
			if err := cp.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("controlplane: stop etcd and kube-apiserver: %s", oneLine(err.Error())))
			}
		}
		if err := cp.kine.stop(); err != nil {
			errs = append(errs, err)
		}
		for _, p := range cp.Survivors() {
			killProcess(p.PID)
			errs = append(errs, fmt.Errorf("controlplane: %s survived Stop and was killed", p))
		}
		if !cp.keepDir && cp.dir != "" {
			if err := os.RemoveAll(cp.dir); err != nil {
				errs = append(errs, fmt.Errorf("controlplane: remove %s: %w", cp.dir, err))
			}
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// ResolveBinDir returns the directory to take the control-plane binaries
// from and says where that choice came from: the explicit flag value if
// non-empty, else $KUBEBUILDER_ASSETS (envtest's variable) if set, else
// <repo root>/bin/kube/<KubeVersion>, where the repo root is the nearest
// directory at or above the working directory that contains
// hack/kube/build.sh.
func ResolveBinDir(flag string) (dir, source string, err error) {
	if flag != "" {
		return abs(flag), "flag", nil
	}
	if env := os.Getenv("KUBEBUILDER_ASSETS"); env != "" {
		return abs(env), "KUBEBUILDER_ASSETS", nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("controlplane: find binaries: %w", err)
	}
	root, err := RepoRoot(wd)
	if err != nil {
		return "", "", err
	}
	return filepath.Join(root, "bin", "kube", KubeVersion), "repository", nil
}

// RepoRoot walks up from start to the directory that contains
// hack/kube/build.sh, the root of a cascade checkout.
func RepoRoot(start string) (string, error) {
	for dir := abs(start); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "hack", "kube", "build.sh")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("controlplane: no cascade checkout (hack/kube/build.sh) at or above %s; set KUBEBUILDER_ASSETS to a directory holding etcd and kube-apiserver", start)
		}
	}
}

const (
	workDirPrefix = "cascade-controlplane-"
	ownerFile     = "owner.pid"
)

// sweepStaleDirs removes the working directories of control planes whose
// process died without calling Stop (a panic, a test timeout, a kill);
// their servers died with them through the lifeline.
func sweepStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // kept on purpose, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

func checkBinary(dir, source, name string) error {
	path := filepath.Join(dir, name)
	fi, err := os.Stat(path)
	hint := "(run 'make kube' to build the control plane)"
	if source != "repository" {
		hint = fmt.Sprintf("(directory from %s; run 'make kube' to build the control plane into bin/kube/%s)", source, KubeVersion)
	}
	switch {
	case err != nil:
		return fmt.Errorf("controlplane: %s not found in %s %s", name, dir, hint)
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("controlplane: %s in %s is not an executable file %s", name, dir, hint)
	}
	return nil
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// oneLine folds a multi-line message (envtest aggregates errors over
// lines) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
