package fuzz

import (
	"flag"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// rapid's settings, the one place cascade reaches process-wide state.
//
// rapid v1.3.0 (the newest release) has no API that takes settings: its
// Check reads the number of checks, the seed, the shrink time and the fail
// file from package variables that its init registers as flags on
// flag.CommandLine (-rapid.checks and so on; the RAPID_* environment
// variables are read once, at init), and Repeat reads the average number
// of steps from the same place. Check also calls testing.Short, which
// panics unless testing.Init has registered the testing flags on
// flag.CommandLine and flag.CommandLine has been parsed. rapid's other
// entry points take no settings either, and cannot shrink: MakeFuzz wants
// a *testing.T, and Generator.Example runs once, without shrinking.
//
// So withRapidSettings, alone in cascade, sets those variables, through
// the flag.Value that rapid registered, without marking the flags set,
// and puts their values back when the check returns; rapidMu keeps two
// campaigns from sharing them. The one lasting change is rapidReady's:
// outside `go test` it registers the testing flags and marks
// flag.CommandLine parsed (cascade's own command line is cobra's). Nothing
// reads rapid's failure text: what a campaign came to is cascade's own
// record (rapidOutcome).

// rapidMu serializes campaigns: rapid's settings are process-wide.
var rapidMu sync.Mutex

// rapidSettings are the settings of one rapid.Check.
type rapidSettings struct {
	checks, steps int
	seed          uint64
	shrinkTime    time.Duration
	failFile      string
	noFailFile    bool
}

// flags are the settings by the name of rapid's flag.
func (s rapidSettings) flags() map[string]string {
	return map[string]string{
		"rapid.checks":     strconv.Itoa(s.checks),
		"rapid.steps":      strconv.Itoa(s.steps),
		"rapid.seed":       strconv.FormatUint(s.seed, 10),
		"rapid.shrinktime": s.shrinkTime.String(),
		"rapid.failfile":   s.failFile,
		"rapid.nofailfile": strconv.FormatBool(s.noFailFile),
	}
}

// withRapidSettings runs check with rapid's settings s and restores the
// values they had. The caller holds rapidMu.
func withRapidSettings(s rapidSettings, check func()) (err error) {
	if err := rapidReady(); err != nil {
		return err
	}
	old := map[string]string{}
	defer func() {
		for name, v := range old {
			if e := flag.Lookup(name).Value.Set(v); e != nil && err == nil {
				err = fmt.Errorf("fuzz: restoring rapid's %s=%s: %w", name, v, e)
			}
		}
	}()
	for name, v := range s.flags() {
		f := flag.Lookup(name)
		if f == nil {
			return fmt.Errorf("fuzz: rapid has no setting %s", name)
		}
		old[name] = f.Value.String()
		if err := f.Value.Set(v); err != nil {
			return fmt.Errorf("fuzz: rapid setting %s=%s: %w", name, v, err)
		}
	}
	check()
	return nil
}

// rapidReady makes testing.Short callable, as rapid.Check needs: the
// testing flags registered and flag.CommandLine parsed. Under `go test`
// both are done already and it changes nothing.
func rapidReady() error {
	testing.Init() // a no-op when it has run
	if flag.Parsed() {
		return nil
	}
	return flag.CommandLine.Parse(nil)
}
