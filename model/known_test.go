package model

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKnownRegistryComplete: every entry of the known-race registry has
// an ID of its own, an upstream reference, the properties it relaxes,
// its evidence, a reason wherever it rests on a timing window (and only
// there), and for each checker that names it (its sites) a fixture of
// that checker that exists.
func TestKnownRegistryComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range KnownRaces {
		if k.ID == "" || seen[k.ID] {
			t.Errorf("entry %q: empty or repeated ID", k.ID)
		}
		seen[k.ID] = true
		if k.Upstream == "" || k.Doc == "" || len(k.Relaxes) == 0 || len(k.Evidence) == 0 || len(k.Sites) == 0 {
			t.Errorf("%s: upstream, doc, relaxed properties, evidence and sites are all required", k.ID)
		}
		if slices.Contains(k.Evidence, EvidenceWindow) != (k.Window != "") {
			t.Errorf("%s: a window reason is given exactly when the evidence includes the window", k.ID)
		}
		kinds := map[string]bool{}
		for _, f := range k.Fixtures {
			kind := FixtureKind(f)
			if kind == "" {
				t.Errorf("%s: fixture %q is none of a trace, a harness/lin test and a harness/fuzz test", k.ID, f)
			}
			kinds[kind] = true
			if kind == "trace" {
				if _, err := os.Stat(filepath.Join("..", f)); err != nil {
					t.Errorf("%s: %v", k.ID, err)
				}
			}
		}
		for _, s := range k.Sites {
			switch SiteChecker(s) {
			case "model":
				if !kinds["trace"] {
					t.Errorf("%s: the model names it (%s) but no trace shows it", k.ID, s)
				}
			case "lin":
				if !kinds["lin"] {
					t.Errorf("%s: harness/lin names it (%s) but no lin test shows it", k.ID, s)
				}
			case "fuzz":
				if !kinds["fuzz"] {
					t.Errorf("%s: harness/fuzz names it (%s) but no fuzz test shows it", k.ID, s)
				}
			default:
				t.Errorf("%s: site %q names none of the model, lin and fuzz", k.ID, s)
			}
		}
	}
}

// TestExcuseOnlyRegistered: Excuse answers a registered ID with itself,
// "" while the entry is disabled, and panics on any other label.
func TestExcuseOnlyRegistered(t *testing.T) {
	if got := Excuse(KnownForegroundEnded); got != KnownForegroundEnded {
		t.Fatalf("Excuse(%q) = %q", KnownForegroundEnded, got)
	}
	restore, err := DisableKnownRace(KnownForegroundEnded)
	if err != nil {
		t.Fatal(err)
	}
	if got := Excuse(KnownForegroundEnded); got != "" {
		t.Errorf("disabled entry still excuses: %q", got)
	}
	if got := Excuse(KnownPolicySwitch); got != KnownPolicySwitch {
		t.Errorf("disabling one entry disabled %s", KnownPolicySwitch)
	}
	restore()
	if got := Excuse(KnownForegroundEnded); got != KnownForegroundEnded {
		t.Errorf("restore left the entry disabled")
	}
	if _, err := DisableKnownRace("kubernetes#1"); err == nil {
		t.Errorf("disabling an unknown entry succeeded")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Excuse of an unregistered label did not panic")
		}
	}()
	Excuse("kubernetes#1")
}

// knownAssign matches a known-race label set or returned without
// model.Excuse: a raw string or a Known* constant.
var knownAssign = regexp.MustCompile(`(?i)\bknown\s*=\s*("|(model\.)?Known[A-Z])|return\s+("kubernetes#|(model\.)?Known[A-Z]\w*,)`)

// TestEveryExcuseGoesThroughTheRegistry: in the model's and harness/lin's
// sources, no known-race label is set but through Excuse.
func TestEveryExcuseGoesThroughTheRegistry(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	lin, _ := filepath.Glob("../harness/lin/*.go")
	for _, f := range append(files, lin...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if knownAssign.MatchString(line) {
				t.Errorf("%s:%d: a known-race label not through model.Excuse: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestAdmitFollowsTheRegistry: a site's excuse holds only on a release
// the registry's entry carries. kubernetes#114603 (no resourceVersion
// precondition on the GC's DELETE) is in releases before v1.34.0: named
// on v1.37.2 it excuses nothing, and the message says why; on v1.33.13 it
// holds. A race of every release holds on both.
func TestAdmitFollowsTheRegistry(t *testing.T) {
	old, cur := Release{Major: 1, Minor: 33, Patch: 13}, Release{Major: 1, Minor: 37, Patch: 2}
	for _, c := range []struct {
		id      string
		r       Release
		excused bool
	}{
		{KnownOwnerChangeBeforeDelete, old, true},
		{KnownOwnerChangeBeforeDelete, cur, false},
		{KnownRetryWithoutRV, old, false},
		{KnownRetryWithoutRV, Release{}, true}, // the default release
		{KnownUnobservedDependent, old, true},
		{KnownUnobservedDependent, cur, true},
	} {
		v := (&Model{Release: c.r}).Admit(&Violation{Property: PropNoSolidOwnerCollected, Message: "collected", Known: c.id})
		if got := v.Known != ""; got != c.excused {
			t.Errorf("%s on %s: excused %v, want %v (%s)", c.id, c.r, got, c.excused, v.Error())
		}
		if !c.excused && !strings.Contains(v.Message, "known race "+c.id+" would explain it") {
			t.Errorf("%s on %s: the message does not say which race was refused: %s", c.id, c.r, v.Message)
		}
	}
	if (&Model{}).Admit(nil) != nil {
		t.Error("Admit(nil) is not nil")
	}
}
