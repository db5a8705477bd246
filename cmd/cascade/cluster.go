package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl/bugs"
)

// Context names in the kubeconfig `cascade cluster` writes.
const (
	clusterAdminContext   = "cascade"
	clusterLimitedContext = "cascade-limited"
)

type clusterFlags struct {
	kubeconfigOut, target, binDir, datastore string
	inject                                   []string
	merge                                    bool
}

func newClusterCmd() *cobra.Command {
	f := clusterFlags{kubeconfigOut: filepath.Join("out", "cluster", "kubeconfig"), target: target.Upstream}
	cmd := &cobra.Command{
		Use:   "cluster [--target upstream|impl] [--kubeconfig-out FILE] [flags]",
		Short: "Start a local control plane and write a kubeconfig for it",
		Long: `cluster starts a control plane on this machine, as 'cascade conform' starts
its envtest targets, writes an admin kubeconfig for it and runs until SIGINT
or SIGTERM, then stops everything and takes the kubeconfig back.

The kubeconfig is yours as soon as it is written, so cluster never replaces
a file it did not create. --kubeconfig-out must name a new file, which is
removed on exit; or pass --merge to add cascade's clusters, users and
contexts to an existing kubeconfig (such as ~/.kube/config) the way kind and
minikube do, with cascade's context made current. On exit the file goes
back to its exact bytes when nobody changed it meanwhile; otherwise only
the entries this run wrote are removed and the previous current context is
restored. A name the file already uses for an entry cascade did not write
is refused. Entries carry a "cascade" extension naming the run.

  --target upstream  etcd, kube-apiserver and kube-controller-manager (` + releaseInUse + `)
                     (garbage collector and workload controllers), cascade's
                     deletion-protection webhook
  --target impl      the same with cascade's reference GC in place of
                     kube-controller-manager's (--inject switches on bugs)

The kubeconfig has two contexts: cascade (admin, the current context) and
cascade-limited (a principal without update on */finalizers, which the
traces' as=limited needs). Any client works against it; to run the
conformance suite through the kubeconfig target:

  cascade cluster --kubeconfig-out /tmp/cascade.kubeconfig &
  cascade conform --target kubeconfig --kubeconfig /tmp/cascade.kubeconfig --limited-context cascade-limited

The binaries come from --kube-bin-dir, $KUBEBUILDER_ASSETS, or bin/kube/` + controlplane.KubeVersion + `
of the checkout ('make kube' builds them). --datastore kine stores the
objects in kine over SQLite, k3s's datastore, instead of etcd
(bin/kine/` + controlplane.KineVersion + `/kine of the checkout; 'make kine' builds it).

Exit codes: 0 after a clean stop, 1 when the control plane fails to start or
stop, 2 usage error (also: missing binaries).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCluster(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfigOut, "kubeconfig-out", f.kubeconfigOut, "where to write the kubeconfig: a new file, removed on exit (an existing one is refused without --merge)")
	fl.BoolVar(&f.merge, "merge", false, "add cascade's contexts to an existing kubeconfig (made current), and remove exactly them on exit")
	fl.StringVar(&f.target, "target", f.target, "which garbage collector runs: upstream or impl")
	fl.StringArrayVar(&f.inject, "inject", nil, "impl: switch on a catalogued bug (repeatable; "+strings.Join(bugs.InjectableNames(), ", ")+")")
	fl.StringVar(&f.datastore, "datastore", "", datastoreUsage+" (default etcd)")
	fl.StringVar(&f.binDir, "kube-bin-dir", "", "directory with etcd, kube-apiserver, kube-controller-manager (default: $KUBEBUILDER_ASSETS, else bin/kube/"+controlplane.KubeVersion+" of the checkout)")
	return cmd
}

func runCluster(cmd *cobra.Command, f clusterFlags) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.target != target.Upstream && f.target != target.Impl {
		return usageErr("--target %q: cluster runs upstream or impl", f.target)
	}
	bs, err := bugs.Parse(f.inject)
	if err != nil {
		return usageErr("--inject: %v", err)
	}
	if len(bs) == 0 {
		bs = nil
	}
	if f.kubeconfigOut == "" {
		return usageErr("--kubeconfig-out must name a file")
	}
	path, err := filepath.Abs(f.kubeconfigOut)
	if err != nil {
		return usageErr("--kubeconfig-out: %v", err)
	}
	merge := false
	if _, err := os.Lstat(path); err == nil {
		if !f.merge {
			return usageErr("--kubeconfig-out: %v", target.ExistsError(path))
		}
		if err := target.CheckMerge(path, clusterAdminContext, clusterLimitedContext); err != nil {
			return usageErr("--kubeconfig-out: %v", err)
		}
		merge = true
	}
	spec := target.Spec{Name: f.target, Inject: bs, BinDir: f.binDir, Datastore: f.datastore, Log: errOut}
	if err := spec.Validate(); err != nil {
		return usageErr("--target %s: %v", f.target, err)
	}
	ctx := cmd.Context()
	t, err := startTarget(ctx, spec)
	if errors.Is(err, errInterrupted) {
		return nil // stopped while starting: nothing is left running
	}
	if err != nil {
		return err
	}
	write := target.WriteKubeconfig
	if merge {
		write = target.MergeKubeconfig
	}
	kc, err := write(path,
		target.Context{Name: clusterAdminContext, Config: t.Admin},
		target.Context{Name: clusterLimitedContext, Config: t.Limited})
	if err != nil {
		// the file changed while the control plane started: still an input
		// error, and nothing was written
		return closeTarget(t, &exitError{code: 2, err: fmt.Errorf("--kubeconfig-out: %w", err)})
	}
	var procs []string
	for _, p := range t.CP.Processes() {
		procs = append(procs, p.String())
	}
	fmt.Fprintf(errOut, "cascade cluster: processes %s\n", strings.Join(procs, ", "))
	gcs := "kube-controller-manager's garbage collector"
	if f.target == target.Impl {
		gcs = "cascade's reference GC, bugs: " + bs.String()
	}
	fmt.Fprintf(out, "cascade cluster: %s control plane at %s (%s)\n", f.target, t.Admin.Host, gcs)
	how := "a new file, removed on exit"
	if merge {
		how = "merged; current context now " + clusterAdminContext + ", taken back on exit"
	}
	fmt.Fprintf(out, "kubeconfig: %s (contexts %s, %s; %s)\n", path, clusterAdminContext, clusterLimitedContext, how)
	fmt.Fprintf(out, "  cascade conform --target kubeconfig --kubeconfig %s --limited-context %s\n", path, clusterLimitedContext)
	fmt.Fprintln(out, "SIGINT or SIGTERM (Ctrl-C) stops it")
	<-ctx.Done()
	fmt.Fprintln(errOut, "cascade cluster: stopping")
	var result error
	if err := kc.Remove(); err != nil {
		result = &exitError{code: 1, err: err}
	}
	return closeTarget(t, result)
}
