package fuzz

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is the Index-th of Count disjoint slices of a campaign's runs
// (Count 0: the whole campaign, run by rapid's own loop). A campaign of
// Config.Checks runs numbers them 0 to Checks-1; run k draws from
// RunSeed(Config.Seed, k), the seed rapid's own loop gives its k-th check,
// so that the shards together run exactly the runs of the unsharded
// campaign, and any one of them runs alone again from its seed.
type Shard struct {
	Index, Count int
}

// ParseShard parses "i/n" (0 <= i < n).
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard %q: want i/n, the i-th of n shards counting from 0 (for example 3/8)", s)
	}
	sh := Shard{Index: i, Count: n}
	if sh.Count == 0 || sh.Validate() != nil {
		return Shard{}, fmt.Errorf("--shard %s: want i/n with 0 <= i < n", s)
	}
	return sh, nil
}

// Validate reports a shard that names no slice.
func (s Shard) Validate() error {
	if s.Count < 0 || (s.Count > 0 && (s.Index < 0 || s.Index >= s.Count)) || (s.Count == 0 && s.Index != 0) {
		return fmt.Errorf("shard %d/%d: want 0 <= i < n", s.Index, s.Count)
	}
	return nil
}

// String is "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Runs are the campaign runs (from 0) of a campaign of checks runs that
// the shard runs: every Count-th from Index, so that the shards' sizes
// differ by one at most and each shard has early and late runs alike.
// Without a Count, every run.
func (s Shard) Runs(checks int) []int {
	step, first := s.Count, s.Index
	if step == 0 {
		step, first = 1, 0
	}
	var out []int
	for k := first; k < checks; k += step {
		out = append(out, k)
	}
	return out
}

// RunSeed is the seed of a campaign's run k (from 0): rapid's own loop
// (findBug) adds the check's number to the seed before each check, so
// its k-th check draws from base + k(k+1)/2.
func RunSeed(base uint64, k int) uint64 {
	return base + uint64(k)*uint64(k+1)/2
}

// runNo is the campaign number (from 1) of the shard's n-th run (from
// 1); n itself when the campaign is not sharded or n is past the shard's
// runs (shrinking's reruns).
func (cfg Config) runNo(n int) int {
	if cfg.Shard.Count == 0 {
		return n
	}
	runs := cfg.Shard.Runs(cfg.Checks)
	if n < 1 || n > len(runs) {
		return n
	}
	return runs[n-1] + 1
}

// failingRunSeed is the seed from which a campaign fails in its first
// run: rapid's, when it reported the failure of an unsharded campaign;
// else that of the failing run foundRun (in the campaign's own count;
// 0: none), as when rapid reported no failure (a held run, or one
// interrupted while shrinking). A replayed fail file's failure has none
// (ok false).
func (cfg Config) failingRunSeed(foundRun int, out rapidOutcome) (seed uint64, ok bool) {
	switch {
	case foundRun <= 0 || cfg.FailFile != "":
		return 0, false
	case cfg.Shard.Count == 0 && out.seed != 0:
		// rapid's own: the run that failed as reported (a held run's
		// reproducer, when one followed it)
		return out.seed, true
	}
	return RunSeed(cfg.Seed, cfg.runNo(foundRun)-1), true
}
