package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The longest runs start first, so that none of them waits behind the
// short ones; every suite process runs only the suite, on its one target.
func TestPhasesRunLongestFirst(t *testing.T) {
	ps := phases(config{targets: suiteTargets, fuzz: []string{"upstream", "impl"}, checks: 10, seed: 1, out: "out/conform", timeout: time.Minute})
	want := []string{"suite upstream", "suite impl", "fuzz upstream", "fuzz impl", "suite impl-stepped", "suite upstream-stepped", "suite model"}
	if got := strings.Split(names(ps), ", "); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("order %v, want %v", got, want)
	}
	args := strings.Join(ps[0].args, " ")
	for _, a := range []string{"-test.run=^TestScenarios$", "-targets=upstream", "-ginkgo.junit-report=out/conform/junit-upstream.xml", "-summary=out/conform/summary-upstream.json"} {
		if !strings.Contains(args, a) {
			t.Errorf("suite upstream runs %q, without %s", args, a)
		}
	}
	if args := strings.Join(ps[2].args, " "); args != "bin/cascade fuzz --target upstream --checks 10 --seed 1 --out out/conform/fuzz-upstream --json" {
		t.Errorf("fuzz upstream runs %q", args)
	}
}

// On kine, every envtest run gets the datastore: the suite as -datastore,
// cascade fuzz as --datastore.
func TestPhasesPassTheDatastore(t *testing.T) {
	ps := phases(config{targets: []string{"upstream"}, fuzz: []string{"impl"}, checks: 1, seed: 1, out: "o", timeout: time.Minute, datastore: "kine"})
	if args := strings.Join(ps[0].args, " "); !strings.HasSuffix(args, " -datastore=kine") {
		t.Errorf("suite upstream runs %q, without -datastore=kine", args)
	}
	if args := strings.Join(ps[1].args, " "); args != "bin/cascade fuzz --target impl --checks 1 --seed 1 --out o/fuzz-impl --json --datastore kine" {
		t.Errorf("fuzz impl runs %q", args)
	}
}

func TestTargetListsAreChecked(t *testing.T) {
	if got, err := list("-targets", "upstream, model,upstream", suiteTargets); err != nil || strings.Join(got, ",") != "upstream,model" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := list("-fuzz-targets", "model", fuzzTargets); err == nil || !strings.Contains(err.Error(), `-fuzz-targets: unknown target "model"`) {
		t.Errorf("fuzzing the model was accepted: %v", err)
	}
}

// Lines of concurrent processes never mix: each is relayed whole, with
// its prefix, and a last line without a newline comes out at the end.
func TestLineWriterRelaysWholeLines(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	l := &lineWriter{w: &out, mu: &mu, prefix: "fuzz impl: "}
	for _, chunk := range []string{"run 1: p", "ass\nrun 2", ": pass\n", "done"} {
		l.Write([]byte(chunk))
	}
	l.flush()
	if want := "fuzz impl: run 1: pass\nfuzz impl: run 2: pass\nfuzz impl: done\n"; out.String() != want {
		t.Fatalf("relayed %q, want %q", out.String(), want)
	}
}

// A phase that exits 1 fails the gate and names its log; one that never
// started because of an interrupt does not count as a failure.
func TestTableNamesFailures(t *testing.T) {
	exit1 := exec.CommandContext(context.Background(), "sh", "-c", "exit 1").Run()
	ps := []*phase{
		{name: "suite upstream", ran: true, wall: 2 * time.Second, counts: map[string]int{"passed": 20, "failed": 1, "skipped": 40}, stdout: "out/conform/suite-upstream.log", report: "out/conform/junit-upstream.xml", err: exit1},
		{name: "suite impl", ran: true, wall: time.Second, counts: map[string]int{"passed": 21}},
		{name: "fuzz impl"},
	}
	var out bytes.Buffer
	if !printTable(&out, ps, false) {
		t.Fatal("a failed suite did not fail the gate")
	}
	for _, want := range []string{
		"suite upstream  fail         20      1       0       40       2s    out/conform/junit-upstream.xml",
		"suite impl      pass         21      0       0       0        1s",
		"fuzz impl       interrupted",
		"conform: suite upstream: fail (exit status 1); its whole output is in out/conform/suite-upstream.log",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if printTable(&bytes.Buffer{}, ps[1:], true) {
		t.Error("an interrupted run counted as a failure")
	}
}

// A summary left by an earlier run does not count for a run that wrote
// none.
func TestCountsComeFromThisRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary-impl.json")
	if err := os.WriteFile(path, []byte(`{"impl": {"passed": 3, "failed": 0, "errors": 0, "skipped": 2, "seconds": 1.5}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := readCounts(path, "impl", time.Now().Add(-time.Minute)); c["passed"] != 3 || c["skipped"] != 2 {
		t.Errorf("this run's counts: %v", c)
	}
	if c := readCounts(path, "impl", time.Now().Add(time.Minute)); c != nil {
		t.Errorf("an earlier run's summary counted: %v", c)
	}
}

// A fuzz row's counts come from its --json summary: runs passed, the
// failing run, the inconclusive ones; none from an earlier run's file or
// from output that is not a summary.
func TestFuzzCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fuzz-impl.json")
	if err := os.WriteFile(path, []byte(`{"command": "fuzz", "result": "fail", "runs": 7, "runs_passed": 5, "inconclusive_runs": ["run 3 (9 steps, 20 ops): ..."]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := readFuzzCounts(path, time.Now().Add(-time.Minute)); c["passed"] != 5 || c["failed"] != 1 || c["errors"] != 1 {
		t.Errorf("counts: %v", c)
	}
	if c := readFuzzCounts(path, time.Now().Add(time.Minute)); c != nil {
		t.Errorf("an earlier run's summary counted: %v", c)
	}
	if err := os.WriteFile(path, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := readFuzzCounts(path, time.Now().Add(-time.Minute)); c != nil {
		t.Errorf("counts from no summary: %v", c)
	}
}
