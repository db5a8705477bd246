package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestCheckUniverse: --universe explores every initial graph of the
// scopes universe in upstream mode: every violation class it finds is a
// known upstream race (exit 0), each listed with its initial graph and
// written as a trace that names the universe and the known race; the
// JSON lists the same classes and the number of initial states.
func TestCheckUniverse(t *testing.T) {
	dir := t.TempDir()
	out, code := cascade(t, "check", "--universe", "scopes", "--out", dir, "-q")
	if code != 0 || !strings.Contains(out, "154 initial states; 6 violation classes") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "scopes-*_*_*.trace"))
	if len(files) != 6 {
		t.Fatalf("%d class traces in %s, want 6", len(files), dir)
	}
	for _, f := range files {
		if !strings.Contains(out, f) {
			t.Errorf("the class table does not name %s", f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "# found-by: cascade check --universe scopes") || !strings.Contains(string(b), "# known: ") {
			t.Errorf("%s: no found-by or known header:\n%s", f, b)
		}
	}
	out, code = cascade(t, "check", "--universe", "scopes", "--out", dir, "-q", "--json")
	var res struct {
		Roots   int `json:"initial_states"`
		Classes []struct {
			Class, Known string
			Graph        string `json:"initial_graph"`
		} `json:"classes"`
	}
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&res); err != nil || code != 0 || res.Roots != 154 || len(res.Classes) != 6 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	for _, c := range res.Classes {
		if c.Known == "" || c.Graph == "" || !strings.Contains(c.Class, c.Known) {
			t.Errorf("class %+v: no known race or initial graph", c)
		}
	}
}

// TestCheckUniverseReduction: a universe is searched with sleep sets
// unless --no-reduction, and the output says which search ran, with the
// unreduced counts beside the reduced ones; a preset never is.
func TestCheckUniverseReduction(t *testing.T) {
	dir := t.TempDir()
	out, code := cascade(t, "check", "--universe", "relist", "--out", dir, "-q")
	if code != 0 || !strings.Contains(out, "reduction: sleep sets, 1239 transitions skipped (unreduced: 4665 distinct states, 12897 transitions)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = cascade(t, "check", "--universe", "relist", "--out", dir, "-q", "--no-reduction", "--json")
	if code != 0 || !strings.Contains(out, `"reduction": "none"`) || !strings.Contains(out, `"transitions_skipped": 0`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = cascade(t, "check", "--preset", "relist", "--out", dir, "-q")
	if !strings.Contains(out, "reduction: none") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestCheckPresetReductionOptIn: --reduction searches a preset with sleep
// sets: the same states and the same counterexample, fewer transitions;
// with --no-reduction too it is a usage error.
func TestCheckPresetReductionOptIn(t *testing.T) {
	args := []string{"check", "--preset", "orphan-unseen", "-q", "--json"}
	plainOut, code := cascade(t, append(args, "--out", t.TempDir())...)
	var plain, red checkSummary
	if err := json.Unmarshal([]byte(plainOut), &plain); err != nil || code != 0 {
		t.Fatalf("unreduced: exit %d, %v\n%s", code, err, plainOut)
	}
	redOut, code := cascade(t, append(args, "--out", t.TempDir(), "--reduction")...)
	if err := json.Unmarshal([]byte(redOut), &red); err != nil || code != 0 {
		t.Fatalf("reduced: exit %d, %v\n%s", code, err, redOut)
	}
	if !strings.Contains(redOut, `"reduction": "sleep-sets"`) || red.Distinct != plain.Distinct || red.Skipped == 0 || red.Generated+red.Skipped != plain.Generated {
		t.Errorf("reduced: %d states, %d transitions + %d skipped; unreduced %d states, %d transitions\n%s", red.Distinct, red.Generated, red.Skipped, plain.Distinct, plain.Generated, redOut)
	}
	if len(red.Violations) == 0 || len(red.Violations) != len(plain.Violations) || !slices.Equal(red.Violations[0].Steps, plain.Violations[0].Steps) {
		t.Errorf("reduced counterexamples %v, unreduced %v", red.Violations, plain.Violations)
	}
	out, code := cascade(t, "check", "--preset", "orphan-unseen", "--reduction", "--no-reduction")
	if code != 2 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "--reduction and --no-reduction") {
		t.Errorf("both flags: exit %d, %q", code, out)
	}
}

// TestInterruptedCheckPrintsJSON: `cascade check --json` interrupted
// mid-search exits 130 and still prints JSON on stdout, the shared
// summary with result interrupted and no finding, and writes no trace.
func TestInterruptedCheckPrintsJSON(t *testing.T) {
	out := t.TempDir()
	p := exec.Command(os.Args[0])
	p.Env = append(os.Environ(), asCascade+"="+strings.Join([]string{"check", "--universe", "trio", "--workers", "1", "--json", "--out", out}, " "))
	var stdout bytes.Buffer
	p.Stdout = &stdout
	stderr, err := p.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	// The release note comes before the search starts; a progress line
	// once it has run a second.
	lines := bufio.NewScanner(stderr)
	for i := 0; i < 2 && lines.Scan(); i++ {
	}
	if err := p.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	err = p.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want 130\n%s", err, stdout.String())
	}
	var got map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if got["result"] != summaryInterrupted || got["command"] != "check" || got["violations"] != nil {
		t.Fatalf("summary: %v", got)
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Fatalf("an interrupted check wrote %d files in --out", len(entries))
	}
}

// TestClosedStdoutIsNoSIGPIPE: a closed stdout (`cascade replay ... |
// head -1`) does not kill cascade with SIGPIPE: the failed write stops
// the run as an interrupt does (exit 130), so that cascade still stops
// what it started (a control plane and its directory).
func TestClosedStdoutIsNoSIGPIPE(t *testing.T) {
	p := exec.Command(os.Args[0])
	p.Env = append(os.Environ(), asCascade+"=replay --target model race/orphan-adoption race/kubernetes-26120 race/foreground-ended")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.Stdout = w
	_ = r.Close() // nobody reads: the first write fails
	err = p.Run()
	_ = w.Close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("exit: %v, want 130 (stopped as on an interrupt)", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("cascade died of %v on a closed stdout", ws.Signal())
	}
	if ee.ExitCode() != 130 {
		t.Fatalf("exit %d, want 130 (stopped as on an interrupt)", ee.ExitCode())
	}
}
