package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// A campaign's Namespace and Indexed Job are accepted by a real
// kube-apiserver, by a server-side dry run (which creates nothing) and by
// a real create; with no kubelet no shard finishes, so none is collected;
// the campaign's namespace is deleted at the end, another one never.
func TestCampaignJobOnAnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: *kubeBinDir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	j := campaignJob{ID: "t1", Image: "cascade:test", Shards: 3, Parallelism: 2, BackoffPerIndex: 1,
		CPU: campaignDefaultCPU, Memory: campaignDefaultMemory, Command: "fuzz", Args: []string{"--target", "upstream", "--checks", "9", "--seed", "7"}}

	if err := j.create(ctx, cs, true); err != nil {
		t.Fatalf("server-side dry run: %v", err)
	}
	checkJob := campaignJob{ID: "t2", Image: "cascade:test", Shards: 4, Parallelism: 4, CPU: campaignCheckCPU, Memory: campaignCheckMemory,
		Command: "check", Args: []string{"--universe", "trio"}}
	if err := checkJob.create(ctx, cs, true); err != nil {
		t.Fatalf("server-side dry run of a check campaign: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, j.namespace(), metav1.GetOptions{}); err == nil {
		t.Fatal("the dry run created the namespace")
	}
	if err := j.create(ctx, cs, false); err != nil {
		t.Fatalf("create: %v", err)
	}
	job, err := cs.BatchV1().Jobs(j.namespace()).Get(ctx, "fuzz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := job.Spec.CompletionMode; m == nil || *m != batchv1.IndexedCompletion || *job.Spec.Completions != 3 || *job.Spec.BackoffLimitPerIndex != 1 {
		t.Errorf("stored Job spec: completionMode %v, completions %d, backoffLimitPerIndex %d", m, *job.Spec.Completions, *job.Spec.BackoffLimitPerIndex)
	}
	if job.Labels[campaignLabel] != "t1" || job.Spec.Template.Labels[campaignManagedBy] != "cascade" {
		t.Errorf("Job labels %v, pod template labels %v", job.Labels, job.Spec.Template.Labels)
	}
	line, finished := jobProgress(job, 3)
	if finished {
		t.Errorf("a Job no pod ran reads as finished: %s", line)
	}

	dir := t.TempDir()
	c, err := j.collect(ctx, cs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.missing) != 3 || len(c.unsaved) != 0 {
		t.Errorf("collected a shard no pod ran: missing %v, unsaved %v", c.missing, c.unsaved)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Errorf("collect wrote %v", m)
	}

	// A finished shard's pod: its log is written whole, and the summary
	// in it, if any. The API server serves an empty log for a pod no
	// kubelet ran: shard 1 is missing, and its log is there to say why.
	// A pod whose log the API server refuses (here: it has no container
	// named shard, a 400, not asked again) is unsaved, so campaign run
	// keeps the namespace rather than delete what the pod logged.
	finishedPod := func(index string, containers ...string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fuzz-" + index + "-abcde", Namespace: j.namespace(),
			Labels: map[string]string{campaignLabel: j.ID, batchv1.JobCompletionIndexAnnotation: index}}}
		for _, c := range containers {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: j.Image})
		}
		pod, err := cs.CoreV1().Pods(j.namespace()).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodSucceeded
		if _, err := cs.CoreV1().Pods(j.namespace()).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	finishedPod("1", campaignContainer, "sidecar") // the shard's log, though a sidecar was injected
	refused := finishedPod("2", "other")
	c, err = j.collect(ctx, cs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.unsaved, []string{refused.Name}) || !slices.Equal(c.missing, []int{0, 1, 2}) || len(c.summaries) != 0 || len(c.errs) != 1 ||
		!strings.Contains(c.errs[0].Error(), "shard 2 (pod fuzz-2-abcde): its log could not be read") {
		t.Errorf("unsaved %v, missing %v, errs %v", c.unsaved, c.missing, c.errs)
	}
	if b, err := os.ReadFile(shardLogPath(dir, 1)); err != nil || len(b) != 0 {
		t.Errorf("shard 1's log: %q, %v", b, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "shard-*")); len(m) != 1 {
		t.Errorf("collect wrote %v", m)
	}

	other := campaignJob{ID: "other"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other.namespace()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := other.delete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if ns, err := cs.CoreV1().Namespaces().Get(ctx, other.namespace(), metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("deleted a namespace the campaign did not label: %v", err)
	}
	if err := j.delete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, j.namespace(), metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Error("the campaign's namespace is not being deleted")
	}
}

// A shard's summary is found in its pod's log, where the container's
// stderr progress lines and stdout's JSON are interleaved.
func TestExtractSummaryFromAPodLog(t *testing.T) {
	log := "fuzz impl-stepped: release v1.37.2\nrun 2/8: 29 steps agree with the model\n{\n  \"command\": \"fuzz\",\n  \"failure\": null\n}\nimpl-stepped: stopped\n"
	got, err := extractSummary([]byte(log))
	if err != nil || string(got) != "{\n  \"command\": \"fuzz\",\n  \"failure\": null\n}" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := extractSummary([]byte("run 1/8: 3 steps\n")); err == nil {
		t.Error("found a summary in a log without one")
	}
}

// countIndexes reads a Job's completedIndexes and failedIndexes lists.
func TestCountIndexes(t *testing.T) {
	for s, want := range map[string]int{"": 0, "3": 1, "1,3-5,7": 5} {
		if got := countIndexes(s); got != want {
			t.Errorf("countIndexes(%q) = %d, want %d", s, got, want)
		}
	}
}
