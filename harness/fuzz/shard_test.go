package fuzz

import (
	"flag"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// draws runs a campaign of checks runs from seed under runRapid (sharded
// as sh) and returns the first number each run drew, by campaign run
// number (from 1), and the run numbers the report names.
func draws(t *testing.T, checks int, seed uint64, sh Shard) map[int]uint64 {
	t.Helper()
	got := map[int]uint64{}
	var started []int
	cfg := Config{Checks: checks, Steps: 1, Seed: seed, Shard: sh}
	cfg.onRun = func(k int) { started = append(started, k+1) }
	n := 0
	_, err := runRapid("shard-test", cfg, func(rt *rapid.T) {
		n++
		got[cfg.runNo(n)] = rapid.Uint64().Draw(rt, "x")
	})
	if err != nil {
		t.Fatal(err)
	}
	if sh.Count > 0 {
		want := []int{}
		for _, k := range sh.Runs(checks) {
			want = append(want, k+1)
		}
		if !slices.Equal(started, want) {
			t.Fatalf("shard %s started runs %v, want %v", sh, started, want)
		}
	}
	return got
}

// The shards of a campaign run exactly its runs, each from the seed
// rapid's own loop gives it: run k of shard i/n draws what the k-th check
// of the unsharded campaign draws, and no run is in two shards.
func TestShardsUnionIsTheUnshardedCampaign(t *testing.T) {
	const checks, seed = 23, 20261126
	// rapid runs a fifth of its checks under -short; the CLI never runs
	// under it
	if testing.Short() {
		if err := flag.Set("test.short", "false"); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = flag.Set("test.short", "true") }()
	}
	whole := draws(t, checks, seed, Shard{})
	if len(whole) != checks {
		t.Fatalf("unsharded campaign ran %d runs, want %d", len(whole), checks)
	}
	for _, n := range []int{1, 4, 7} {
		union := map[int]uint64{}
		for i := range n {
			for run, x := range draws(t, checks, seed, Shard{Index: i, Count: n}) {
				if _, dup := union[run]; dup {
					t.Fatalf("%d shards: run %d in two shards", n, run)
				}
				union[run] = x
			}
		}
		if len(union) != checks {
			t.Fatalf("%d shards ran %d runs, want %d", n, len(union), checks)
		}
		for run, x := range whole {
			if union[run] != x {
				t.Errorf("%d shards: run %d drew %d, the unsharded campaign %d", n, run, union[run], x)
			}
		}
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string]Shard{"0/1": {0, 1}, "3/8": {3, 8}} {
		if got, err := ParseShard(in); err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "3", "8/8", "-1/4", "1/0", "a/b", "1/4/5"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
}

// A failure's seed is rapid's when it reported the failure of an
// unsharded campaign, else its run's own (RunSeed): a sharded campaign's,
// or one rapid did not report (a held run, or one interrupted while
// shrinking); a replayed fail file's failure has none.
func TestFailingRunSeed(t *testing.T) {
	whole := Config{Checks: 20, Seed: 7}
	if s, ok := whole.failingRunSeed(8, rapidOutcome{}); !ok || s != RunSeed(7, 7) {
		t.Errorf("run 8 of an unsharded campaign: seed %d, %v; want %d", s, ok, RunSeed(7, 7))
	}
	shard := Config{Checks: 20, Seed: 7, Shard: Shard{Index: 1, Count: 4}}
	k := shard.Shard.Runs(20)[2] // the shard's third run, the campaign's run k+1
	if s, ok := shard.failingRunSeed(3, rapidOutcome{seed: 99}); !ok || s != RunSeed(7, k) {
		t.Errorf("the shard's run 3 (campaign run %d): seed %d, %v; want %d", k+1, s, ok, RunSeed(7, k))
	}
	if s, ok := whole.failingRunSeed(8, rapidOutcome{seed: 99}); !ok || s != 99 {
		t.Errorf("rapid reported seed 99 for an unsharded campaign: got %d, %v", s, ok)
	}
	if _, ok := whole.failingRunSeed(0, rapidOutcome{}); ok {
		t.Error("a seed for no failing run")
	}
	replay := Config{Checks: 20, Seed: 7, FailFile: "x.fail"}
	if _, ok := replay.failingRunSeed(1, rapidOutcome{}); ok {
		t.Error("a seed for a replayed fail file's failure")
	}
}
