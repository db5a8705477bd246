package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cascade-k8s/cascade/model/check"
)

// checkShardResult is a shard's `cascade check --universe --shard --json`
// summary and the file it came from.
type checkShardResult struct {
	checkSummary
	file string
}

// checkCampaignClass is a violation class's shortest counterexample over
// the shards, with the shard that found it.
type checkCampaignClass struct {
	Shard int `json:"shard"`
	checkViolation
	// Rerun is the shard's command: it finds the class again, alone, and
	// writes its trace to its --out.
	Rerun string `json:"rerun_command"`
}

// checkCampaignShard is a shard's line in the merged report.
type checkCampaignShard struct {
	Shard         int     `json:"shard"`
	File          string  `json:"file"`
	Result        string  `json:"result"`
	Seconds       float64 `json:"seconds"`
	InitialGraphs int     `json:"initial_graphs"`
	Roots         int     `json:"initial_states"`
	Distinct      int64   `json:"distinct_states"`
	Generated     int64   `json:"transitions"`
	Depth         int     `json:"depth"`
	Complete      bool    `json:"complete"`
	Classes       int     `json:"classes"`
	Reproduce     string  `json:"command_to_reproduce"`
}

// checkCampaign is `cascade campaign merge --json` of a universe's
// shards: the unsharded search's fields where the shards add up to them
// (initial states, distinct states and transitions are the shards' sums,
// at least the unsharded search's: a state reached from graphs of two
// shards counts in both; depth is the deepest shard's), then the shards'.
type checkCampaign struct {
	summary
	Scope         string               `json:"scope"`
	Mode          string               `json:"mode"`
	Reduction     string               `json:"reduction"`
	ShardCount    int                  `json:"shard_count"`
	InitialGraphs int                  `json:"initial_graphs"`
	Roots         int                  `json:"initial_states"`
	Distinct      int64                `json:"distinct_states"`
	Generated     int64                `json:"transitions"`
	Depth         int                  `json:"depth"`
	Complete      bool                 `json:"complete"`
	Classes       []checkCampaignClass `json:"classes"`
	Witnessed     []string             `json:"witnessed"`
	Vacuous       []string             `json:"vacuous"`
	VacuousScope  string               `json:"vacuous_scope,omitempty"`
	NeverReached  []string             `json:"never_reached"`
	Shards        []checkCampaignShard `json:"shards"`
	MissingShards []int                `json:"missing_shards"`
	MergeSeconds  float64              `json:"merge_seconds"`
}

// checkCampaignKey is what every shard of one universe's campaign has
// alike.
func checkCampaignKey(s checkSummary) string {
	return fmt.Sprintf("scope %s, mode %s, release %q, reduction %s, %d shards of %d initial graphs", s.Scope, s.Mode, s.judged(), s.Reduction, s.ShardCount, s.Graphs)
}

// mergeCheckShards merges one universe's shard summaries: every class
// any shard found, each with the shortest counterexample over the shards
// (ties: the lowest initial graph, as the unsharded search's order has
// it); ops never reached and expectations never witnessed by any shard.
func mergeCheckShards(files []shardFile) (*checkCampaign, error) {
	var shards []checkShardResult
	for _, f := range files {
		s := checkShardResult{file: f.path}
		if err := json.Unmarshal(f.data, &s.checkSummary); err != nil {
			return nil, usageErr("%s: not a JSON summary: %v", f.path, err)
		}
		if s.Shard == nil || s.ShardCount == 0 {
			return nil, usageErr("%s: not a shard's summary (want the --json of cascade check --universe NAME --shard i/n)", f.path)
		}
		shards = append(shards, s)
	}
	slices.SortFunc(shards, func(a, b checkShardResult) int { return *a.Shard - *b.Shard })
	first := shards[0].checkSummary
	c := &checkCampaign{summary: first.summary, Scope: first.Scope, Mode: first.Mode, Reduction: first.Reduction, ShardCount: first.ShardCount,
		InitialGraphs: first.Graphs, Complete: true, Classes: []checkCampaignClass{}, Witnessed: []string{}, MissingShards: []int{},
		Vacuous: slices.Clone(first.Vacuous), NeverReached: slices.Clone(first.NeverReached)}
	c.Seconds = 0
	c.Reproduce = unshardedCommand(first.Reproduce)
	seen := map[int]string{}
	best := map[string]checkCampaignClass{}
	for _, s := range shards {
		if k := checkCampaignKey(s.checkSummary); k != checkCampaignKey(first) {
			return nil, usageErr("%s is of another campaign than %s: %s, not %s", s.file, shards[0].file, k, checkCampaignKey(first))
		}
		i := *s.Shard
		if prev, dup := seen[i]; dup {
			return nil, usageErr("shard %d/%d twice: %s and %s", i, s.ShardCount, prev, s.file)
		}
		seen[i] = s.file
		if want := (check.Scope{Roots: make([]check.Root, s.Graphs)}); !slices.Equal(s.GraphIndexes, shardGraphs(want, i, s.ShardCount)) {
			return nil, usageErr("%s: shard %d/%d's initial graphs are not graphs %d, %d, %d, ... of the universe's %d", s.file, i, s.ShardCount, i, i+s.ShardCount, i+2*s.ShardCount, s.Graphs)
		}
		c.Roots += s.Roots
		c.Distinct += s.Distinct
		c.Generated += s.Generated
		c.Depth = max(c.Depth, s.Depth)
		c.Complete = c.Complete && s.Complete
		c.Seconds = max(c.Seconds, s.Seconds)
		c.Vacuous = slices.DeleteFunc(c.Vacuous, func(p string) bool { return !slices.Contains(s.Vacuous, p) })
		c.NeverReached = slices.DeleteFunc(c.NeverReached, func(op string) bool { return !slices.Contains(s.NeverReached, op) })
		for _, w := range s.Witnessed {
			if !slices.Contains(c.Witnessed, w) {
				c.Witnessed = append(c.Witnessed, w)
			}
		}
		for _, v := range s.Classes {
			if old, ok := best[v.Class]; !ok || len(v.Steps) < len(old.Steps) || (len(v.Steps) == len(old.Steps) && rootIndex(v) < rootIndex(old.checkViolation)) {
				best[v.Class] = checkCampaignClass{Shard: i, checkViolation: v, Rerun: s.Reproduce}
			}
		}
		c.Shards = append(c.Shards, checkCampaignShard{Shard: i, File: s.file, Result: s.Result, Seconds: s.Seconds, InitialGraphs: len(s.GraphIndexes),
			Roots: s.Roots, Distinct: s.Distinct, Generated: s.Generated, Depth: s.Depth, Complete: s.Complete, Classes: len(s.Classes), Reproduce: s.Reproduce})
	}
	slices.Sort(c.Witnessed)
	for _, k := range slices.SortedFunc(maps.Keys(best), check.CompareClasses) {
		c.Classes = append(c.Classes, best[k])
	}
	for i := range first.ShardCount {
		if _, ok := seen[i]; !ok {
			c.MissingShards = append(c.MissingShards, i)
		}
	}
	if len(c.MissingShards) == 0 {
		c.VacuousScope = (&check.Result{Generated: c.Generated, NeverReached: c.NeverReached}).VacuousScope()
	}
	switch {
	case slices.ContainsFunc(c.Shards, func(s checkCampaignShard) bool { return s.Result == summaryFail }):
		c.Result = summaryFail
	case slices.ContainsFunc(c.Shards, func(s checkCampaignShard) bool { return s.Result == summaryInterrupted }):
		c.Result = summaryInterrupted
	case len(c.MissingShards) > 0:
		// ops never reached and expectations never witnessed are not
		// known from a part of the graphs
		c.Result = summaryInconclusive
	case c.VacuousScope != "" || len(c.Vacuous) > 0:
		c.Result = summaryFail
	default:
		c.Result = summaryPass
	}
	return c, nil
}

// shardGraphs are the numbers of the initial graphs shard i of n of a
// scope with those roots explores (check.Scope.Shard).
func shardGraphs(scope check.Scope, i, n int) []int {
	for k := range scope.Roots {
		scope.Roots[k].Index = k
	}
	sh, err := scope.Shard(i, n)
	if err != nil {
		return nil
	}
	var out []int
	for _, r := range sh.Roots {
		out = append(out, r.Index)
	}
	return out
}

// rootIndex is a class's initial graph number (-1: none).
func rootIndex(v checkViolation) int {
	if v.RootIndex == nil {
		return -1
	}
	return *v.RootIndex
}

func (c *checkCampaign) result() string            { return c.Result }
func (c *checkCampaign) setMergeSeconds(s float64) { c.MergeSeconds = s }

func (c *checkCampaign) print(w io.Writer) {
	known := 0
	for _, v := range c.Classes {
		if v.Known != "" {
			known++
		}
	}
	fmt.Fprintf(w, "campaign of universe %s (mode %s) in %d shards: %d initial graphs, %d initial states, %d distinct states, %d transitions over the shards (a state reached from two shards' graphs counts in each), depth %d",
		c.Scope, c.Mode, c.ShardCount, c.InitialGraphs, c.Roots, c.Distinct, c.Generated, c.Depth)
	if !c.Complete {
		fmt.Fprint(w, ", INCOMPLETE (a bound cut a shard's search)")
	}
	fmt.Fprintf(w, "; %d violation classes, %d known; slowest shard %.1fs: %s\n", len(c.Classes), known, c.Seconds, strings.ToUpper(c.Result))
	for _, s := range c.Shards {
		fmt.Fprintf(w, "shard %d/%d: %s in %.1fs, %d initial graphs, %d distinct states, depth %d, %d classes (%s)\n",
			s.Shard, c.ShardCount, s.Result, s.Seconds, s.InitialGraphs, s.Distinct, s.Depth, s.Classes, s.File)
	}
	for _, i := range c.MissingShards {
		fmt.Fprintf(w, "shard %d/%d: MISSING (no summary given)\n", i, c.ShardCount)
	}
	if c.VacuousScope != "" {
		fmt.Fprintf(w, "VACUOUS: %s\n", c.VacuousScope)
	}
	for _, p := range c.Vacuous {
		fmt.Fprintf(w, "VACUOUS: no shard witnessed %q\n", p)
	}
	if len(c.Classes) > 0 {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PROPERTY\tCLASS\tSTEPS\tSHARD\tINITIAL GRAPH")
		for _, v := range c.Classes {
			_, rest, _ := strings.Cut(v.Class, check.ClassSep)
			if v.Known == "" {
				rest = strings.ToUpper(rest)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", v.Property, rest, len(v.Steps), v.Shard, v.Root)
		}
		_ = tw.Flush()
	}
	for _, v := range c.Classes {
		fmt.Fprintf(w, "\n%s: %s\n  initial graph %s; found again alone by: %s\n", v.Class, v.Message, v.Root, v.Rerun)
		for i, st := range v.Steps {
			fmt.Fprintf(w, "  %2d  %s\n", i+1, st)
		}
	}
	fmt.Fprintf(w, "merged in %.3fs; reproduce unsharded: %s\n", c.MergeSeconds, c.Reproduce)
}

// junit writes one testsuite, a testcase per shard; a failed shard's
// carries the campaign's unclassified classes (none when --strict
// failed it on known ones), each with its trace.
func (c *checkCampaign) junit(w io.Writer) error {
	suite := junitSuite{Name: "cascade campaign " + c.Scope, Time: fmt.Sprintf("%.3f", c.Seconds), Timestamp: time.Now().UTC().Format(time.RFC3339)}
	for _, s := range c.Shards {
		jc := junitCase{Name: fmt.Sprintf("shard %d/%d", s.Shard, c.ShardCount), Classname: "cascade.campaign." + c.Scope, Time: fmt.Sprintf("%.3f", s.Seconds), SystemOut: s.Reproduce}
		if s.Result == summaryFail {
			var text []string
			for _, v := range c.Classes {
				if v.Known == "" {
					text = append(text, fmt.Sprintf("%s (%d steps, shard %d, initial graph %s)\n%s", v.Class, len(v.Steps), v.Shard, v.Root, v.TraceText))
				}
			}
			jc.Failure = &junitMessage{Message: fmt.Sprintf("shard %d/%d failed", s.Shard, c.ShardCount), Type: "violation", Text: strings.Join(text, "\n")}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, jc)
	}
	return encodeCampaignJUnit(w, missingShardCases(suite, c.MissingShards, c.ShardCount))
}
