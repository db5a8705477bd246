package lin

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// disableEnv names the registry entry a fixture subprocess runs with
// disabled (TestKnownRaceFixtures).
const disableEnv = "CASCADE_TEST_DISABLE_KNOWN"

func TestMain(m *testing.M) {
	if id := os.Getenv(disableEnv); id != "" {
		if _, err := model.DisableKnownRace(id); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// runFixture runs one test of this package (name, with any subtest) in a
// subprocess of the test binary, with the registry entry disable switched
// off unless "", and returns whether it passed and its output.
func runFixture(t *testing.T, name, disable string) (bool, string) {
	t.Helper()
	top, sub, _ := strings.Cut(name, "/")
	pattern := "^" + top + "$"
	if sub != "" {
		pattern += "/^" + sub + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), disableEnv+"="+disable)
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatal(err)
	}
	return err == nil, string(out)
}

// TestKnownRaceFixtures: every harness/lin fixture of the known-race
// registry (model.KnownRaces) is a test of this package that passes with
// its entry on and fails with the entry disabled, so each excuse lin
// gives is one the fixture needs.
func TestKnownRaceFixtures(t *testing.T) {
	if os.Getenv(disableEnv) != "" {
		t.Skip("inside a fixture subprocess")
	}
	for _, k := range model.KnownRaces {
		for _, f := range k.Fixtures {
			if model.FixtureKind(f) != "lin" {
				continue
			}
			name := model.LinFixtureTest(f)
			t.Run(k.ID+"/"+name, func(t *testing.T) {
				top, _, _ := strings.Cut(name, "/")
				ok, out := runFixture(t, name, "")
				if !ok || !strings.Contains(out, "--- PASS: "+top) {
					t.Fatalf("%s does not pass with %s on:\n%s", name, k.ID, out)
				}
				if ok, out = runFixture(t, name, k.ID); ok || !strings.Contains(out, "--- FAIL: "+top) {
					t.Fatalf("%s does not fail with %s disabled:\n%s", name, k.ID, out)
				}
			})
		}
	}
}

// TestKnownRacesRelaxNamedRules: every property a registry entry relaxes
// is one of the model's or one of lin's own rules, and each entry with a
// lin site has a lin fixture.
func TestKnownRacesRelaxNamedRules(t *testing.T) {
	lin := []string{PropAPISemantics, PropGCWrites, PropGCResolvable, PropAdoption, PropCycleUnblocked}
	for _, k := range model.KnownRaces {
		for _, p := range k.Relaxes {
			if _, err := model.PropertyByName(p); err != nil && !contains(strings.Join(lin, "\n"), p) {
				t.Errorf("%s relaxes %q, which is no property", k.ID, p)
			}
		}
	}
}
