package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/model/check"
)

// shardScope splits a universe's scope by --shard or --shards (with
// $JOB_COMPLETION_INDEX): the shard explores the initial graphs
// check.Scope.Shard gives it. It returns the shard (none: Count 0) and
// the universe's number of initial graphs.
func shardScope(cmd *cobra.Command, f *checkFlags, scope *check.Scope) (fuzz.Shard, int, error) {
	sh, err := parseShardFlags(f.shard, f.shards)
	if err != nil || sh.Count == 0 {
		return sh, 0, err
	}
	if f.universe == "" {
		return sh, 0, usageErr("--shard and --shards split a universe's initial graphs: give --universe NAME")
	}
	graphs := len(scope.Roots)
	split, err := scope.Shard(sh.Index, sh.Count)
	if err != nil {
		return sh, 0, usageErr("--shard %s: %v", sh, err)
	}
	*scope = split
	shardOut(cmd.Flags(), &f.out, sh)
	return sh, graphs, nil
}

// addShard makes a check summary a shard's: its slice, the numbers of
// its initial graphs, each class's trace text (the shard's --out may be
// gone with its pod), and no vacuity of its own (campaign merge judges
// it over all the shards).
func addShard(out *checkSummary, res *check.Result, sh fuzz.Shard, scope check.Scope, graphs int) {
	i := sh.Index
	out.Shard, out.ShardCount, out.Graphs = &i, sh.Count, graphs
	for _, r := range scope.Roots {
		out.GraphIndexes = append(out.GraphIndexes, r.Index)
	}
	for k, c := range res.Classes {
		out.Classes[k].TraceText = c.Trace
	}
	out.VacuousScope = ""
}

// printShard says, after a shard's text result, which graphs it explored.
func printShard(w io.Writer, sh fuzz.Shard, scope check.Scope, graphs int) {
	fmt.Fprintf(w, "\nshard %s: %d of the universe's %d initial graphs (graphs %d, %d, %d, ...); ops and expectations never reached are judged over all shards by cascade campaign merge\n",
		sh, len(scope.Roots), graphs, sh.Index, sh.Index+sh.Count, sh.Index+2*sh.Count)
}
