package traces

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// TestKnownRaceTraces: every trace fixture of the known-race registry
// (model.KnownRaces) replays as it expects with its entry on, and with the
// entry disabled the same replay breaks a property unexcused: the excuse
// is what lets the fixture pass. A fixture under races/ names the entry
// in its `# known:` header; one under scenarios/ shows a carve-out the
// entry governs, which reports nothing.
func TestKnownRaceTraces(t *testing.T) {
	for _, k := range model.KnownRaces {
		for _, f := range k.Fixtures {
			if model.FixtureKind(f) != "trace" {
				continue
			}
			t.Run(k.ID+"/"+filepath.Base(f), func(t *testing.T) {
				tr, err := ParseFile(strings.TrimPrefix(f, "traces/"))
				if err != nil {
					t.Fatal(err)
				}
				if got := tr.Header(HeaderKnown); strings.HasPrefix(f, "traces/races/") && got != k.ID {
					t.Errorf("the fixture's `# known:` header is %q, want %q", got, k.ID)
				}
				results, _, err := Replay(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := Diff(tr, results); err != nil {
					t.Fatalf("the fixture fails with its entry on: %v", err)
				}
				restore, err := model.DisableKnownRace(k.ID)
				if err != nil {
					t.Fatal(err)
				}
				defer restore()
				results, _, err = Replay(tr)
				if err != nil {
					t.Fatal(err)
				}
				if Diff(tr, results) == nil {
					t.Fatalf("the fixture passes with %s disabled", k.ID)
				}
				if !slices.ContainsFunc(results, func(r StanzaResult) bool {
					return slices.ContainsFunc(r.Violations, func(v *model.Violation) bool { return v.Known == "" })
				}) {
					t.Errorf("with %s disabled the replay breaks no property unexcused", k.ID)
				}
			})
		}
	}
}

// TestKnownHeadersAreRegistered: a trace's `# known:` header names a
// registry entry, and a trace under races/ with one is among that
// entry's fixtures.
func TestKnownHeadersAreRegistered(t *testing.T) {
	for _, path := range traceFiles(t) {
		tr, err := ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id := tr.Header(HeaderKnown)
		if id == "" {
			continue
		}
		k, ok := model.KnownRaceByID(id)
		if !ok {
			t.Errorf("%s: `# known: %s` is not in the registry", path, id)
			continue
		}
		if strings.HasPrefix(path, "races/") && !slices.Contains(k.Fixtures, "traces/"+path) {
			t.Errorf("%s shows %s but is not among its fixtures", path, id)
		}
	}
}
