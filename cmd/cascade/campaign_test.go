package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A campaign split into shards, each a separate process told its index
// by $JOB_COMPLETION_INDEX as an Indexed Job's pod is, merges into the
// report of the unsharded campaign: the same runs, each with the same
// steps, the same totals and verdict, and the command that runs the
// whole campaign again.
func TestCampaignShardsMergeIntoTheUnshardedReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts control planes")
	}
	campaign := append([]string{"fuzz", "--target", "impl-stepped", "--checks", "6", "--steps", "10", "--seed", "11", "--json"}, binDirArgs()...)
	out, code := cascade(t, campaign...)
	if code != 0 {
		t.Fatalf("unsharded campaign: exit %d\n%s", code, out)
	}
	var whole fuzzSummary
	if err := json.Unmarshal([]byte(out), &whole); err != nil {
		t.Fatal(err)
	}

	const shards = 3
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, shards)
	for i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := exec.Command(os.Args[0])
			p.Env = append(os.Environ(), asCascade+"="+strings.Join(append(campaign, "--shards", fmt.Sprint(shards)), " "), fmt.Sprintf("%s=%d", jobCompletionIndex, i))
			b, err := p.Output()
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%d.json", i)), b, 0o644)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
	}

	out, code = cascade(t, "campaign", "merge", dir, "--json")
	if code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, out)
	}
	var merged campaignSummary
	if err := json.Unmarshal([]byte(out), &merged); err != nil {
		t.Fatal(err)
	}
	if len(merged.Shards) != shards || len(merged.MissingShards) != 0 {
		t.Fatalf("merged %d shards, missing %v; want %d, none", len(merged.Shards), merged.MissingShards, shards)
	}
	if len(whole.RunSteps) != 6 || !maps.Equal(merged.RunSteps, whole.RunSteps) {
		t.Errorf("the shards ran %v (run: steps), the unsharded campaign %v", merged.RunSteps, whole.RunSteps)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"result", merged.Result, whole.Result},
		{"runs", merged.Runs, whole.Runs},
		{"runs passed", merged.Passed, whole.Passed},
		{"steps", merged.Steps, whole.Steps},
		{"seed", merged.Seed, whole.Seed},
		{"command to reproduce", merged.Reproduce, whole.Reproduce},
		{"checks", merged.Checks, 6},
	} {
		if c.got != c.want {
			t.Errorf("merged %s %v, unsharded %v", c.what, c.got, c.want)
		}
	}
}

// writeShard writes a shard's summary as `cascade fuzz --shard i/n
// --json` prints it.
func writeShard(t *testing.T, dir string, i, n int, seed uint64, fail *fuzzFailure) {
	t.Helper()
	s := fuzzSummary{summary: summary{Command: "fuzz", Target: "impl-stepped", Result: summaryPass, Seed: seed,
		Reproduce: fmt.Sprintf("cascade fuzz --target impl-stepped --checks 4 --seed %d --shard %d/%d", seed, i, n), KubeVersion: "v1.37.2"},
		Mode: "stepped", Inject: []string{}, Shard: &i, ShardCount: n, Checks: 4, RunNumbers: []int{i + 1, i + 1 + n},
		Runs: 2, Passed: 2, Steps: 10, RunSteps: map[int]int{i + 1: 4, i + 1 + n: 6}, Failure: fail}
	if fail != nil {
		s.Result, s.Passed = summaryFail, 1
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d-%d-%d.json", seed, i, n)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := writeJSON(f, s); err != nil {
		t.Fatal(err)
	}
}

// merge refuses shards of different campaigns and a shard given twice
// (exit 2); a missing shard leaves the campaign without a verdict
// (exit 3); a failing run is reported with its trace and the command
// that runs it alone from its own seed (exit 1).
func TestCampaignMergeVerdicts(t *testing.T) {
	d := t.TempDir()
	writeShard(t, d, 0, 2, 5, nil)
	writeShard(t, d, 1, 2, 6, nil)
	if out, code := cascade(t, "campaign", "merge", d); code != 2 || !strings.Contains(out, "another campaign") {
		t.Errorf("shards of two campaigns: exit %d\n%s", code, out)
	}
	d = t.TempDir()
	writeShard(t, d, 0, 2, 5, nil)
	if out, code := cascade(t, "campaign", "merge", d, d); code != 2 || !strings.Contains(out, "twice") {
		t.Errorf("a shard twice: exit %d\n%s", code, out)
	}
	if out, code := cascade(t, "campaign", "merge", d); code != 3 || !strings.Contains(out, "shard 1/2: MISSING") {
		t.Errorf("a missing shard: exit %d\n%s", code, out)
	}
	writeShard(t, d, 1, 2, 5, &fuzzFailure{Kind: "divergence", Summary: "impl and the model disagree", Run: 4, Seed: 123,
		Trace: "out/fuzz/failure.trace", TraceText: "create cm/a\n", Replay: "cascade replay --target impl-stepped out/fuzz/failure.trace"})
	out, code := cascade(t, "campaign", "merge", d)
	if code != 1 {
		t.Fatalf("a failing shard: exit %d\n%s", code, out)
	}
	for _, want := range []string{"FAILED (divergence) in run 4 (shard 1/2)", "run alone: cascade fuzz --target impl-stepped --checks 1 --seed 123",
		"replay: cascade replay --target impl-stepped out/fuzz/failure.trace", "    create cm/a", "reproduce: cascade fuzz --target impl-stepped --checks 4 --seed 5\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("merged report lacks %q:\n%s", want, out)
		}
	}
	if _, code := cascade(t, "campaign", "merge", filepath.Join(d, "nope.json")); code != 2 {
		t.Errorf("a missing file: exit %d", code)
	}
}

// campaign run --dry-run prints the Namespace and the Indexed Job, each
// pod running the fuzz flags (or, after check, the check flags) as its
// shard, and creates nothing; without --image or --shards, with a
// --shard among the flags, fuzz flags fuzz refuses (or the kubeconfig
// target, which a pod does not have), or a check campaign without a
// universe or with more shards than its initial graphs, it is a usage
// error.
func TestCampaignRunDryRunPrintsTheManifests(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	out, code := cascade(t, "campaign", "run", "--image", "cascade:v1.37.2", "--shards", "4", "--parallelism", "2", "--dry-run", "--", "--target", "upstream", "--checks", "40", "--seed", "7")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"kind: Namespace", "kind: Job", "completionMode: Indexed", "completions: 4", "parallelism: 2", "backoffLimitPerIndex: 1",
		"- --checks\n        - \"40\"", "- --shards\n        - \"4\"", "app.kubernetes.io/managed-by: cascade", "image: cascade:v1.37.2", "memory: " + campaignDefaultMemory} {
		if !strings.Contains(out, want) {
			t.Errorf("manifests lack %q:\n%s", want, out)
		}
	}
	out, code = cascade(t, "campaign", "run", "--image", "cascade:v1.37.2", "--shards", "4", "--dry-run", "--", "check", "--universe", "trio")
	if code != 0 {
		t.Fatalf("check campaign: exit %d\n%s", code, out)
	}
	for _, want := range []string{"kind: Job", "name: check\n", "- /cascade\n        - check\n        - --universe\n        - trio\n        - --shards\n        - \"4\"", "memory: " + campaignCheckMemory, "cpu: \"" + campaignCheckCPU + "\""} {
		if !strings.Contains(out, want) {
			t.Errorf("check campaign manifests lack %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{
		{"--image", "x", "--shards", "2", "--dry-run", "--", "check"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "check", "--universe", "nope"},
		{"--image", "x", "--shards", "14", "--dry-run", "--", "check", "--universe", "relist"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "check", "--universe", "relist", "--shards", "2"},
		{"--shards", "4", "--dry-run"},
		{"--image", "x", "--dry-run"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "--shard", "1/2"},
		{"--image", "x", "--shards", "2", "--cpu", "lots", "--dry-run", "--", "--target", "impl"},
		// a fuzz campaign's flags are checked as fuzz checks them
		{"--image", "x", "--shards", "2", "--dry-run"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "--target", "nope"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "--target", "impl", "--checks", "abc"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "--target", "impl", "--checks", "0"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "--target", "impl", "--inject", "nope"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "--target", "kubeconfig"},
		{"--image", "x", "--shards", "2", "--dry-run", "--", "--target", "impl", "stray"},
	} {
		if out, code := cascade(t, append([]string{"campaign", "run"}, args...)...); code != 2 {
			t.Errorf("campaign run %v: exit %d, want 2\n%s", args, code, out)
		}
	}
}
