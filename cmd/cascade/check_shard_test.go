package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkShards runs the n shards of a universe's check, shard 0 told its
// index by $JOB_COMPLETION_INDEX as an Indexed Job's pod is, the others
// by --shard i/n, and writes their --json summaries to a new directory;
// it returns the directory and the summaries.
func checkShards(t *testing.T, n int, args ...string) (string, []checkSummary) {
	t.Helper()
	dir := t.TempDir()
	var out []checkSummary
	for i := range n {
		a := append([]string{"check", "--json", "-q", "--out", filepath.Join(dir, "traces")}, args...)
		if i == 0 {
			t.Setenv(jobCompletionIndex, "0")
			a = append(a, "--shards", fmt.Sprint(n))
		} else {
			a = append(a, "--shard", fmt.Sprintf("%d/%d", i, n))
		}
		text, code := cascade(t, a...)
		var s checkSummary
		if err := json.NewDecoder(strings.NewReader(text)).Decode(&s); err != nil || (code != 0 && code != 1) {
			t.Fatalf("shard %d/%d: exit %d, %v\n%s", i, n, code, err, text)
		}
		if s.Result == summaryFail && code != 1 || s.Result == summaryPass && code != 0 {
			t.Errorf("shard %d/%d: result %s, exit %d", i, n, s.Result, code)
		}
		b, _ := json.Marshal(s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%d.json", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return dir, out
}

// A universe's check split into shards by initial graph merges into the
// unsharded check's findings: the shards' graphs are a disjoint
// partition of the universe's, together they find exactly the unsharded
// run's violation classes, each with a counterexample as short (here,
// where no two graphs tie, the same trace from the same graph), and the
// same verdict and exit code; their distinct states sum to at least the
// unsharded run's. In upstream mode (every class known, exit 0) and with
// a bug (unclassified classes, exit 1).
func TestCheckShardsMergeIntoTheUnshardedClasses(t *testing.T) {
	for _, c := range []struct {
		args   []string
		shards int
		code   int
	}{
		{[]string{"--universe", "scopes"}, 4, 0},
		{[]string{"--universe", "pair", "--bug", "no-cycle-unblock"}, 3, 1},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			text, code := cascade(t, append([]string{"check", "--json", "-q", "--out", t.TempDir()}, c.args...)...)
			var whole checkSummary
			if err := json.NewDecoder(strings.NewReader(text)).Decode(&whole); err != nil || code != c.code || len(whole.Classes) == 0 {
				t.Fatalf("unsharded: exit %d (want %d), %d classes, %v\n%s", code, c.code, len(whole.Classes), err, text)
			}
			dir, shards := checkShards(t, c.shards, c.args...)
			var graphs []int
			for i, s := range shards {
				if *s.Shard != i || s.ShardCount != c.shards || s.Graphs != whole.Roots {
					t.Errorf("shard %d: names shard %d/%d of %d graphs; want %d/%d of %d", i, *s.Shard, s.ShardCount, s.Graphs, i, c.shards, whole.Roots)
				}
				graphs = append(graphs, s.GraphIndexes...)
				for _, v := range s.Classes {
					if v.TraceText == "" || v.RootIndex == nil || (*v.RootIndex-i)%c.shards != 0 {
						t.Errorf("shard %d: class %s has no trace text or starts outside its graphs (%v)", i, v.Class, v.RootIndex)
					}
				}
			}
			slices.Sort(graphs)
			if len(graphs) != whole.Roots || slices.Compact(slices.Clone(graphs))[len(graphs)-1] != whole.Roots-1 || graphs[0] != 0 {
				t.Errorf("the shards' initial graphs are not 0..%d each once: %v", whole.Roots-1, graphs)
			}

			text, code = cascade(t, "campaign", "merge", dir, "--json")
			var merged checkCampaign
			if err := json.NewDecoder(strings.NewReader(text)).Decode(&merged); err != nil || code != c.code {
				t.Fatalf("merge: exit %d (want %d), %v\n%s", code, c.code, err, text)
			}
			if merged.Result != whole.Result || merged.InitialGraphs != whole.Roots || merged.Distinct < whole.Distinct || len(merged.Shards) != c.shards {
				t.Errorf("merged: %s, %d graphs, %d distinct states in %d shards; unsharded %s, %d graphs, %d distinct states",
					merged.Result, merged.InitialGraphs, merged.Distinct, len(merged.Shards), whole.Result, whole.Roots, whole.Distinct)
			}
			if merged.Reproduce != whole.Reproduce {
				t.Errorf("merged command to reproduce %q, want the unsharded run's %q", merged.Reproduce, whole.Reproduce)
			}
			if len(merged.Classes) != len(whole.Classes) {
				t.Fatalf("merged %d classes, unsharded %d", len(merged.Classes), len(whole.Classes))
			}
			for k, w := range whole.Classes {
				m := merged.Classes[k]
				if m.Class != w.Class || !slices.Equal(m.Steps, w.Steps) || m.Root != w.Root || *m.RootIndex != *w.RootIndex {
					t.Errorf("class %d: merged %s, %d steps from graph %d (%s); unsharded %s, %d steps from graph %d (%s)",
						k, m.Class, len(m.Steps), *m.RootIndex, m.Root, w.Class, len(w.Steps), *w.RootIndex, w.Root)
				}
				if !strings.HasSuffix(m.Rerun, fmt.Sprintf(" --shard %d/%d", m.Shard, c.shards)) {
					t.Errorf("class %s: rerun command %q does not name its shard %d", m.Class, m.Rerun, m.Shard)
				}
			}
			t.Logf("%d shards: %d distinct states, unsharded %d (overlap %d)", c.shards, merged.Distinct, whole.Distinct, merged.Distinct-whole.Distinct)
		})
	}
}

// Bad shard values are usage errors (exit 2) in one line naming what is
// wrong, before any search.
func TestCheckShardUsageErrors(t *testing.T) {
	t.Setenv(jobCompletionIndex, "9")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--universe", "trio", "--shard", "4/4"}, "--shard 4/4: want i/n with 0 <= i < n"},
		{[]string{"--universe", "trio", "--shard", "two"}, `--shard "two": want i/n`},
		{[]string{"--universe", "trio", "--shards", "-1"}, "--shards -1: want a positive number of shards"},
		{[]string{"--universe", "trio", "--shards", "4"}, `$JOB_COMPLETION_INDEX="9": want a shard index from 0 to 3 (--shards 4)`},
		{[]string{"--universe", "trio", "--shard", "1/3", "--shards", "4"}, "disagree on the number of shards"},
		{[]string{"--preset", "relist", "--shard", "0/2"}, "--shard and --shards split a universe's initial graphs: give --universe NAME"},
		{[]string{"--universe", "relist", "--shard", "0/14"}, "it has 13 initial graphs, so at most 13 shards"},
	} {
		out, code := cascade(t, append([]string{"check", "-q", "--out", t.TempDir()}, c.args...)...)
		if code != 2 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("check %v: exit %d, want 2 and one line naming %q:\n%s", c.args, code, c.want, out)
		}
	}
}

// merge refuses check shards of different campaigns, a shard twice, a
// shard whose graphs are not its slice's and a mix of check and fuzz
// shards (exit 2); an op is vacuous only when no shard reached it
// (exit 1); a missing shard leaves the campaign without a verdict
// (exit 3).
func TestCampaignMergeCheckShards(t *testing.T) {
	dir, shards := checkShards(t, 2, "--universe", "relist")
	if out, code := cascade(t, "campaign", "merge", dir); code != 0 || !strings.Contains(out, "campaign of universe relist (mode upstream) in 2 shards: 13 initial graphs") {
		t.Fatalf("merge of relist's 2 shards: exit %d\n%s", code, out)
	}
	write := func(d, name string, s checkSummary) {
		b, _ := json.Marshal(s)
		if err := os.WriteFile(filepath.Join(d, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what   string
		change func(s *checkSummary)
		want   string
	}{
		{"another mode", func(s *checkSummary) { s.Mode = "no-cycle-unblock" }, "another campaign"},
		{"another shard count", func(s *checkSummary) { s.ShardCount = 3 }, "another campaign"},
		{"the other shard's graphs", func(s *checkSummary) { s.GraphIndexes = shards[0].GraphIndexes }, "initial graphs are not graphs 1, 3, 5, ... of the universe's 13"},
		{"shard 0 twice", func(s *checkSummary) { *s = shards[0] }, "shard 0/2 twice"},
		{"not a shard", func(s *checkSummary) { s.Shard = nil }, "not a shard's summary"},
		{"a fuzz shard", func(s *checkSummary) { s.Command = "fuzz" }, "is a fuzz summary"},
	} {
		d := t.TempDir()
		write(d, "0.json", shards[0])
		s := shards[1]
		i := *s.Shard
		s.Shard = &i
		c.change(&s)
		write(d, "1.json", s)
		if out, code := cascade(t, "campaign", "merge", d); code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want 2 naming %q\n%s", c.what, code, c.want, out)
		}
	}
	// an op one shard never reached is no finding; one no shard reached
	// makes the campaign vacuous
	for _, c := range []struct {
		never0, never1 []string
		code           int
		want           string
	}{
		{[]string{"delete secret/s"}, nil, 0, "PASS"},
		{[]string{"delete secret/s", "delete cm/a"}, []string{"delete cm/a"}, 1, `VACUOUS: op "delete cm/a" never reached an object`},
	} {
		d := t.TempDir()
		s0, s1 := shards[0], shards[1]
		s0.NeverReached, s1.NeverReached = c.never0, c.never1
		write(d, "0.json", s0)
		write(d, "1.json", s1)
		if out, code := cascade(t, "campaign", "merge", d); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("never reached %v and %v: exit %d, want %d naming %q\n%s", c.never0, c.never1, code, c.code, c.want, out)
		}
	}
	d := t.TempDir()
	write(d, "1.json", shards[1])
	out, code := cascade(t, "campaign", "merge", d, "--json")
	var m checkCampaign
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&m); err != nil || code != 3 || m.Result != summaryInconclusive || !slices.Equal(m.MissingShards, []int{0}) {
		t.Errorf("a missing shard: exit %d, %v\n%s", code, err, out)
	}
}
