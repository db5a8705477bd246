package main

import (
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cascade-k8s/cascade/model"
)

// Results of a command as its --json summary names them.
const (
	summaryPass        = "pass"
	summaryFail        = "fail"
	summaryInterrupted = "interrupted"
	// summaryInconclusive: nothing failed, but the checker could not
	// decide some run's history (fuzz exits 3).
	summaryInconclusive = "inconclusive"
)

// summary is what every --json summary (check, conform, fuzz) starts
// with, in snake_case with times in seconds: README's "Machine-readable
// summaries" lists the fields. Each command's own fields follow it.
type summary struct {
	// Command is check, conform or fuzz.
	Command string `json:"command"`
	// Target is where it ran: model for check.
	Target string `json:"target"`
	// Result is pass, fail, interrupted or inconclusive.
	Result string `json:"result"`
	// Seconds is the wall time of the command's work.
	Seconds float64 `json:"seconds"`
	// Seed is rapid's seed of the randomized runs (fuzz, and conform's
	// fuzz phase), 0 when nothing was random (check, a conform run
	// without a fuzz phase).
	Seed uint64 `json:"seed"`
	// Reproduce is the command line that does the same again, with the
	// seed made explicit, and the release when it was detected and is not
	// the default one.
	Reproduce string `json:"command_to_reproduce"`
	// KubeVersion is the Kubernetes release judged (--kube-version, else
	// that of the binaries in use); "" on the model target without
	// --kube-version, where each trace replays on its own releases.
	KubeVersion string `json:"kube_version"`
	// Datastore is what an envtest target's kube-apiserver stored objects
	// in when --datastore was given (etcd or kine); empty otherwise.
	Datastore string `json:"datastore,omitempty"`
}

// newSummary starts the summary of cmd's run on release rel: its command
// line with the flags that were given (leaving out those that only shape
// the report), seedFlag, when not "", set to seed, and --kube-version
// when rel was detected and is not the default.
func newSummary(cmd *cobra.Command, target string, seedFlag string, seed uint64, rel model.Release) summary {
	args := []string{"cascade", cmd.Name()}
	if f := cmd.Flags().Lookup("target"); f != nil && f.Changed {
		args = append(args, "--target", shellQuote(f.Value.String()))
	}
	seedSet := false
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "json", "quiet", "out", "junit", "target", "shard", "shards":
			return // a shard's index is added by its command (shardReproduce)
		}
		if f.Name == seedFlag && seedFlag != "" {
			args = append(args, "--"+f.Name, strconv.FormatUint(seed, 10))
			seedSet = true
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name, shellQuote(v))
			}
			return
		}
		if f.Value.Type() == "bool" {
			if f.Value.String() == "true" {
				args = append(args, "--"+f.Name)
			} else {
				args = append(args, "--"+f.Name+"=false")
			}
			return
		}
		args = append(args, "--"+f.Name, shellQuote(f.Value.String()))
	})
	if seedFlag != "" && !seedSet && seed != 0 {
		args = append(args, "--"+seedFlag, strconv.FormatUint(seed, 10))
	}
	kv := ""
	if rel != (model.Release{}) {
		kv = rel.String()
		if f := cmd.Flags().Lookup("kube-version"); f != nil && !f.Changed && rel != model.DefaultRelease {
			args = append(args, "--kube-version", kv)
		}
	}
	s := summary{Command: cmd.Name(), Target: target, Seed: seed, Reproduce: strings.Join(args, " "), KubeVersion: kv}
	if f := cmd.Flags().Lookup("datastore"); f != nil && f.Changed {
		s.Datastore = f.Value.String()
	}
	return s
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
