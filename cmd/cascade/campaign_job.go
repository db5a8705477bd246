package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

// Labels on everything a campaign creates.
const (
	campaignManagedBy = "app.kubernetes.io/managed-by"
	campaignLabel     = "cascade.dev/campaign"
	// campaignKubeAssets is where the image holds the control-plane
	// binaries (make image), the pod's $KUBEBUILDER_ASSETS.
	campaignKubeAssets = "/kube"
	campaignBinary     = "/cascade"
	// campaignContainer is the shard pod's container, whose log collect
	// reads
	campaignContainer = "shard"
)

// campaignJob is a campaign as an Indexed Job: one pod per shard, each
// running `cascade fuzz ... --shards N --json` against its own in-pod
// envtest, or `cascade check --universe NAME ... --shards N --json` on
// its slice of the universe's initial graphs.
type campaignJob struct {
	// ID names the campaign: namespace cascade-campaign-ID, Job named
	// after Command.
	ID              string
	Image           string
	Shards          int
	Parallelism     int
	BackoffPerIndex int32
	// CPU and Memory are each pod's requests (and Memory its limit).
	CPU, Memory string
	// Command is what every shard runs, fuzz or check, with Args.
	Command string
	Args    []string
}

func (j campaignJob) namespace() string { return "cascade-campaign-" + j.ID }

// name is the Job's: its command.
func (j campaignJob) name() string { return j.Command }

func (j campaignJob) labels() map[string]string {
	return map[string]string{campaignManagedBy: "cascade", campaignLabel: j.ID}
}

// manifests are the campaign's Namespace and Job.
func (j campaignJob) manifests() (*corev1.Namespace, *batchv1.Job, error) {
	cpu, err := resource.ParseQuantity(j.CPU)
	if err != nil {
		return nil, nil, usageErr("--cpu %q: %v", j.CPU, err)
	}
	mem, err := resource.ParseQuantity(j.Memory)
	if err != nil {
		return nil, nil, usageErr("--memory %q: %v", j.Memory, err)
	}
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: j.namespace(), Labels: j.labels()}}
	indexed := batchv1.IndexedCompletion
	n, p := int32(j.Shards), int32(j.Parallelism)
	backoff := j.BackoffPerIndex
	// a failed index is a shard that failed to run (exit 1, a failing
	// run, is a result: the pod's log holds its summary), so every index
	// may fail without ending the others
	maxFailed := n
	cmd := append([]string{campaignBinary, j.Command}, j.Args...)
	cmd = append(cmd, "--shards", strconv.Itoa(j.Shards), "--json", "--out", "/tmp/out")
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: j.name(), Namespace: j.namespace(), Labels: j.labels()},
		Spec: batchv1.JobSpec{
			CompletionMode: &indexed, Completions: &n, Parallelism: &p,
			BackoffLimitPerIndex: &backoff, MaxFailedIndexes: &maxFailed,
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				// exit 1 and 3: the shard ran and its summary says what it
				// found (a failing run, or a check's unclassified class);
				// no retry
				Action: batchv1.PodFailurePolicyActionFailIndex,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1, 3}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: j.labels()},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: campaignContainer, Image: j.Image, Command: cmd,
						Env: []corev1.EnvVar{{Name: "KUBEBUILDER_ASSETS", Value: campaignKubeAssets}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: mem},
						},
					}},
				},
			},
		},
	}
	return ns, job, nil
}

// printManifests writes the campaign's manifests as YAML documents.
func (j campaignJob) printManifests(w io.Writer) error {
	ns, job, err := j.manifests()
	if err != nil {
		return err
	}
	for i, o := range []any{ns, job} {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// create creates the campaign's Namespace and Job (server-side dry run
// only, with dryRun).
func (j campaignJob) create(ctx context.Context, cs kubernetes.Interface, dryRun bool) error {
	ns, job, err := j.manifests()
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, opts); err != nil {
		return fmt.Errorf("campaign: namespace %s: %w", ns.Name, err)
	}
	if dryRun {
		// the Job's namespace does not exist on a dry run: the server
		// checks the Job in the default namespace instead
		job = job.DeepCopy()
		job.Namespace = metav1.NamespaceDefault
	}
	if _, err := cs.BatchV1().Jobs(job.Namespace).Create(ctx, job, opts); err != nil {
		return fmt.Errorf("campaign: job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// delete removes the campaign's namespace, and with it all it holds,
// if it is the campaign's (labelled so).
func (j campaignJob) delete(ctx context.Context, cs kubernetes.Interface) error {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, j.namespace(), metav1.GetOptions{})
	if err != nil || ns.Labels[campaignLabel] != j.ID {
		return err // not there, or not cascade's: left alone
	}
	bg := metav1.DeletePropagationBackground
	return cs.CoreV1().Namespaces().Delete(ctx, j.namespace(), metav1.DeleteOptions{PropagationPolicy: &bg,
		Preconditions: &metav1.Preconditions{UID: &ns.UID}})
}

// extractSummary is the --json summary in a shard pod's log: the pod's
// log interleaves stderr's progress lines with stdout, and the summary
// is the last block from a line "{" to a line "}".
func extractSummary(log []byte) ([]byte, error) {
	lines := bytes.Split(log, []byte("\n"))
	end := -1
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimRight(lines[i], "\r")
		if end < 0 && string(l) == "}" {
			end = i
		}
		if end >= 0 && string(l) == "{" {
			return bytes.Join(lines[i:end+1], []byte("\n")), nil
		}
	}
	return nil, errors.New("no JSON summary in the log")
}

// shardSummaryPath is where collect writes shard i's summary in dir.
func shardSummaryPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("shard-%d.json", i))
}

// shardLogPath is where collect writes the whole log of shard i's pod:
// the progress lines, and the only account of a shard that left no
// summary (one that crashed, or ran out of memory).
func shardLogPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("shard-%d.log", i))
}

// shardFiles lists the files collect may write: campaign run checks them
// (artifact.Check) before it creates anything.
func (j campaignJob) shardFiles(dir string) []string {
	paths := make([]string, 0, 2*j.Shards)
	for i := range j.Shards {
		paths = append(paths, shardSummaryPath(dir, i), shardLogPath(dir, i))
	}
	return paths
}

// collected is what collect made of the campaign's finished pods.
type collected struct {
	// summaries are the shard summaries collect wrote, the campaign's to
	// merge (a shard-I.json an earlier campaign left in dir is not);
	// missing lists the shards it wrote none for.
	summaries []string
	missing   []int
	// unsaved names the finished pods whose log collect could not read
	// or write to dir: deleting the namespace would lose their work, so
	// campaign run keeps it.
	unsaved []string
	// errs says why, one per unsaved pod.
	errs []error
}

// logReads is how many times collect asks the API server for the pods
// or a pod's log before it gives up, logRetry the pause between.
const (
	logReads = 3
	logRetry = time.Second
)

// retryRead calls read until it succeeds, logReads times at most, and
// not again after an answer that another try would not change (a 4xx
// other than 429) or once ctx is done.
func retryRead(ctx context.Context, read func() error) error {
	for try := 1; ; try++ {
		err := read()
		var status apierrors.APIStatus
		final := errors.As(err, &status) && status.Status().Code >= 400 && status.Status().Code < 500 && status.Status().Code != 429
		if err == nil || final || try == logReads || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(logRetry):
		}
	}
}

// collect writes each finished shard's pod log to dir/shard-I.log and
// the summary in it to dir/shard-I.json. A shard retried after a failed
// pod has several pods: the succeeded one, else the newest, is read. A
// pod whose log it cannot read (after logReads tries) or write does not
// stop the others; the error is only that of listing the pods.
func (j campaignJob) collect(ctx context.Context, cs kubernetes.Interface, dir string) (*collected, error) {
	var pods *corev1.PodList
	err := retryRead(ctx, func() (err error) {
		pods, err = cs.CoreV1().Pods(j.namespace()).List(ctx, metav1.ListOptions{LabelSelector: campaignLabel + "=" + j.ID})
		return err
	})
	if err != nil {
		return nil, err
	}
	shardPods := map[int]*corev1.Pod{}
	for k := range pods.Items {
		p := &pods.Items[k]
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			continue
		}
		i, err := strconv.Atoi(p.Labels[batchv1.JobCompletionIndexAnnotation])
		if err != nil || i < 0 || i >= j.Shards {
			continue
		}
		if q := shardPods[i]; q == nil || preferPod(p, q) {
			shardPods[i] = p
		}
	}
	c := &collected{}
	for i := range j.Shards {
		p := shardPods[i]
		if p == nil {
			c.missing = append(c.missing, i)
			continue
		}
		saved, err := saveShard(ctx, cs, p, dir, i)
		if err != nil {
			c.unsaved = append(c.unsaved, p.Name)
			c.errs = append(c.errs, fmt.Errorf("shard %d (pod %s): %w", i, p.Name, err))
		}
		if saved {
			c.summaries = append(c.summaries, shardSummaryPath(dir, i))
		} else {
			c.missing = append(c.missing, i)
		}
	}
	return c, nil
}

// preferPod reports whether p's log should be read for its shard rather
// than q's: a succeeded pod before a failed one, then the newer.
func preferPod(p, q *corev1.Pod) bool {
	if (p.Status.Phase == corev1.PodSucceeded) != (q.Status.Phase == corev1.PodSucceeded) {
		return p.Status.Phase == corev1.PodSucceeded
	}
	return q.CreationTimestamp.Before(&p.CreationTimestamp)
}

// saveShard writes pod p's log and the summary in it as shard i's files;
// saved reports whether the summary was written. A log without a summary
// is written all the same and is no error: the shard is missing, and
// its log says why.
func saveShard(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, dir string, i int) (saved bool, err error) {
	var log []byte
	err = retryRead(ctx, func() (err error) {
		// the shard's container by name: a cluster may inject sidecars
		log, err = cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: campaignContainer}).DoRaw(ctx)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("its log could not be read: %w", err)
	}
	if err := artifact.WriteFile(shardLogPath(dir, i), log); err != nil {
		return false, err
	}
	sum, err := extractSummary(log)
	if err != nil {
		return false, nil
	}
	if err := artifact.WriteFile(shardSummaryPath(dir, i), sum); err != nil {
		return false, err
	}
	return true, nil
}

// jobProgress is a line on the Job's shards: done, failed, running.
func jobProgress(job *batchv1.Job, shards int) (line string, finished bool) {
	st := job.Status
	failed := 0
	if st.FailedIndexes != nil && *st.FailedIndexes != "" {
		failed = countIndexes(*st.FailedIndexes)
	}
	done := countIndexes(st.CompletedIndexes)
	line = fmt.Sprintf("shards: %d done, %d failed, %d running of %d", done, failed, st.Active, shards)
	for _, c := range st.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			finished = true
		}
	}
	return line, finished || done+failed == shards
}

// countIndexes counts the indexes of a Job's "1,3-5" list.
func countIndexes(s string) int {
	n := 0
	for _, r := range strings.Split(s, ",") {
		if r == "" {
			continue
		}
		a, b, ok := strings.Cut(r, "-")
		x, _ := strconv.Atoi(a)
		y := x
		if ok {
			y, _ = strconv.Atoi(b)
		}
		n += y - x + 1
	}
	return n
}
