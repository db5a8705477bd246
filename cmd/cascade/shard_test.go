package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/harness/fuzz"
)

// A pod of an Indexed Job runs the shard its $JOB_COMPLETION_INDEX names;
// --shard names one explicitly and wins; bad values are usage errors
// (exit 2) naming what is wrong.
func TestShardFlags(t *testing.T) {
	t.Setenv(jobCompletionIndex, "2")
	for _, c := range []struct {
		shard  string
		shards int
		want   fuzz.Shard
	}{{"", 0, fuzz.Shard{}}, {"", 4, fuzz.Shard{Index: 2, Count: 4}}, {"1/3", 0, fuzz.Shard{Index: 1, Count: 3}}, {"1/4", 4, fuzz.Shard{Index: 1, Count: 4}}} {
		got, err := parseShardFlags(c.shard, c.shards)
		if err != nil || got != c.want {
			t.Errorf("--shard %q --shards %d: %v, %v; want %v", c.shard, c.shards, got, err, c.want)
		}
	}
	for _, c := range []struct {
		shard  string
		shards int
		env    string
		want   string
	}{
		{"4/4", 0, "", "--shard 4/4"},
		{"x", 0, "", `--shard "x"`},
		{"1/3", 4, "", "disagree"},
		{"", -1, "", "--shards -1"},
		{"", 2, "2", "JOB_COMPLETION_INDEX=\"2\""},
		{"", 2, "one", "JOB_COMPLETION_INDEX=\"one\""},
	} {
		t.Setenv(jobCompletionIndex, c.env)
		_, err := parseShardFlags(c.shard, c.shards)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--shard %q --shards %d with $%s=%q: %v; want a one-line usage error naming %s", c.shard, c.shards, jobCompletionIndex, c.env, err, c.want)
		}
	}
}

// A shard's command to reproduce names its index, so that it runs again
// where no Job sets $JOB_COMPLETION_INDEX.
func TestShardReproduceNamesTheIndex(t *testing.T) {
	if got := shardReproduce("cascade fuzz --seed 3", fuzz.Shard{Index: 2, Count: 4}); got != "cascade fuzz --seed 3 --shard 2/4" {
		t.Errorf("got %q", got)
	}
}
