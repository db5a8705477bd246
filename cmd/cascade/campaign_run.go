package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-k8s/cascade/harness/artifact"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model/check"
)

type campaignRunFlags struct {
	kubeconfig, context, image, cpu, memory, out string
	shards, parallelism                          int
	backoff                                      int32
	dryRun, json                                 bool
	timeout                                      time.Duration
}

// Each pod's requests, from one measured shard of 5 upstream runs
// (README "Campaigns"): kube-apiserver, etcd, kube-controller-manager
// and cascade together peaked at 518 MiB resident and used 7 CPU-seconds
// in 31.6 s (22% of a core); memory is half again the peak, CPU half a
// core.
const (
	campaignDefaultCPU    = "500m"
	campaignDefaultMemory = "768Mi"
)

// A check shard's requests, from the measured shards of trio, the
// largest named universe, in 4 shards (README "Campaigns"): each peaked
// at 672 to 690 MiB resident and took 23 to 27 CPU-seconds; memory is
// half again the peak, and a whole core, as the search's workers use
// every core they are given. Fewer shards or a larger universe need
// --memory.
const (
	campaignCheckCPU    = "1"
	campaignCheckMemory = "1Gi"
)

func newCampaignRunCmd() *cobra.Command {
	f := &campaignRunFlags{}
	cmd := &cobra.Command{
		Use:   "run --kubeconfig K --image REF --shards N [--parallelism P] -- [fuzz] FUZZ-FLAGS... | check --universe NAME CHECK-FLAGS...",
		Short: "Run a fuzz or universe-check campaign on a cluster as an Indexed Job, one pod per shard, and merge the shards",
		Long: `run creates a namespace cascade-campaign-ID and in it an Indexed Job
(completionMode Indexed, --shards completions, --parallelism pods at once,
backoffLimitPerIndex --backoff-per-index): pod i runs
'cascade fuzz FUZZ-FLAGS --shards N --json' from --image (make image: the
static cascade binary at /cascade, the control-plane binaries at /kube),
so that $JOB_COMPLETION_INDEX makes it shard i, against its own in-pod
envtest; after '-- check', pod i runs
'cascade check --universe NAME CHECK-FLAGS --shards N --json', the
universe's i-th slice of initial graphs (no control plane; --cpu and
--memory then default to ` + campaignCheckCPU + ` and ` + campaignCheckMemory + `). The Job is named fuzz or check.
A pod whose shard found a failing run or an unclassified violation class
(exit 1 or 3) is not retried. run waits, printing the shards done, failed
and running, then writes each finished shard's pod log to
--out DIR/shard-I.log and the summary in it to DIR/shard-I.json, and
merges the summaries it wrote as 'cascade campaign merge' does. The
namespace and all in it are deleted at the end, and on SIGINT; but when
the pods could not be listed or a finished pod's log could not be read
or written, the namespace is kept (and named), so that nothing a shard
found is lost.

--dry-run prints the manifests and has the API server check them
(server-side dry run, nothing created) when a kubeconfig is reachable.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runCampaign(cmd, f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	fl.StringVar(&f.image, "image", "", "image holding /cascade and the control-plane binaries at /kube (make image) (required)")
	fl.IntVar(&f.shards, "shards", 0, "number of shards, the Job's completions (required)")
	fl.IntVar(&f.parallelism, "parallelism", 0, "pods running at once (default: --shards)")
	fl.Int32Var(&f.backoff, "backoff-per-index", 1, "retries of a shard whose pod failed to run (backoffLimitPerIndex)")
	fl.StringVar(&f.cpu, "cpu", campaignDefaultCPU, "each pod's CPU request (a check campaign's default: "+campaignCheckCPU+")")
	fl.StringVar(&f.memory, "memory", campaignDefaultMemory, "each pod's memory request and limit (a check campaign's default: "+campaignCheckMemory+")")
	fl.StringVar(&f.out, "out", "out/campaign", "directory for the shards' summaries and pod logs (shard-I.json, shard-I.log)")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Hour, "give up waiting for the Job after this")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the manifests (and check them with a server-side dry run when the cluster is reachable); create nothing")
	fl.BoolVar(&f.json, "json", false, "print the merged report as JSON")
	return cmd
}

func runCampaign(cmd *cobra.Command, f *campaignRunFlags, args []string) error {
	switch {
	case f.image == "":
		return usageErr("campaign run needs --image (make image)")
	case f.shards <= 0:
		return usageErr("--shards %d: want a positive number of shards", f.shards)
	case f.parallelism < 0:
		return usageErr("--parallelism %d: want a positive number of pods", f.parallelism)
	case f.backoff < 0:
		return usageErr("--backoff-per-index %d: want 0 or more", f.backoff)
	}
	command, args, err := campaignCommand(args, f.shards)
	if err != nil {
		return err
	}
	if command == "check" {
		if !cmd.Flags().Changed("cpu") {
			f.cpu = campaignCheckCPU
		}
		if !cmd.Flags().Changed("memory") {
			f.memory = campaignCheckMemory
		}
	}
	if f.parallelism == 0 {
		f.parallelism = f.shards
	}
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	j := campaignJob{ID: hex.EncodeToString(id), Image: f.image, Shards: f.shards, Parallelism: f.parallelism,
		BackoffPerIndex: f.backoff, CPU: f.cpu, Memory: f.memory, Command: command, Args: args}
	if _, _, err := j.manifests(); err != nil {
		return err
	}
	w, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	cfg, where, err := target.LoadKubeconfig(f.kubeconfig, f.context)
	if f.dryRun {
		if err := j.printManifests(w); err != nil {
			return err
		}
		if err != nil || target.Reachable(cfg) != nil {
			fmt.Fprintln(progress, "campaign: no reachable cluster: manifests not checked by an API server")
			return nil
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if err := j.create(cmd.Context(), cs, true); err != nil {
			return err
		}
		fmt.Fprintln(progress, "campaign: the API server accepts the manifests (server-side dry run)")
		return nil
	}
	if err != nil {
		return usageErr("%v", err)
	}
	// refused now, before the Job exists: a shard file cascade did not
	// write, which collect could not replace once the shards had run
	if err := artifact.Check(j.shardFiles(f.out)...); err != nil {
		return usageErr("--out: %v", err)
	}
	if err := target.Reachable(cfg); err != nil {
		return usageErr("%v", target.Unreachable(cfg, where, err))
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if err := j.create(ctx, cs, false); err != nil {
		return err
	}
	// keep is set when a finished shard's log could not be saved: the
	// namespace, and so the pod and its log, is then left for the user.
	keep := false
	defer func() {
		if keep {
			fmt.Fprintf(progress, "campaign %s: namespace %s kept, as deleting it would lose what a shard's pod logged; read it with 'kubectl -n %s logs POD', then delete it with 'kubectl delete namespace %s'\n", j.ID, j.namespace(), j.namespace(), j.namespace())
			return
		}
		// a fresh context: on SIGINT the command's is cancelled
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := j.delete(dctx, cs); err != nil {
			fmt.Fprintf(progress, "campaign: delete namespace %s: %v\n", j.namespace(), err)
		} else {
			fmt.Fprintf(progress, "campaign: namespace %s deleted\n", j.namespace())
		}
	}()
	fmt.Fprintf(progress, "campaign %s: Job %s/%s, %d shards, %d at once\n", j.ID, j.namespace(), j.name(), f.shards, f.parallelism)
	wctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	last := ""
	for {
		job, err := cs.BatchV1().Jobs(j.namespace()).Get(wctx, j.name(), metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return errInterrupted
			}
			return fmt.Errorf("campaign: %w", err)
		}
		line, finished := jobProgress(job, f.shards)
		if line != last {
			fmt.Fprintf(progress, "campaign %s: %s\n", j.ID, line)
			last = line
		}
		if finished {
			break
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return errInterrupted
			}
			fmt.Fprintf(progress, "campaign %s: not finished after %s; merging what finished\n", j.ID, f.timeout)
		case <-time.After(2 * time.Second):
			continue
		}
		break
	}
	c, err := j.collect(ctx, cs, f.out)
	if ctx.Err() != nil {
		return errInterrupted
	}
	if err != nil {
		keep = true // the pods and their logs are all there is
		return fmt.Errorf("campaign: collect: %w", err)
	}
	for _, e := range c.errs {
		fmt.Fprintf(progress, "campaign %s: %v\n", j.ID, e)
	}
	keep = len(c.unsaved) > 0
	for _, i := range c.missing {
		if _, err := os.Stat(shardSummaryPath(f.out, i)); err == nil {
			fmt.Fprintf(progress, "campaign %s: %s is an earlier campaign's, not this one's: not merged\n", j.ID, shardSummaryPath(f.out, i))
		}
	}
	if len(c.summaries) == 0 {
		return fmt.Errorf("campaign %s: no shard left a summary in its pod's log", j.ID)
	}
	// this campaign's summaries, not every shard-I.json in --out
	return runMerge(cmd, &mergeFlags{json: f.json}, c.summaries)
}

// campaignCommand splits campaign run's arguments after -- into the
// command every shard runs (fuzz unless they start with check or fuzz)
// and its flags. A check campaign's flags are parsed here, so that a
// bad flag, a missing universe or more shards than the universe has
// initial graphs is a usage error before anything is created.
func campaignCommand(args []string, shards int) (string, []string, error) {
	command := "fuzz"
	if len(args) > 0 && (args[0] == "fuzz" || args[0] == "check") {
		command, args = args[0], args[1:]
	}
	for _, a := range args {
		if a == "--shard" || a == "--shards" || strings.HasPrefix(a, "--shard=") || strings.HasPrefix(a, "--shards=") {
			return "", nil, usageErr("%s flags: %s is the campaign's to set (--shards of campaign run)", command, a)
		}
	}
	if command != "check" {
		// a bad flag is a usage error now, not N pods that exit 2
		c, f := fuzzCmdAndFlags()
		if err := c.ParseFlags(args); err != nil {
			return "", nil, usageErr("fuzz flags: %v", err)
		}
		if len(c.Flags().Args()) > 0 {
			return "", nil, usageErr("fuzz flags: %q is not a flag (fuzz takes no arguments)", c.Flags().Args()[0])
		}
		switch {
		case f.target == target.Kubeconfig:
			return "", nil, usageErr("fuzz flags: a campaign's shards fuzz their own in-pod envtest: --target upstream, impl, impl-stepped or upstream-stepped, not kubeconfig")
		case f.failFile != "":
			return "", nil, usageErr("fuzz flags: --failfile replays one run on this machine (cascade fuzz --failfile), not in a campaign's shards")
		}
		if _, _, _, err := f.checkArgs(c.Flags()); err != nil {
			return "", nil, usageErr("fuzz flags: %v", err)
		}
		return command, args, nil
	}
	c := newCheckCmd()
	if err := c.ParseFlags(args); err != nil {
		return "", nil, usageErr("check flags: %v", err)
	}
	universe, _ := c.Flags().GetString("universe")
	if universe == "" {
		return "", nil, usageErr("a check campaign splits a universe's initial graphs: give check --universe NAME")
	}
	u, err := check.UniverseByName(universe)
	if err != nil {
		return "", nil, usageErr("check flags: %v", err)
	}
	if n := len(u.InitialGraphs()); shards > n {
		return "", nil, usageErr("--shards %d: universe %s has %d initial graphs, so at most %d shards", shards, u.Name, n, n)
	}
	return command, args, nil
}
