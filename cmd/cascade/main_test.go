package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model/check"
)

// cascade runs the CLI in-process and returns stdout and the exit code.
func cascade(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	code := 0
	if err != nil {
		code = 2
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		out.WriteString("error: " + err.Error())
	}
	return out.String(), code
}

// TestCheckFindsTheAdoptionRace is the acceptance run: the
// orphan-adoption preset with the adoption recheck switched off yields an
// 8-step counterexample, exit 1, and a trace file that replays.
func TestCheckFindsTheAdoptionRace(t *testing.T) {
	dir := t.TempDir()
	out, code := cascade(t, "check", "--preset", "orphan-adoption", "--bug", "adopt-without-recheck", "--out", dir, "-q")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "orphan respected") || !strings.Contains(out, "VIOLATED in 8 steps") {
		t.Fatalf("output:\n%s", out)
	}
	file := filepath.Join(dir, "orphan-adoption-adopt-without-recheck-orphan-respected.trace")
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	if out, code := cascade(t, "replay", file); code != 0 || !strings.Contains(out, "1 passed, 0 failed") {
		t.Fatalf("replay of the counterexample: exit %d\n%s", code, out)
	}
	html := filepath.Join(dir, "ce.html")
	if out, code := cascade(t, "render", file, "--html", html); code != 0 {
		t.Fatalf("render: exit %d\n%s", code, out)
	}
}

// TestCheckUpstreamJSON: upstream mode holds in a preset (exit 0; its
// 127 states are model/check's TestDistinctStatesPinned's), and
// --json is machine-readable with the witnessed reachability.
func TestCheckUpstreamJSON(t *testing.T) {
	out, code := cascade(t, "check", "--preset", "foreground-cycle", "--json", "-q", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var res struct {
		Distinct   int64    `json:"distinct_states"`
		Violations []any    `json:"violations"`
		Witnessed  []string `json:"witnessed"`
		Complete   bool     `json:"complete"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Distinct != 127 || len(res.Violations) != 0 || !res.Complete || !strings.Contains(strings.Join(res.Witnessed, ","), "a cycle is broken") {
		t.Fatalf("unexpected result %+v", res)
	}
}

// TestKnownRaceIsNotAFailure: a documented upstream race is reported but
// exits 0, unless --strict.
func TestKnownRaceIsNotAFailure(t *testing.T) {
	out, code := cascade(t, "check", "--preset", "orphan-unseen", "-q", "--out", t.TempDir())
	if code != 0 || !strings.Contains(out, "known upstream race kubernetes#26120") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, code := cascade(t, "check", "--preset", "orphan-unseen", "-q", "--strict", "--out", t.TempDir()); code != 1 {
		t.Fatalf("--strict exit %d, want 1", code)
	}
}

// TestUsageErrors exit 2 with a message naming what is wrong.
func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{"check"},
		{"check", "--preset", "nope"},
		{"check", "--preset", "relist", "--bug", "nope"},
		{"check", "--preset", "relist", "--op", "delete cm/x"},
		{"check", "--setup", "explode cm/x"},
		{"check", "--preset", "relist", "--constraint", "colour<3"},
		{"check", "--setup", "create cm/a", "--op", "delete cm/a", "--constraint", "objects.cm<0"},
		{"check", "--setup", "create cm/a", "--op", "delete cm/a", "--constraint", "objects.cm<=0", "--constraint", "events<=3"},
		{"check", "--preset", "relist", "--max-depth", "x"},
		{"check", "--universe", "nope"},
		{"check", "--universe", "pair", "--preset", "relist"},
		{"check", "--universe", "pair", "--op", "delete cm/a"},
		{"render", "missing.trace", "--html", "x.html"},
		{"render", "../../traces/races/orphan-adoption.trace"},
		{"replay", "--target", "upstream", "../../traces/races/orphan-adoption.trace"},
		{"replay", "--target", "nope", "../../traces/scenarios/background.trace"},
		{"check", "--preset", "relist", "--workers", "100000"},
		{"render", "../../traces/scenarios/background.trace", "--dot", "x.dot", "--step", "-5"},
		{"render", "../../traces/scenarios/background.trace", "--html", "x.html", "--step", "3"},
		{"fuzz", "--target", "impl", "--shrink-time", "-1s"},
		{"fuzz", "--target", "nope"},
		{"fuzz", "--target", "impl", "--failfile", "no-such.fail"},
		{"conform", "--target", "impl", "--fuzz-clients", "0"},
		{"conform", "--target", "impl", "--fuzz-checks", "-1"},
		{"conform", "--list", "--target", "nope"},
		{"conform", "--list", "--labels", "nope"},
		{"help", "nope"},
	}
	for _, args := range cases {
		out, code := cascade(t, args...)
		if code != 2 || !strings.Contains(out, "error: ") {
			t.Errorf("%v: exit %d, want 2 with an error:\n%s", args, code, out)
		}
	}
}

// TestCheckVacuousOpFails: an op on an object that never exists makes
// the check vacuous: exit 1, said in the text and in the JSON, although
// every property holds.
func TestCheckVacuousOpFails(t *testing.T) {
	out, code := cascade(t, "check", "--setup", "create cm/a", "--op", "delete cm/x", "-q")
	if code != 1 || !strings.Contains(out, `VACUOUS: op "delete cm/x" never reached an object`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = cascade(t, "check", "--setup", "create cm/a", "--op", "delete cm/x", "-q", "--json")
	var res struct {
		VacuousScope string   `json:"vacuous_scope"`
		NeverReached []string `json:"never_reached"`
	}
	// the JSON, then the harness's "error:" line for exit 1
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&res); err != nil || code != 1 || len(res.NeverReached) != 1 || res.VacuousScope == "" {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
}

// TestReplayReportsDivergence: a wrong expectation fails with the file,
// the stanza and the difference.
func TestReplayReportsDivergence(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.trace")
	if err := os.WriteFile(bad, []byte("create cm/a\n----\ncm/a gone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := cascade(t, "replay", bad)
	if code != 1 || !strings.Contains(out, "bad.trace:2: stanza 1") || !strings.Contains(out, "+ cm/a live") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestLists: the catalogue listings explain every entry.
func TestLists(t *testing.T) {
	out, _ := cascade(t, "check", "--list-bugs")
	if strings.Count(out, "breaks ") != 11 || !strings.Contains(out, "kubernetes#42639") {
		t.Errorf("--list-bugs:\n%s", out)
	}
	out, _ = cascade(t, "check", "--list-properties")
	if !strings.Contains(out, "orphan respected (always)") || !strings.Contains(out, "garbage is collected (quiescent)") {
		t.Errorf("--list-properties:\n%s", out)
	}
	out, _ = cascade(t, "check", "--list-universes")
	for _, u := range check.Universes {
		if !strings.Contains(out, u.Name+"\n") || !strings.Contains(out, fmt.Sprintf("graphs      %d up to symmetry", len(u.InitialGraphs()))) {
			t.Errorf("--list-universes lacks %s or its graph count:\n%s", u.Name, out)
		}
	}
	out, _ = cascade(t, "check", "--list-presets")
	if !strings.Contains(out, "orphan-adoption") || !strings.Contains(out, "op     delete deploy/web propagation=Orphan") {
		t.Errorf("--list-presets:\n%s", out)
	}
}
