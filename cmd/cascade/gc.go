package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/impl/crds"
	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/impl/step"
	"github.com/cascade-k8s/cascade/impl/webhook"
)

type gcFlags struct {
	kubeconfig, context     string
	inject                  []string
	webhook, adopter        bool
	webhookHost, webhookExt string
	webhookPort             int
	workers                 int
	syncPeriod              time.Duration
	verbosity               int
	listBugs                bool
}

// newGCCmd is `cascade gc`: impl's garbage collector (and, as asked, the
// deletion-protection webhook and the adopting controller) against any
// cluster, until SIGINT or SIGTERM.
func newGCCmd() *cobra.Command {
	f := gcFlags{workers: 5, syncPeriod: 30 * time.Second, webhookHost: "127.0.0.1"}
	cmd := &cobra.Command{
		Use:   "gc --kubeconfig PATH [--context C] [--inject BUG]... [--webhook] [flags]",
		Short: "Run cascade's reference garbage collector against a cluster",
		Long: `gc runs impl, cascade's reference garbage collector (a re-implementation of
the kube-controller-manager v1.36/v1.37 GC), against the cluster a kubeconfig
names, until interrupted (SIGINT or SIGTERM stop it cleanly).

It is a single instance without leader election:
  - never run two 'cascade gc' against one cluster: they would race;
  - disable the cluster's own garbage collector first (kube-controller-manager
    --controllers=-garbagecollector,* or --enable-garbage-collector=false),
    or the two GCs race each other.

--inject switches on a catalogued bug (--list-bugs), so that conformance
runs can check that they find it. --webhook also serves the
deletion-protection webhook (policy.kruise.io/delete-protection) on this
machine and registers it with the cluster, whose API server must reach
--webhook-external-host; the registration is removed on exit, and one
already on the cluster (another cascade's) is refused, never replaced. --adopter
runs the adopting controller for the cascade.dev/v1 Herd kind and installs
its CRD if missing.

Logs go to stderr (-v raises the verbosity; 2 shows every deletion).

Exit codes: 0 after a clean stop, 1 when impl fails to start or stop, 2 for
bad flags or an unreachable cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runGC(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context (default: the current context)")
	fl.StringArrayVar(&f.inject, "inject", nil, "switch on a catalogued bug; repeatable (see --list-bugs)")
	fl.BoolVar(&f.listBugs, "list-bugs", false, "list the bugs --inject accepts and exit")
	fl.BoolVar(&f.webhook, "webhook", false, "serve and register the deletion-protection webhook")
	fl.StringVar(&f.webhookHost, "webhook-host", f.webhookHost, "address the webhook listens on")
	fl.StringVar(&f.webhookExt, "webhook-external-host", "", "host name the API server calls the webhook at (default: --webhook-host)")
	fl.IntVar(&f.webhookPort, "webhook-port", 0, "port the webhook listens on (0: any free port)")
	fl.BoolVar(&f.adopter, "adopter", false, "run the adopting controller for cascade.dev/v1 Herds")
	fl.IntVar(&f.workers, "workers", f.workers, "attemptToDelete and attemptToOrphan workers each")
	fl.DurationVar(&f.syncPeriod, "sync-period", f.syncPeriod, "how often discovery is re-synced for new resources")
	fl.IntVarP(&f.verbosity, "verbosity", "v", 0, "log verbosity")
	return cmd
}

func runGC(cmd *cobra.Command, f gcFlags) error {
	if f.listBugs {
		for _, b := range bugs.InjectableNames() {
			fmt.Fprintln(cmd.OutOrStdout(), b)
		}
		return nil
	}
	bs, err := bugs.Parse(f.inject)
	if err != nil {
		return usageErr("--inject: %v", err)
	}
	if f.workers < 1 || f.syncPeriod <= 0 {
		return usageErr("--workers must be at least 1 and --sync-period positive")
	}
	if f.webhookPort < 0 || f.webhookPort > 65535 {
		return usageErr("--webhook-port %d: want 0 (any free port) to 65535", f.webhookPort)
	}
	cfg, where, err := target.LoadKubeconfig(f.kubeconfig, f.context)
	if err != nil {
		return usageErr("%v", err)
	}
	if err := target.Reachable(cfg); err != nil {
		return usageErr("%v", target.Unreachable(cfg, where, err))
	}

	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(f.verbosity))
	ctrllog.SetLogger(klog.NewKlogr())
	defer klog.Flush()

	ctx := cmd.Context() // cancelled by SIGINT or SIGTERM (main)
	errOut := cmd.ErrOrStderr()
	if f.adopter {
		// impl's adopter requires its CRD; installing it is the caller's
		// part, as the harness does for its targets
		if err := crds.Install(ctx, cfg, crds.Herd); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return &exitError{code: 1, err: fmt.Errorf("gc: install the Herd CRD on %s: %s", where, target.OneLine(err))}
		}
	}
	t, err := impl.Start(ctx, cfg, impl.Options{
		Mode: step.Auto, Bugs: bs, Adopter: f.adopter, Webhook: f.webhook,
		GC:             gc.Options{Workers: f.workers, SyncPeriod: f.syncPeriod},
		WebhookOptions: webhook.Options{Host: f.webhookHost, Port: f.webhookPort, ExternalHost: f.webhookExt},
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return &exitError{code: 1, err: fmt.Errorf("gc: start on %s: %w", where, err)}
	}
	fmt.Fprintf(errOut, "cascade gc: collecting garbage on %s (%s), bugs: %s", cfg.Host, where, bs)
	if t.Webhook != nil {
		fmt.Fprintf(errOut, ", webhook at %s", t.Webhook.URL())
	}
	fmt.Fprintln(errOut, "; Ctrl-C stops")
	<-ctx.Done()
	fmt.Fprintln(errOut, "cascade gc: stopping")
	if err := t.Stop(); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("gc: stop: %w", err)}
	}
	return nil
}
