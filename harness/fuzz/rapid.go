package fuzz

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

// rapidOutcome is what a campaign under rapid came to, from cascade's own
// record of the checks rapid ran: never from rapid's failure text.
type rapidOutcome struct {
	// failed: rapid failed the campaign. It found a failing run, ran it
	// again and shrank it (or was stopped while shrinking it: then it
	// reports nothing, and failed is false).
	failed bool
	// seed is the seed of the check that failed first: a campaign from
	// it fails in its first run. 0 when the failure came from replaying a
	// fail file (Config.FailFile).
	seed uint64
	// failFile is the fail file rapid wrote for the failure ("" if none).
	failFile string
	// failure is how the last failing run failed, in its own words: the
	// message it gave t.Fatalf (a run that could not be set up fails so,
	// with no runFailure), or its panic with the stack, a bug in cascade
	// rather than a verdict on the target.
	failure string
	// fresh are the directories rapid's fail file went into that did not
	// exist before the campaign, deepest first.
	fresh []string
}

// message is the failure's summary when no run recorded one of its own
// (a panic); "" when rapid passed the campaign.
func (o rapidOutcome) message() string {
	switch {
	case !o.failed:
		return ""
	case o.failure != "":
		return o.failure
	default:
		return "rapid failed the campaign without a run that failed or panicked"
	}
}

// runRapid runs prop under rapid with cfg's settings: cfg.Checks runs from
// cfg.Seed by rapid's own loop, or, with a Shard, the shard's runs one by
// one, each as rapid's only check from its own seed (RunSeed: the same
// draws as the k-th check of rapid's loop).
func runRapid(name string, cfg Config, prop func(*rapid.T)) (rapidOutcome, error) {
	var out rapidOutcome
	name, fresh := rapidName(name)
	calls, failedCall := 0, 0
	wrapped := func(t *rapid.T) {
		calls++
		done := false
		defer func() {
			if done {
				return
			}
			x := recover()
			if x == nil {
				return // runtime.Goexit (endShrinking)
			}
			defer panic(x) // rapid's to judge, as before
			if failedCall == 0 {
				failedCall = calls
			}
			if t.Failed() { // t.Fatalf: x holds the run's own message
				out.failure = fmt.Sprint(x)
			} else { // (rapid's invalid data panics too; cascade's draws never raise it)
				out.failure = fmt.Sprintf("panic: %v\n%s", x, debug.Stack())
			}
		}()
		prop(t)
		done = true
	}
	s := rapidSettings{checks: max(cfg.Checks, 1), steps: max(cfg.Steps, 1), seed: cfg.Seed,
		shrinkTime: cfg.ShrinkTime, failFile: cfg.FailFile, noFailFile: cfg.Out == ""}
	if cfg.FailFile != "" {
		// the fail file's run is the campaign: rapid goes on to random
		// runs after one that passes, or that it ignores (checkTB)
		s.checks = 0
	}
	t := &tb{name: name}
	if cfg.Shard.Count == 0 || cfg.FailFile != "" {
		if err := withRapidSettings(s, func() { rapidCheck(t, wrapped) }); err != nil {
			return out, err
		}
		switch {
		case cfg.FailFile != "" && t.ignored != "":
			return out, &FailFileError{Path: cfg.FailFile, Why: "rapid could not replay it: " + t.ignored}
		case cfg.FailFile != "" && calls == 0:
			// rapid said nothing this cascade recognises, yet replayed
			// nothing: never a pass with no run
			return out, &FailFileError{Path: cfg.FailFile, Why: "rapid did not replay it"}
		case failedCall == 0, cfg.FailFile != "":
		default:
			out.seed = RunSeed(cfg.Seed, failedCall-1)
		}
	} else {
		s.checks = 1
		for _, k := range cfg.Shard.Runs(cfg.Checks) {
			s.seed = RunSeed(cfg.Seed, k)
			if cfg.onRun != nil {
				cfg.onRun(k)
			}
			if err := withRapidSettings(s, func() { rapidCheck(t, wrapped) }); err != nil {
				return out, err
			}
			if t.Failed() {
				out.seed = s.seed
				break
			}
		}
	}
	out.failed = t.Failed()
	if !out.failed {
		out.seed = 0
		return out, nil
	}
	// every fail file in the campaign's own directory is rapid's for it
	matches, err := filepath.Glob(filepath.Join(rapidFailDir(name), "*.fail"))
	if len(matches) > 0 {
		out.failFile = matches[len(matches)-1]
	}
	out.fresh = fresh
	return out, err
}

// rapidFailDir is where rapid writes the fail files of checks named name:
// testdata/rapid/<name> under the working directory (rapid's persistence,
// which also replays every fail file there before it draws a run).
func rapidFailDir(name string) string { return filepath.Join("testdata", "rapid", name) }

// rapidName is the name of a campaign's checks: base with the process's
// ID and, if need be, a number, the first whose fail-file directory does
// not exist. So rapid replays no fail file an earlier campaign left, and
// the files there after the campaign are its own. fresh are the
// directories of rapidFailDir(name) that do not exist yet, deepest first.
func rapidName(base string) (name string, fresh []string) {
	name = fmt.Sprintf("%s-%d", base, os.Getpid())
	for i := 2; exists(rapidFailDir(name)); i++ {
		name = fmt.Sprintf("%s-%d-%d", base, os.Getpid(), i)
	}
	for d := rapidFailDir(name); d != "."; d = filepath.Dir(d) {
		if !exists(d) {
			fresh = append(fresh, d)
		}
	}
	return name, fresh
}

// exists reports whether path names a file or directory.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// rapidCheck runs rapid.Check(t, prop) on its own goroutine (a run's
// Goexit ends that goroutine, not the caller).
func rapidCheck(t *tb, prop func(*rapid.T)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(t, prop)
	}()
	<-done
}

var uidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// stable is a failure message as rapid sees it: without the run's name
// prefix and real UIDs, which differ from one run to the next. rapid
// shrinks a failure only towards runs that fail with the same message.
func stable(msg string, d interface{ Prefix() string }) string {
	if d != nil {
		msg = strings.ReplaceAll(msg, d.Prefix()+"-", "")
	}
	return uidRE.ReplaceAllString(msg, "UID")
}

// tb is the rapid.TB of a campaign outside `go test`: it records that a
// check failed, and ends the checking goroutine on FailNow, as testing.T
// does. What rapid writes to it is not read (the failure is the runs'
// own record), but for the one thing rapid only logs: that it did not
// replay the fail file it was given.
type tb struct {
	name   string
	mu     sync.Mutex
	failed bool
	// ignored is why rapid did not replay its fail file, from its log
	// (checkFailFile: "[rapid] ignoring fail file: ...", "[rapid] fail
	// file ... is no longer valid")
	ignored string
}

var _ rapid.TB = (*tb)(nil)

func (t *tb) Helper()      {}
func (t *tb) Name() string { return t.name }
func (t *tb) Logf(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); strings.HasPrefix(msg, "[rapid] ignoring fail file") || strings.Contains(msg, "is no longer valid") {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.ignored = strings.TrimPrefix(msg, "[rapid] ")
	}
}
func (t *tb) Log(...any)            {}
func (t *tb) Skipf(string, ...any)  { runtime.Goexit() }
func (t *tb) Skip(...any)           { runtime.Goexit() }
func (t *tb) SkipNow()              { runtime.Goexit() }
func (t *tb) Error(...any)          { t.Fail() }
func (t *tb) Errorf(string, ...any) { t.Fail() }
func (t *tb) Fatal(...any)          { t.FailNow() }
func (t *tb) Fatalf(string, ...any) { t.FailNow() }
func (t *tb) FailNow()              { t.Fail(); runtime.Goexit() }
func (t *tb) Fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}
func (t *tb) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// moveFailFile moves rapid's fail file into dir and removes the
// directories rapid made for it (fresh) once they are empty.
func moveFailFile(path, dir string, fresh []string) (string, error) {
	if path == "" || dir == "" {
		return path, nil
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := artifact.Move(path, dst); err != nil {
		return path, err
	}
	for _, d := range fresh {
		if os.Remove(d) != nil { // not empty: stop
			break
		}
	}
	return dst, nil
}
