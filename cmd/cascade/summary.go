package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
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
	// KCMVersion is kube-controller-manager's release when it is not
	// kube-apiserver's (a skewed control plane: --kcm-version, or the
	// binary upstream and upstream-stepped started); empty otherwise.
	// KubeVersion is then kube-apiserver's.
	KCMVersion string `json:"kcm_version,omitempty"`
	// Datastore is what an envtest target's kube-apiserver stored objects
	// in when --datastore was given (etcd or kine); empty otherwise.
	Datastore string `json:"datastore,omitempty"`
}

// newSummary starts the summary of cmd's run on release rel: its command
// line with the flags that were given (leaving out those that only shape
// the report), seedFlag, when not "", set to seed, and --kube-version
// when rel was detected and is not the default (and --kcm-version when
// rel is skewed and the flag was not given).
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
	kv, kcm := "", ""
	if rel != (model.Release{}) {
		kv = rel.APIServer().String()
		if f := cmd.Flags().Lookup("kube-version"); f != nil && !f.Changed && rel.APIServer() != model.DefaultRelease {
			args = append(args, "--kube-version", kv)
		}
		if rel.Skewed() {
			kcm = rel.KCM().String()
			if f := cmd.Flags().Lookup("kcm-version"); f != nil && !f.Changed {
				args = append(args, "--kcm-version", kcm)
			}
		}
	}
	s := summary{Command: cmd.Name(), Target: target, Seed: seed, Reproduce: strings.Join(args, " "), KubeVersion: kv, KCMVersion: kcm}
	if f := cmd.Flags().Lookup("datastore"); f != nil && f.Changed {
		s.Datastore = f.Value.String()
	}
	return s
}

// knownShown is a known upstream race (model.KnownRaces) a run showed,
// as every --json summary that names one lists it (known_races): its ID,
// what showed it ("trace race/kubernetes-114603", "fuzz (on
// recorded-reads)", "fuzz (liveness)"), how many times, and one of the
// messages the checks gave for it (fuzz names the run's objects there).
type knownShown struct {
	ID string `json:"id"`
	// FiledUpstream says whether an upstream issue reports the race
	// (model.KnownRace.Filed); false for one cascade found and no issue
	// names yet.
	FiledUpstream bool     `json:"filed_upstream"`
	ShownBy       []string `json:"shown_by"`
	Times         int      `json:"times"`
	Example       string   `json:"example,omitempty"`
}

// knownRaceWord is "known upstream race ID", with "(no upstream issue
// filed)" after a race no upstream issue reports.
func knownRaceWord(id string) string {
	if k, ok := model.KnownRaceByID(id); ok && !k.Filed() {
		return "known upstream race " + id + " (no upstream issue filed)"
	}
	return "known upstream race " + id
}

// knownRaces are the known races a run showed, in the order first shown.
type knownRaces []knownShown

// add records that by showed the known race id times times, example
// being a message for it ("" for none).
func (ks *knownRaces) add(id, by string, times int, example string) {
	for i := range *ks {
		k := &(*ks)[i]
		if k.ID != id {
			continue
		}
		if !slices.Contains(k.ShownBy, by) {
			k.ShownBy = append(k.ShownBy, by)
		}
		k.Times += times
		if k.Example == "" {
			k.Example = example
		}
		return
	}
	filed := false
	if k, ok := model.KnownRaceByID(id); ok {
		filed = k.Filed()
	}
	*ks = append(*ks, knownShown{ID: id, FiledUpstream: filed, ShownBy: []string{by}, Times: times, Example: example})
}

// merge adds what o showed (a shard's summary into its campaign's).
func (ks *knownRaces) merge(o knownRaces) {
	for _, k := range o {
		for i, by := range k.ShownBy {
			times := 0
			if i == 0 {
				times = k.Times // the race's, whatever showed it
			}
			ks.add(k.ID, by, times, k.Example)
		}
	}
}

// fuzzKnownRaces groups fuzz.Report.Known, a line a showing, by race.
func fuzzKnownRaces(lines []string) knownRaces {
	ks := knownRaces{}
	for _, l := range lines {
		id, by, msg := fuzzKnown(l)
		ks.add(id, by, 1, msg)
	}
	return ks
}

// fuzzKnown reads a line of fuzz.Report.Known, "ID (on BASIS): message"
// from the history check or "ID: message" from the liveness check, as
// the race's ID, what showed it ("fuzz (on BASIS)" or "fuzz
// (liveness)") and the message.
func fuzzKnown(line string) (id, by, msg string) {
	head, msg, _ := strings.Cut(line, ": ")
	id, basis, ok := strings.Cut(head, " (on ")
	if !ok {
		return id, "fuzz (liveness)", msg
	}
	return id, "fuzz (on " + basis, msg
}

// judged is the release the summary judged, as model.Release prints it.
func (s *summary) judged() string {
	if s.KCMVersion == "" {
		return s.KubeVersion
	}
	return s.KubeVersion + " (kube-controller-manager " + s.KCMVersion + ")"
}

// lines are the report's lines naming each race shown, with the release
// judged when the registry bounds the race's releases: "known upstream
// race kubernetes#114603, present in v1.33.13: shown by trace
// race/kubernetes-114603", then "  e.g. MESSAGE" when a check gave one.
func (ks knownRaces) lines(release string) []string {
	var out []string
	for _, k := range ks {
		in := ""
		if e, ok := model.KnownRaceByID(k.ID); ok && e.Releases != (model.ReleaseRange{}) && release != "" {
			in = ", present in " + release
		}
		times := ""
		if k.Times > 1 {
			times = fmt.Sprintf(" (%d times)", k.Times)
		}
		out = append(out, fmt.Sprintf("%s%s: shown by %s%s", knownRaceWord(k.ID), in, strings.Join(k.ShownBy, ", "), times))
		if k.Example != "" {
			out = append(out, "  e.g. "+k.Example)
		}
	}
	return out
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

// plural is "1 stanza", "2 stanzas": n and the noun, with an s unless n
// is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
