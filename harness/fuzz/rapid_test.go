package fuzz

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/model"
)

// flagSet is what a campaign could change of the process-wide flag set:
// every flag's value, the flags marked set, whether it was parsed, and its
// arguments.
func flagSet() string {
	var b strings.Builder
	flag.VisitAll(func(f *flag.Flag) { fmt.Fprintf(&b, "%s=%s\n", f.Name, f.Value) })
	flag.Visit(func(f *flag.Flag) { fmt.Fprintf(&b, "set %s\n", f.Name) })
	fmt.Fprintf(&b, "parsed %v args %q\n", flag.Parsed(), flag.Args())
	return b.String()
}

// withBug is a stepped campaign on the model with bug switched on in the
// target's place: it fails within a few runs, without a cluster.
func withBug(t *testing.T, bug string) SteppedEnv {
	t.Helper()
	b, err := model.BugByName(bug)
	if err != nil {
		t.Fatal(err)
	}
	return SteppedEnv{Target: "model", Surrogate: model.BugSet(0).With(b), AdopterKinds: SteppedAdopterKinds}
}

// runStepped runs a stepped campaign and fails the test on an error.
func runStepped(t *testing.T, env SteppedEnv, cfg Config) *Report {
	t.Helper()
	if cfg.Universe.Names == nil {
		cfg.Universe = DefaultUniverse
	}
	rep, err := RunStepped(context.Background(), env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A campaign leaves the process-wide flag set as it found it, whether it
// fails (and rapid writes a fail file), passes, or runs a shard: rapid's
// settings get their values back and no flag is marked set. The fail
// file's directories under the working directory are gone again.
func TestCampaignLeavesTheFlagSetAlone(t *testing.T) {
	t.Chdir(t.TempDir()) // rapid writes its fail files under the working directory
	before := flagSet()
	failing := runStepped(t, withBug(t, "uid-only-identity"), Config{Checks: 100, Steps: 30, Seed: 1, ShrinkTime: time.Second, Out: t.TempDir()})
	if failing.Failure == nil || failing.Failure.FailFile == "" {
		t.Fatalf("the campaign with uid-only-identity found no failure or wrote no fail file: %+v", failing.Failure)
	}
	if rep := runStepped(t, SteppedEnv{Target: "model"}, Config{Checks: 3, Steps: 10, Seed: 1}); rep.Failure != nil {
		t.Fatalf("the model failed against itself: %s", rep.Failure.Summary)
	}
	runStepped(t, SteppedEnv{Target: "model"}, Config{Checks: 4, Steps: 10, Seed: 1, Shard: Shard{Index: 1, Count: 2}})
	if after := flagSet(); after != before {
		t.Errorf("the flag set changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if left, _ := os.ReadDir("."); len(left) > 0 {
		t.Errorf("left in the working directory: %v", left)
	}
}

// A failure's seed runs the failing run first: it is the seed rapid's loop
// gave the run (RunSeed), from cascade's count of the runs.
func TestFailureSeedRunsTheFailureFirst(t *testing.T) {
	env := withBug(t, "uid-only-identity")
	rep := runStepped(t, env, Config{Checks: 100, Steps: 30, Seed: 1, ShrinkTime: time.Second})
	f := rep.Failure
	if f == nil || f.Run < 2 {
		t.Fatalf("want a failure after the first run (run 8 when written): %+v", f)
	}
	if want := RunSeed(1, f.Run-1); f.Seed != want {
		t.Fatalf("failure in run %d has seed %d, want %d", f.Run, f.Seed, want)
	}
	// Checks 5: one check under -short, where rapid runs a fifth
	again := runStepped(t, env, Config{Checks: 5, Steps: 30, Seed: f.Seed, ShrinkTime: time.Second})
	if again.Failure == nil || again.Failure.Run != 1 || again.Failure.Kind != f.Kind || again.Failure.Seed != f.Seed {
		t.Fatalf("seed %d: %+v, want a %s failure in run 1 with that seed", f.Seed, again.Failure, f.Kind)
	}
}

// Replaying a fail file that fails again leaves the file where it is, and
// the failure names it; only fail files rapid writes for the campaign go
// to --out.
func TestReplayedFailFileStaysWhereItIs(t *testing.T) {
	t.Chdir(t.TempDir())
	env := withBug(t, "uid-only-identity")
	first := runStepped(t, env, Config{Checks: 100, Steps: 30, Seed: 1, ShrinkTime: time.Second, Out: t.TempDir()})
	if first.Failure == nil || first.Failure.FailFile == "" {
		t.Fatalf("no failure with a fail file: %+v", first.Failure)
	}
	data, err := os.ReadFile(first.Failure.FailFile)
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(t.TempDir(), "mine.fail")
	if err := os.WriteFile(mine, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	rep := runStepped(t, env, Config{Checks: 100, Steps: 30, Seed: 1, ShrinkTime: time.Second, Out: out, FailFile: mine})
	if rep.Failure == nil {
		t.Fatal("the fail file passed on replay")
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("the replayed fail file is gone: %v", err)
	}
	if rep.Failure.FailFile != mine {
		t.Errorf("failure names fail file %q, want the replayed %q", rep.Failure.FailFile, mine)
	}
	if moved, _ := filepath.Glob(filepath.Join(out, "*.fail")); len(moved) > 0 {
		t.Errorf("fail files in --out: %v", moved)
	}
}

// What rapid prints is not read: a failure whose message looks like
// rapid's reproduction hint gets the seed of the check that failed, the
// fail file rapid wrote for the campaign, and the message the run gave,
// as it gave it (a run that could not be set up fails so, without a
// runFailure).
func TestOutcomeIsCascadesOwnRecord(t *testing.T) {
	t.Chdir(t.TempDir())
	calls := 0
	out, err := runRapid("outcome-test", Config{Checks: 10, Steps: 1, Seed: 5, ShrinkTime: time.Second, Out: "unused"}, func(rt *rapid.T) {
		calls++
		if calls >= 2 { // two checks of ten: under -short rapid runs a fifth
			rt.Fatalf(`-rapid.seed=7 -rapid.failfile="elsewhere.fail"`)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.failed || out.seed != RunSeed(5, 1) {
		t.Errorf("failed %v with seed %d, want failed with seed %d (the second check's)", out.failed, out.seed, RunSeed(5, 1))
	}
	if dir := filepath.Dir(out.failFile); !strings.HasPrefix(dir, filepath.Join("testdata", "rapid", "outcome-test-")) {
		t.Errorf("fail file %q, want one in the campaign's own directory", out.failFile)
	}
	if want := `-rapid.seed=7 -rapid.failfile="elsewhere.fail"`; out.message() != want {
		t.Errorf("message %q, want the run's own %q", out.message(), want)
	}
}

// A run that panics fails the campaign, and the report is the panic, as
// cascade recovered it.
func TestOutcomeOfAPanic(t *testing.T) {
	calls := 0
	out, err := runRapid("panic-test", Config{Checks: 10, Steps: 1, Seed: 5, ShrinkTime: time.Second}, func(rt *rapid.T) {
		calls++
		if calls >= 2 {
			panic("boom")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.failed || out.seed != RunSeed(5, 1) || !strings.HasPrefix(out.message(), "panic: boom\n") {
		t.Errorf("failed %v, seed %d, message %q; want failed, seed %d, the panic", out.failed, out.seed, out.message(), RunSeed(5, 1))
	}
}

// A fail file's run is the whole campaign: replayed where it passes (the
// model without the bug that failed it), it is one passing run and no
// random runs follow. A fail file rapid will not replay (another format
// version) is an error naming it, with no run at all, where rapid itself
// would only log it and go on to random runs.
func TestFailFileReplaysOneRunOrFails(t *testing.T) {
	t.Chdir(t.TempDir())
	first := runStepped(t, withBug(t, "uid-only-identity"), Config{Checks: 100, Steps: 30, Seed: 1, ShrinkTime: time.Second, Out: t.TempDir()})
	if first.Failure == nil || first.Failure.FailFile == "" {
		t.Fatalf("no failure with a fail file: %+v", first.Failure)
	}
	rep := runStepped(t, SteppedEnv{Target: "model", AdopterKinds: SteppedAdopterKinds}, Config{Checks: 100, Steps: 30, Seed: 1, FailFile: first.Failure.FailFile})
	if rep.Failure != nil || rep.Checks != 1 {
		t.Errorf("the fail file on the model without the bug: %d runs, failure %+v; want its one run, passing", rep.Checks, rep.Failure)
	}

	data, err := os.ReadFile(first.Failure.FailFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if l != "" && !strings.HasPrefix(l, "#") {
			_, seed, _ := strings.Cut(l, "#")
			lines[i] = "v0.0.1#" + seed // another format version
			break
		}
	}
	other := filepath.Join(t.TempDir(), "other.fail")
	if err := os.WriteFile(other, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckFailFile(other); err != nil {
		t.Fatalf("CheckFailFile refuses a well-formed file: %v", err)
	}
	rep, err = RunStepped(context.Background(), SteppedEnv{Target: "model", AdopterKinds: SteppedAdopterKinds}, Config{Checks: 100, Steps: 30, Seed: 1, FailFile: other})
	var ffErr *FailFileError
	if !errors.As(err, &ffErr) || !strings.Contains(err.Error(), "version") || rep.Checks != 0 {
		t.Errorf("a fail file of another rapid version: %d runs, error %v; want no run and a FailFileError", rep.Checks, err)
	}
}

// CheckFailFile refuses, before anything starts, what is not a fail file.
func TestCheckFailFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.fail"): "no such file",
		dir:                                "not a regular file",
		write("empty.fail", ""):            "no VERSION#SEED line",
		write("comments.fail", "# only\n# comments\n"):     "no VERSION#SEED line",
		write("trace.fail", "create cm/a\n"):               "not rapid's VERSION#SEED line",
		write("draws.fail", "v0.4.8#7\n0x1f\nforty-two\n"): "line 3",
	} {
		err := CheckFailFile(path)
		var ffErr *FailFileError
		if !errors.As(err, &ffErr) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("CheckFailFile(%s) = %v, want an error naming it and saying %q", filepath.Base(path), err, want)
		}
	}
	if err := CheckFailFile(write("good.fail", "# a comment\nv0.4.8#7\n0x1f\n0\n")); err != nil {
		t.Errorf("a well-formed fail file: %v", err)
	}
}
