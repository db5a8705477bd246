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
