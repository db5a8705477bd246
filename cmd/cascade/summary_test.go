package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/fuzz"
	"github.com/cascade-k8s/cascade/harness/target"
)

// snakeCase is a JSON key of the summaries: lower case, digits and _.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// checkKeys fails on any key of v, at any depth, that is not snake_case.
func checkKeys(t *testing.T, what string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !snakeCase.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", what, k)
			}
			checkKeys(t, what+"."+k, e)
		}
	case []any:
		for _, e := range x {
			checkKeys(t, what, e)
		}
	}
}

// sharedSummary decodes a --json summary and checks the fields every
// command's summary starts with (README, "Machine-readable summaries").
func sharedSummary(t *testing.T, command, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s --json: %v\n%s", command, err, out)
	}
	checkKeys(t, command, m)
	if m["command"] != command {
		t.Errorf("%s: command = %v", command, m["command"])
	}
	if _, ok := m["target"].(string); !ok {
		t.Errorf("%s: target = %v, want a string", command, m["target"])
	}
	switch m["result"] {
	case "pass", "fail", "interrupted":
	default:
		t.Errorf("%s: result = %v, want pass, fail or interrupted", command, m["result"])
	}
	if s, ok := m["seconds"].(float64); !ok || s < 0 {
		t.Errorf("%s: seconds = %v, want a number of seconds", command, m["seconds"])
	}
	if _, ok := m["seed"].(float64); !ok {
		t.Errorf("%s: seed = %v, want a number", command, m["seed"])
	}
	if v, ok := m["kube_version"].(string); !ok || v != "" && !strings.HasPrefix(v, "v1.") {
		t.Errorf("%s: kube_version = %v, want a release or \"\"", command, m["kube_version"])
	}
	if c, ok := m["command_to_reproduce"].(string); !ok || !strings.HasPrefix(c, "cascade "+command+" ") {
		t.Errorf("%s: command_to_reproduce = %v, want a cascade %s command line", command, m["command_to_reproduce"], command)
	}
	return m
}

// TestSummarySchema: check, conform and fuzz print one JSON schema:
// snake_case keys, times in seconds, the seed and the command that
// reproduces the run.
func TestSummarySchema(t *testing.T) {
	out, code := cascade(t, "check", "--preset", "foreground-cycle", "--json", "-q", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	m := sharedSummary(t, "check", out)
	if m["target"] != "model" || m["result"] != "pass" || m["command_to_reproduce"] != "cascade check --preset foreground-cycle" {
		t.Errorf("check: %v", m)
	}

	out, code = cascade(t, "conform", "--target", "model", "--labels", "protection", "--json", "-q")
	if code != 0 {
		t.Fatalf("conform: exit %d\n%s", code, out)
	}
	m = sharedSummary(t, "conform", out)
	if m["target"] != "model" || m["result"] != "pass" || m["seed"] != 0.0 {
		t.Errorf("conform: %v", m)
	}

	// a failing fuzz report as runFuzz prints it, its 17.366112 s in
	// seconds and its seed in the command that reproduces it
	rep := &fuzz.Report{Target: "upstream", Mode: "concurrent", Seed: 42, Runs: 3, Checks: 2, Steps: 40, Ops: 120, Elapsed: 17366112 * time.Microsecond,
		Failure: &fuzz.Failure{Kind: "linearizability", Summary: "illegal", Steps: 7, Run: 3, FoundAfter: 1500 * time.Millisecond, Seed: 42, Trace: "out/failure.trace"}}
	var b strings.Builder
	if err := printFuzz(&b, summary{Command: "fuzz", Target: "upstream", Seed: 42, Reproduce: "cascade fuzz --target upstream --seed 42"}, rep, true); err != nil {
		t.Fatal(err)
	}
	m = sharedSummary(t, "fuzz", b.String())
	f, _ := m["failure"].(map[string]any)
	if m["result"] != "fail" || m["seconds"] != 17.366112 || m["seed"] != 42.0 || m["runs"] != 3.0 || m["runs_passed"] != 2.0 || m["steps"] != 40.0 ||
		f == nil || f["found_after_seconds"] != 1.5 || f["replay_command"] != "cascade replay --target upstream out/failure.trace" {
		t.Errorf("fuzz: %s", b.String())
	}
}

// TestFuzzTextSummary: a passing summary prints its seed and the command
// that runs it again; a failing one counts the runs and steps that ran,
// the failing run's included.
func TestFuzzTextSummary(t *testing.T) {
	s := summary{Reproduce: "cascade fuzz --target impl --seed 7"}
	var b strings.Builder
	if err := printFuzz(&b, s, &fuzz.Report{Target: "impl", Mode: "concurrent", Seed: 7, Runs: 2, Checks: 2, Steps: 31, Elapsed: time.Second}, false); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "2 runs passed, 31 steps in 1s, seed 7\n") || !strings.Contains(got, "reproduce: cascade fuzz --target impl --seed 7\n") {
		t.Errorf("passing summary:\n%s", got)
	}
	b.Reset()
	rep := &fuzz.Report{Target: "impl", Mode: "concurrent", Seed: 7, Runs: 1, Steps: 40, Elapsed: time.Second,
		Failure: &fuzz.Failure{Kind: "liveness", Summary: "once quiet: garbage collected", Run: 1, Seed: 7}}
	if err := printFuzz(&b, s, rep, false); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "0 runs passed of 1, 40 steps") || !strings.Contains(got, "FAILED (liveness) in run 1") {
		t.Errorf("failing summary:\n%s", got)
	}
}

// TestFuzzFailureOnKineReplaysOnKine: a failure found with --datastore
// kine says to replay it there, and conform's fuzz phase repeats on it;
// replayed on etcd it would not be the same run.
func TestFuzzFailureOnKineReplaysOnKine(t *testing.T) {
	rep := &fuzz.Report{Target: "upstream", Mode: "concurrent", Seed: 1, Runs: 1, Steps: 41, Elapsed: time.Second,
		Failure: &fuzz.Failure{Kind: "linearizability", Summary: "Illegal", Run: 1, Seed: 1, Trace: "out/fuzz/failure.trace", ReplayHistory: true}}
	var b strings.Builder
	if err := printFuzz(&b, summary{Reproduce: "cascade fuzz --target upstream --datastore kine --seed 1", Datastore: "kine"}, rep, false); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "replay: cascade replay --target upstream --datastore kine --history out/fuzz/failure.trace\n") {
		t.Errorf("the replay command leaves out the datastore:\n%s", got)
	}
	spec := target.Spec{Name: target.Upstream, Datastore: "kine"}
	if got := fuzzCommand(spec, 1); !strings.Contains(got, "--datastore kine") {
		t.Errorf("conform's fuzz phase repeats as %q, without --datastore kine", got)
	}
}

// TestFuzzSummaryRestarts: runs with restarts name them, their total
// time, the operations maybe applied and the writes refused, as text and
// as JSON.
func TestFuzzSummaryRestarts(t *testing.T) {
	rep := &fuzz.Report{Target: "impl", Mode: "concurrent", Seed: 3, Runs: 2, Checks: 2, Steps: 30, Ops: 90, Elapsed: 9 * time.Second,
		Restarts: 2, RestartTime: 2500 * time.Millisecond, MaybeApplied: 3, Refused: 4}
	s := summary{Command: "fuzz", Target: "impl", Seed: 3, Reproduce: "cascade fuzz --target impl --restart-gc 3s --seed 3"}
	var b strings.Builder
	if err := printFuzz(&b, s, rep, false); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "2 restarts in 2.5s, 3 history operations maybe applied, 4 writes refused\n") {
		t.Errorf("text summary:\n%s", got)
	}
	b.Reset()
	if err := printFuzz(&b, s, rep, true); err != nil {
		t.Fatal(err)
	}
	m := sharedSummary(t, "fuzz", b.String())
	if m["restarts"] != 2.0 || m["restart_seconds"] != 2.5 || m["maybe_applied"] != 3.0 || m["refused_writes"] != 4.0 {
		t.Errorf("JSON summary: %s", b.String())
	}
}

// TestConformOutHoldsJUnit: --out holds junit.xml even when --junit
// writes it elsewhere too.
func TestConformOutHoldsJUnit(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "elsewhere.xml")
	out := filepath.Join(dir, "out")
	if got, code := cascade(t, "conform", "--target", "model", "--labels", "protection", "-q", "--junit", junit, "--out", out); code != 0 {
		t.Fatalf("exit %d\n%s", code, got)
	}
	for _, p := range []string{junit, filepath.Join(out, "junit.xml"), filepath.Join(out, "summary.json")} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
}

// TestRenderEmbedded: render takes an embedded trace's name, as replay
// does.
func TestRenderEmbedded(t *testing.T) {
	html := filepath.Join(t.TempDir(), "o.html")
	if out, code := cascade(t, "render", "race/orphan-adoption", "--html", html); code != 0 || !strings.Contains(out, "wrote "+html) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if out, code := cascade(t, "render", "race/no-such-trace", "--html", html); code != 2 || !strings.Contains(out, "no embedded trace of that name") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestEmptyKubebuilderAssets: binaries missing from the directory
// $KUBEBUILDER_ASSETS names are a usage error whose advice works there:
// 'make kube' alone would build into bin/kube, which the harness does not
// read while the variable is set.
func TestEmptyKubebuilderAssets(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", empty)
	out, code := cascade(t, "replay", "--target", "upstream", "scenario/background")
	if code != 2 || !strings.Contains(out, "etcd not found in "+empty) || !strings.Contains(out, "unset it") || strings.Count(out, "\n") > 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
