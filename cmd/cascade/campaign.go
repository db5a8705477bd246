package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

func newCampaignCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "campaign",
		Short: "Campaigns split into shards (cascade fuzz --shard, cascade check --universe --shard) and merged into one report",
		Long: `A campaign is one 'cascade fuzz' (--checks runs from --seed) or one
'cascade check --universe NAME' split into shards. 'cascade fuzz --shard
i/n' (or --shards n in a pod of an Indexed Job, which sets
$JOB_COMPLETION_INDEX) runs every n-th run from the i-th, each from the
seed rapid's own loop gives it, so that the shards together run exactly
the unsharded campaign's runs. 'cascade check --universe NAME --shard i/n'
explores every n-th of the universe's initial graphs from the i-th, so
that the shards together find exactly the unsharded search's violation
classes. 'cascade campaign merge' turns the shards' --json summaries into
one report; 'cascade campaign run' runs the shards as an Indexed Job (see
README "Campaigns").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCampaignMergeCmd(), newCampaignRunCmd())
	return cmd
}

type mergeFlags struct {
	json  bool
	junit string
}

func newCampaignMergeCmd() *cobra.Command {
	f := &mergeFlags{}
	cmd := &cobra.Command{
		Use:   "merge DIR|FILE...",
		Short: "Merge the shards' fuzz or check --json summaries into one report",
		Long: `merge reads the --json summaries of a campaign's shards ('cascade fuzz
--shard i/n --json' or 'cascade check --universe NAME --shard i/n --json';
every *.json file of each DIR, or each FILE) and prints one report.

Of fuzz shards: the unsharded campaign's summary (runs, passed, steps, each
run's steps, known races, inconclusive runs; seconds is the slowest
shard's), each shard's line, and every failure with its trace, the command
that replays the trace and the command that runs the failing run alone
(its own seed, --checks 1). --junit writes one testcase per shard. The
shards must be of one campaign (command, target, seed, checks, shard
count, release, mode, injected bugs), each once.

Of check shards: every violation class any shard found, each with the
shortest counterexample over the shards (ties: the lowest initial graph),
its trace and the shard command that finds it again alone; each shard's
initial graphs, initial states, distinct states, transitions, depth and
seconds; their sums (a state reached from the graphs of two shards counts
in each, so the sum is at least the unsharded search's); ops never reached
and expectations never witnessed by any shard (a vacuous campaign fails).
The shards must be of one campaign (universe, mode, release, reduction,
shard count), each once, each with its own slice of the initial graphs.

Exit codes: 0 every shard passed, 1 a run failed or a check shard failed
(an unclassified class, or --strict), or the campaign is vacuous, 2 usage
or input error (a file that is not a shard's summary, shards of different
campaigns or commands, a shard twice), 3 nothing failed but a shard is
missing or some run was inconclusive.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runMerge(cmd, f, args) },
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&f.junit, "junit", "", "write JUnit XML to this file (one testcase per shard)")
	return cmd
}

// shardResult is one shard's summary and the file it came from.
type shardResult struct {
	fuzzSummary
	file string
}

// campaignShard is a shard's line in the merged report.
type campaignShard struct {
	Shard      int     `json:"shard"`
	File       string  `json:"file"`
	Result     string  `json:"result"`
	Seconds    float64 `json:"seconds"`
	RunNumbers []int   `json:"run_numbers"`
	Reproduce  string  `json:"command_to_reproduce"`
}

// campaignFailure is a failing run of a shard.
type campaignFailure struct {
	Shard int `json:"shard"`
	fuzzFailure
	// Rerun runs the failing run alone, from its own seed.
	Rerun string `json:"rerun_command"`
}

// campaignSummary is `cascade campaign merge --json`: the fields of the
// unsharded campaign's fuzz summary, then the shards'.
type campaignSummary struct {
	fuzzSummary
	Shards        []campaignShard   `json:"shards"`
	Failures      []campaignFailure `json:"failures"`
	MissingShards []int             `json:"missing_shards"`
	MergeSeconds  float64           `json:"merge_seconds"`
}

// campaignReport is a merged campaign: fuzz runs (campaignSummary) or a
// universe's initial graphs (checkCampaign).
type campaignReport interface {
	result() string
	setMergeSeconds(float64)
	print(io.Writer)
	junit(io.Writer) error
}

func runMerge(cmd *cobra.Command, f *mergeFlags, args []string) error {
	start := time.Now()
	files, err := readShardFiles(args)
	if err != nil {
		return err
	}
	var c campaignReport
	if files[0].command == "check" {
		c, err = mergeCheckShards(files)
	} else {
		c, err = mergeFuzzShards(files)
	}
	if err != nil {
		return err
	}
	c.setMergeSeconds(time.Since(start).Seconds())
	if f.junit != "" {
		if err := writeFileNew(f.junit, c.junit); err != nil {
			return err
		}
	}
	if f.json {
		if err := writeJSON(cmd.OutOrStdout(), c); err != nil {
			return err
		}
	} else {
		c.print(cmd.OutOrStdout())
	}
	switch c.result() {
	case summaryFail:
		return errViolation
	case summaryInconclusive:
		return errInconclusive
	}
	return nil
}

// shardFile is a shard's --json summary as read: its file, bytes and
// command (fuzz or check), all of one command.
type shardFile struct {
	path, command string
	data          []byte
}

// readShardFiles reads the shard summaries args name: each *.json of a
// directory, or a file.
func readShardFiles(args []string) ([]shardFile, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		m, _ := filepath.Glob(filepath.Join(a, "*.json"))
		if len(m) == 0 {
			return nil, usageErr("%s: no *.json shard summary in it", a)
		}
		files = append(files, m...)
	}
	var out []shardFile
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		var s summary
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, usageErr("%s: not a JSON summary: %v", p, err)
		}
		if len(out) > 0 && s.Command != out[0].command {
			return nil, usageErr("%s is a %s summary, %s a %s one: shards of one campaign are of one command", p, s.Command, out[0].path, out[0].command)
		}
		out = append(out, shardFile{path: p, command: s.Command, data: b})
	}
	return out, nil
}

// mergeFuzzShards merges a fuzz campaign's shard summaries.
func mergeFuzzShards(files []shardFile) (*campaignSummary, error) {
	var out []shardResult
	for _, f := range files {
		var s shardResult
		if err := json.Unmarshal(f.data, &s.fuzzSummary); err != nil {
			return nil, usageErr("%s: not a JSON summary: %v", f.path, err)
		}
		if s.Command != "fuzz" || s.Shard == nil || s.ShardCount == 0 {
			return nil, usageErr("%s: not a shard's summary (want the --json of cascade fuzz or cascade check --universe with --shard i/n)", f.path)
		}
		s.file = f.path
		out = append(out, s)
	}
	return mergeShards(out)
}

func (c *campaignSummary) result() string            { return c.Result }
func (c *campaignSummary) setMergeSeconds(s float64) { c.MergeSeconds = s }
func (c *campaignSummary) print(w io.Writer)         { printCampaign(w, c) }
func (c *campaignSummary) junit(w io.Writer) error   { return writeCampaignJUnit(w, c) }

// campaignKey is what every shard of one campaign has alike.
func campaignKey(s fuzzSummary) string {
	return fmt.Sprintf("target %s, seed %d, checks %d, %d shards, release %q, datastore %q, mode %s, inject %v",
		s.Target, s.Seed, s.Checks, s.ShardCount, s.judged(), s.Datastore, s.Mode, s.Inject)
}

// mergeShards merges one campaign's shard summaries.
func mergeShards(shards []shardResult) (*campaignSummary, error) {
	slices.SortFunc(shards, func(a, b shardResult) int { return *a.Shard - *b.Shard })
	first := shards[0].fuzzSummary
	c := &campaignSummary{fuzzSummary: fuzzSummary{summary: first.summary, Mode: first.Mode, Inject: first.Inject,
		Checks: first.Checks, ShardCount: first.ShardCount, Known: knownRaces{}, Inconclusive: []string{}, RunSteps: map[int]int{}},
		Failures: []campaignFailure{}, MissingShards: []int{}}
	c.Shard = nil
	c.Seconds = 0
	c.Reproduce = unshardedCommand(first.Reproduce)
	seen := map[int]string{}
	for _, s := range shards {
		if k := campaignKey(s.fuzzSummary); k != campaignKey(first) {
			return nil, usageErr("%s is of another campaign than %s: %s, not %s", s.file, shards[0].file, k, campaignKey(first))
		}
		i := *s.Shard
		if prev, dup := seen[i]; dup {
			return nil, usageErr("shard %d/%d twice: %s and %s", i, s.ShardCount, prev, s.file)
		}
		seen[i] = s.file
		c.Runs += s.Runs
		c.Passed += s.Passed
		c.Steps += s.Steps
		c.HistoryOps += s.HistoryOps
		c.ExcusedRuns += s.ExcusedRuns
		c.DeliveryRecordRuns += s.DeliveryRecordRuns
		c.Restarts += s.Restarts
		c.RestartSeconds += s.RestartSeconds
		c.MaybeApplied += s.MaybeApplied
		c.RefusedWrites += s.RefusedWrites
		c.Seconds = max(c.Seconds, s.Seconds)
		maps.Copy(c.RunSteps, s.RunSteps)
		c.Known.merge(s.Known)
		c.Inconclusive = append(c.Inconclusive, s.Inconclusive...)
		c.Shards = append(c.Shards, campaignShard{Shard: i, File: s.file, Result: s.Result, Seconds: s.Seconds, RunNumbers: s.RunNumbers, Reproduce: s.Reproduce})
		if s.Failure != nil {
			fl := campaignFailure{Shard: i, fuzzFailure: *s.Failure, Rerun: rerunCommand(c.Reproduce, s.Failure.Seed)}
			c.Failures = append(c.Failures, fl)
			if c.Failure == nil || s.Failure.Run < c.Failure.Run {
				c.Failure = s.Failure
			}
		}
	}
	for i := range first.ShardCount {
		if _, ok := seen[i]; !ok {
			c.MissingShards = append(c.MissingShards, i)
		}
	}
	switch {
	case len(c.Failures) > 0:
		c.Result = summaryFail
	case slices.ContainsFunc(c.Shards, func(s campaignShard) bool { return s.Result == summaryInterrupted }):
		c.Result = summaryInterrupted
	case len(c.MissingShards) > 0 || len(c.Inconclusive) > 0:
		c.Result = summaryInconclusive
	default:
		c.Result = summaryPass
	}
	return c, nil
}

// unshardedCommand is a shard's reproduce command without its --shard:
// the whole campaign.
func unshardedCommand(shardCmd string) string {
	f := strings.Fields(shardCmd)
	if n := len(f); n >= 2 && f[n-2] == "--shard" {
		f = f[:n-2]
	}
	return strings.Join(f, " ")
}

// rerunCommand is the campaign's command running one run alone: its own
// seed, one check ("" without a seed).
func rerunCommand(campaign string, seed uint64) string {
	if seed == 0 {
		return ""
	}
	f := strings.Fields(campaign)
	hasChecks := false
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "--seed":
			f[i+1] = strconv.FormatUint(seed, 10)
		case "--checks":
			f[i+1], hasChecks = "1", true
		}
	}
	if !hasChecks {
		f = append(f, "--checks", "1")
	}
	return strings.Join(f, " ")
}

func printCampaign(w io.Writer, c *campaignSummary) {
	fmt.Fprintf(w, "campaign of %d runs on %s (%s runs) in %d shards: %d runs passed", c.Checks, c.Target, c.Mode, c.ShardCount, c.Passed)
	if c.Runs > c.Passed {
		fmt.Fprintf(w, " of %d", c.Runs)
	}
	fmt.Fprintf(w, ", %d steps", c.Steps)
	if c.HistoryOps > 0 {
		fmt.Fprintf(w, ", %d history operations checked", c.HistoryOps)
	}
	fmt.Fprintf(w, "; slowest shard %.1fs, seed %d: %s\n", c.Seconds, c.Seed, strings.ToUpper(c.Result))
	for _, s := range c.Shards {
		fmt.Fprintf(w, "shard %d/%d: %s in %.1fs, %d runs (%s)\n", s.Shard, c.ShardCount, s.Result, s.Seconds, len(s.RunNumbers), s.File)
	}
	for _, i := range c.MissingShards {
		fmt.Fprintf(w, "shard %d/%d: MISSING (no summary given)\n", i, c.ShardCount)
	}
	for _, l := range c.Known.lines(c.judged()) {
		fmt.Fprintln(w, l)
	}
	for _, u := range c.Inconclusive {
		fmt.Fprintf(w, "INCONCLUSIVE %s\n", u)
	}
	for _, f := range c.Failures {
		fmt.Fprintf(w, "FAILED (%s) in run %d (shard %d/%d), shrunk to %d steps:\n  %s\n", f.Kind, f.Run, f.Shard, c.ShardCount, f.Steps, strings.ReplaceAll(f.Summary, "\n", "\n  "))
		if f.Replay != "" {
			fmt.Fprintf(w, "  replay: %s\n", f.Replay)
		}
		if f.Rerun != "" {
			fmt.Fprintf(w, "  run alone: %s\n", f.Rerun)
		}
		if f.TraceText != "" {
			fmt.Fprintf(w, "  trace %s:\n    %s\n", f.Trace, strings.ReplaceAll(strings.TrimRight(f.TraceText, "\n"), "\n", "\n    "))
		}
	}
	fmt.Fprintf(w, "merged in %.3fs; reproduce: %s\n", c.MergeSeconds, c.Reproduce)
}

// writeCampaignJUnit writes one testsuite, a testcase per shard.
func writeCampaignJUnit(w io.Writer, c *campaignSummary) error {
	suite := junitSuite{Name: "cascade campaign " + c.Target, Time: fmt.Sprintf("%.3f", c.Seconds), Timestamp: time.Now().UTC().Format(time.RFC3339)}
	for _, s := range c.Shards {
		jc := junitCase{Name: fmt.Sprintf("shard %d/%d", s.Shard, c.ShardCount), Classname: "cascade.campaign." + c.Target, Time: fmt.Sprintf("%.3f", s.Seconds), SystemOut: s.Reproduce}
		for _, f := range c.Failures {
			if f.Shard == s.Shard {
				jc.Failure = &junitMessage{Message: firstLine(f.Summary), Type: f.Kind,
					Text: fmt.Sprintf("run %d\n%s\nreplay: %s\nrun alone: %s\n%s", f.Run, f.Summary, f.Replay, f.Rerun, f.TraceText)}
				suite.Failures++
			}
		}
		if s.Result == summaryInterrupted {
			jc.Error = &junitMessage{Message: "interrupted"}
			suite.Errors++
		}
		suite.Cases = append(suite.Cases, jc)
	}
	return encodeCampaignJUnit(w, missingShardCases(suite, c.MissingShards, c.ShardCount))
}

// missingShardCases adds an erring testcase for each missing shard.
func missingShardCases(suite junitSuite, missing []int, count int) junitSuite {
	for _, i := range missing {
		suite.Cases = append(suite.Cases, junitCase{Name: fmt.Sprintf("shard %d/%d", i, count), Classname: strings.ReplaceAll(suite.Name, " ", "."), Time: "0",
			Error: &junitMessage{Message: "missing: no summary of this shard was merged"}})
		suite.Errors++
	}
	return suite
}

// encodeCampaignJUnit writes a campaign's one testsuite as JUnit XML.
func encodeCampaignJUnit(w io.Writer, suite junitSuite) error {
	suite.Tests = len(suite.Cases)
	all := junitSuites{Name: "cascade campaign", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Time: suite.Time, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	return enc.Encode(all)
}

// writeFileNew writes path with f, replacing an existing file only when
// cascade wrote it (artifact.Write): a file it did not write is a usage
// error.
func writeFileNew(path string, f func(io.Writer) error) error {
	err := artifact.Write(path, f)
	if errors.Is(err, artifact.ErrExists) {
		return usageErr("--junit: %v", err)
	}
	if err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	return nil
}
