package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/cascade-k8s/cascade/harness/fuzz"
)

// jobCompletionIndex is the variable an Indexed Job's pod reads its index
// from (batch/v1 JobCompletionIndex, completionMode Indexed).
const jobCompletionIndex = "JOB_COMPLETION_INDEX"

// registerShard adds --shard and --shards to fl; slice says what a
// shard is the i-th of n disjoint slices of.
func registerShard(fl *pflag.FlagSet, shard *string, shards *int, slice string) {
	fl.StringVar(shard, "shard", "", "run only the i-th of n disjoint slices of "+slice+"; see README \"Campaigns\")")
	fl.IntVar(shards, "shards", 0, "split the campaign in this many shards and run the one $"+jobCompletionIndex+" names (an Indexed Job's pod); --shard overrides it")
}

// shardOut makes a shard's --out, when it was not given, DIR/shard-I, so
// that shards side by side on one machine write apart.
func shardOut(fl *pflag.FlagSet, out *string, sh fuzz.Shard) {
	if sh.Count > 0 && !fl.Changed("out") {
		*out = filepath.Join(*out, fmt.Sprintf("shard-%d", sh.Index))
	}
}

// parseShardFlags is the shard --shard or --shards with
// $JOB_COMPLETION_INDEX name; none (Count 0) when neither is given.
func parseShardFlags(shard string, shards int) (fuzz.Shard, error) {
	switch {
	case shard != "":
		sh, err := fuzz.ParseShard(shard)
		if err != nil {
			return fuzz.Shard{}, usageErr("%v", err)
		}
		if shards != 0 && shards != sh.Count {
			return fuzz.Shard{}, usageErr("--shard %s and --shards %d disagree on the number of shards", shard, shards)
		}
		return sh, nil
	case shards < 0:
		return fuzz.Shard{}, usageErr("--shards %d: want a positive number of shards", shards)
	case shards == 0:
		return fuzz.Shard{}, nil
	}
	v, ok := os.LookupEnv(jobCompletionIndex)
	if !ok {
		return fuzz.Shard{}, usageErr("--shards %d needs $%s (set by an Indexed Job) or --shard i/%d", shards, jobCompletionIndex, shards)
	}
	i, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || i < 0 || i >= shards {
		return fuzz.Shard{}, usageErr("$%s=%q: want a shard index from 0 to %d (--shards %d)", jobCompletionIndex, v, shards-1, shards)
	}
	return fuzz.Shard{Index: i, Count: shards}, nil
}

// shardReproduce is a shard's reproduce command: newSummary leaves out
// --shard and --shards, and the index is made explicit (--shard i/n),
// so that the command runs the same shard where no $JOB_COMPLETION_INDEX
// is set.
func shardReproduce(cmdline string, sh fuzz.Shard) string {
	if sh.Count == 0 {
		return cmdline
	}
	return cmdline + " --shard " + sh.String()
}
