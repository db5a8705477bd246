package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// targetFlags name the target of replay and conform (and of the
// randomized runs): the flags that fill a target.Spec.
type targetFlags struct {
	name                                string
	kubeconfig, context, limitedContext string
	webhook                             bool
	webhookHost                         string
	inject                              []string
	binDir                              string
	datastore                           string
	history, noProxy                    bool
	kubeVersion, kcmVersion             string
}

// datastoreUsage is the help of --datastore on every command that starts
// an envtest control plane.
const datastoreUsage = "envtest targets: what kube-apiserver stores objects in: etcd, or kine (SQLite, k3s's datastore; 'make kine' builds bin/kine; $CASCADE_KINE names another kine binary)"

func (f *targetFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.name, "target", target.Model, "where to run: "+strings.Join(target.Names, ", "))
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig: the cluster's kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig: the context to use (default: the current context)")
	fl.StringVar(&f.limitedContext, "limited-context", "", "kubeconfig: a context whose principal may not update */finalizers, for as=limited (cascade cluster writes cascade-limited)")
	fl.BoolVar(&f.webhook, "webhook", false, "kubeconfig: serve and register the deletion-protection webhook for the run")
	fl.StringVar(&f.webhookHost, "webhook-host", "", "kubeconfig: address the webhook listens on and the API server dials (default 127.0.0.1)")
	fl.StringArrayVar(&f.inject, "inject", nil, "impl, impl-stepped: switch on a catalogued bug (repeatable; "+strings.Join(bugs.InjectableNames(), ", ")+")")
	fl.BoolVar(&f.history, "history", false, "upstream, impl: also check each replay's recorded history (the audit log) for linearizability, as cascade fuzz does")
	fl.BoolVar(&f.noProxy, "no-proxy", false, "upstream: let kube-controller-manager talk to kube-apiserver directly, not through cascade's API proxy (for measuring the proxy's overhead)")
	fl.StringVar(&f.datastore, "datastore", "", datastoreUsage+" (default etcd)")
	fl.StringVar(&f.binDir, "kube-bin-dir", "", "envtest targets: directory with etcd, kube-apiserver, kube-controller-manager (default: $KUBEBUILDER_ASSETS, else bin/kube/<--kube-version> of the checkout, bin/kube/"+controlplane.KubeVersion+" without it)")
	fl.StringVar(&f.kubeVersion, "kube-version", "", kubeVersionUsage+"; on the model target without it each trace replays on the releases its header names")
	registerKCMVersion(fl, &f.kcmVersion)
}

// spec checks the flags and builds the target's Spec; every problem is a
// usage error.
func (f *targetFlags) spec(log io.Writer) (target.Spec, error) {
	if !slices.Contains(target.Names, f.name) { // before the release is resolved and named
		return target.Spec{}, usageErr("unknown target %q (valid: %s)", f.name, strings.Join(target.Names, ", "))
	}
	bs, err := bugs.Parse(f.inject)
	if err != nil {
		return target.Spec{}, usageErr("--inject: %v", err)
	}
	if len(bs) == 0 {
		bs = nil
	}
	s := target.Spec{
		Name: f.name, Inject: bs, Kubeconfig: f.kubeconfig, Context: f.context, LimitedContext: f.limitedContext,
		Webhook: f.webhook, WebhookHost: f.webhookHost, BinDir: f.binDir, Datastore: f.datastore, History: f.history, NoProxy: f.noProxy, Log: log,
	}
	if _, _, err := withKCMVersion(model.Release{}, f.kcmVersion); err != nil {
		return target.Spec{}, err
	}
	switch {
	case f.name == target.Model && f.kubeVersion == "" && f.kcmVersion != "":
		return target.Spec{}, usageErr("--kcm-version on the model target needs --kube-version: without it each trace replays on the releases its headers name")
	case f.name == target.Model && f.kubeVersion == "":
		// each trace on its own releases
	case f.name == target.Kubeconfig:
		// the cluster's binaries are not these: its own release
		if s.Release, err = kubeconfigRelease(f.kubeconfig, f.context, f.kubeVersion); err != nil {
			return target.Spec{}, err
		}
	case f.name == target.Model:
		// the model needs no binaries: the release is the one named
		if s.Release, err = parseKubeVersion(f.kubeVersion); err != nil {
			return target.Spec{}, err
		}
	default:
		var dir string
		if s.Release, dir, err = resolveRelease(f.kubeVersion, f.kcmVersion, f.binDir, target.JudgesKCM(f.name)); err != nil {
			return target.Spec{}, err
		}
		if dir != "" {
			s.BinDir = dir
		}
	}
	if s.Release, s.KCMNamed, err = withKCMVersion(s.Release, f.kcmVersion); err != nil {
		return target.Spec{}, err
	}
	if s.Release != (model.Release{}) {
		fmt.Fprintf(log, "%s: %s\n", f.name, releaseNote(s.Release))
	}
	if err := s.Validate(); err != nil {
		return target.Spec{}, usageErr("--target %s: %v", f.name, err)
	}
	return s, nil
}

// quietLogs discards controller-runtime's log (impl's GC and the webhook
// server log through it) and klog's (client-go's reflectors report there,
// for example "Failed to watch" while a deleted CRD's informer waits for
// the GC's next discovery sync): the verdicts report what went wrong, and
// progress on stderr stays readable. 'cascade gc -v N' shows impl's log.
// A logger without a sink discards everything, and setting one stops
// controller-runtime's warning that none was set.
func quietLogs() {
	ctrllog.SetLogger(klog.NewKlogr().WithSink(nil))
	klog.SetLogger(logr.Discard())
}

// startTarget starts a target; problems with what the flags name (a bad
// kubeconfig, an unreachable cluster, missing binaries) are usage errors.
func startTarget(ctx context.Context, s target.Spec) (*target.Target, error) {
	quietLogs()
	t, err := target.Start(ctx, s)
	var in *target.InputError
	switch {
	case err == nil:
		return t, nil
	case errors.As(err, &in):
		return nil, usageErr("--target %s: %v", s.Name, err)
	case ctx.Err() != nil:
		return nil, errInterrupted
	}
	return nil, &exitError{code: 1, err: fmt.Errorf("start %s: %w", s.Name, err)}
}

// closeTarget stops a target and folds a failure to stop into err.
func closeTarget(t *target.Target, err error) error {
	if cerr := t.Close(); cerr != nil {
		if err == nil || errors.Is(err, errViolation) || errors.Is(err, errInterrupted) {
			return &exitError{code: 1, err: fmt.Errorf("stop %s: %v", t.Spec.Name, cerr)}
		}
	}
	return err
}

// loadTraces reads trace files, or embedded traces by name (race/x,
// traces/races/x.trace) when no such file exists, so that the binary
// replays the repository's traces from anywhere.
func loadTraces(args []string) ([]*traces.Trace, error) {
	var out []*traces.Trace
	for _, a := range args {
		if _, err := os.Stat(a); err == nil {
			tr, err := traces.ParseFile(a)
			if err != nil {
				return nil, usageErr("%v", err)
			}
			out = append(out, tr)
			continue
		}
		tr, err := traces.FindEmbedded(a)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		if tr == nil {
			return nil, usageErr("%s: no such trace file, and no embedded trace of that name (see 'cascade conform --list')", a)
		}
		out = append(out, tr)
	}
	return out, nil
}

func newReplayCmd() *cobra.Command {
	var tf targetFlags
	cmd := &cobra.Command{
		Use:   "replay TRACE... [--target model|upstream|impl|impl-stepped|upstream-stepped|kubeconfig] [flags]",
		Short: "Replay traces on the model or a real target and report where they diverge",
		Long: `replay runs each trace and compares every stanza's output with what the file
expects, naming the first stanza that differs with a line diff
(-expected +target).

On the model the whole output counts: refused requests with their messages,
property violations (a trace with a '# property:' header must violate it) and
the sorted state dump. Real targets are held to the status code and reason of
refused requests and to the state dump; with --history (upstream, impl) also
to the recorded history of every request between them, which must be
linearizable with every GC and controller write permitted where it lands, as
in cascade fuzz: a GC write that breaks a safety property and is undone
before the next dump fails the replay there.

Targets (see 'cascade conform --help' for what each one runs):
  model         the model (default)
  upstream      envtest + kube-controller-manager's garbage collector
  impl          envtest + cascade's reference GC (--inject switches on bugs)
  impl-stepped  envtest + cascade's GC stepped by the trace's gc and
                controller steps; a trace's '# bug:' header applies its bugs
  upstream-stepped
                envtest + kube-controller-manager's garbage collector and
                workload controllers stepped by the trace's gc and controller
                steps through cascade's API proxy
  kubeconfig    the cluster of --kubeconfig/--context

TRACE is a file, or the name of a trace built into cascade (race/orphan-adoption,
traces/scenarios/background.trace). A trace the target cannot run (its
'# targets:' header, GC steps on an unsteppable target, as=limited without a
limited principal, ...) is skipped with the reason.

Exit codes: 0 every trace that ran agrees, 1 a divergence or a replay that
could not complete, 2 usage or input error (also: no trace could run on the
target), 130 interrupted (the run's objects are cleaned up first).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runReplay(cmd, tf, args) },
	}
	tf.register(cmd.Flags())
	return cmd
}

func runReplay(cmd *cobra.Command, tf targetFlags, args []string) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	spec, err := tf.spec(errOut)
	if err != nil {
		return err
	}
	trs, err := loadTraces(args)
	if err != nil {
		return err
	}
	var reasons []string
	for _, tr := range trs {
		if why := target.SpecSkip(spec, tr); why != "" {
			reasons = append(reasons, tr.Path+": "+why)
		}
	}
	if len(reasons) == len(trs) { // do not start a control plane for nothing
		return usageErr("none of the traces can run on %s: %s", spec.Name, strings.Join(reasons, "; "))
	}
	ctx := cmd.Context()
	t, err := startTarget(ctx, spec)
	if err != nil {
		return err
	}
	passed, failed, skipped := 0, 0, 0
	for _, tr := range trs {
		if ctx.Err() != nil {
			break
		}
		v := t.Check(ctx, tr)
		switch v.Result() {
		case target.Skipped:
			skipped++
			fmt.Fprintf(out, "skip %s: %s\n", tr.Path, v.Skip)
		case target.Pass:
			passed++
			if spec.Name == target.Model {
				fmt.Fprintf(out, "ok   %s (%s)\n", tr.Path, plural(len(tr.Stanzas), "stanza"))
			} else {
				fmt.Fprintf(out, "ok   %s (%s, %s)\n", tr.Path, plural(len(tr.Stanzas), "stanza"), seconds(v.Elapsed))
			}
		default:
			if ctx.Err() != nil && v.Divergence == nil {
				break // interrupted mid-trace: no verdict
			}
			failed++
			fmt.Fprintf(out, "FAIL %s\n", tr.Path)
			if v.Divergence != nil {
				fmt.Fprintln(out, v.Divergence)
			}
			if v.Err != nil {
				// a trace error names its file already
				if te := (*traces.Error)(nil); errors.As(v.Err, &te) && te.Path == tr.Path {
					fmt.Fprintln(out, v.Err)
				} else {
					fmt.Fprintf(out, "%s: %v\n", tr.Path, v.Err)
				}
			}
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped on %s\n", passed, failed, skipped, spec.Name)
	var result error
	switch {
	case ctx.Err() != nil:
		result = errInterrupted
	case failed > 0:
		result = errViolation
	case passed == 0:
		result = usageErr("none of the traces can run on %s", spec.Name)
	}
	return closeTarget(t, result)
}

// seconds renders a duration for tables: 0.42s, 12.3s, 2m05s.
func seconds(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
