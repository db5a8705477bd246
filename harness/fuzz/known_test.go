package fuzz_test

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

// runFixture runs one test of this package's binary in a subprocess,
// short (no control plane: the liveness fixtures judge listed states),
// with registry entry disable switched off unless "", and returns
// whether it passed and its output.
func runFixture(t *testing.T, name, disable string) (bool, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+name+"$", "-test.v", "-test.count=1", "-test.short")
	cmd.Env = append(os.Environ(), disableEnv+"="+disable)
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatal(err)
	}
	return err == nil, string(out)
}

// TestKnownRaceFixtures: every harness/fuzz fixture of the known-race
// registry (model.KnownRaces) is a test of this package that passes with
// its entry on and fails with the entry disabled, so each excuse the
// liveness check gives is one the fixture needs.
func TestKnownRaceFixtures(t *testing.T) {
	if os.Getenv(disableEnv) != "" {
		t.Skip("inside a fixture subprocess")
	}
	for _, k := range model.KnownRaces {
		for _, f := range k.Fixtures {
			if model.FixtureKind(f) != "fuzz" {
				continue
			}
			name := model.LinFixtureTest(f)
			t.Run(k.ID+"/"+name, func(t *testing.T) {
				ok, out := runFixture(t, name, "")
				if !ok || !strings.Contains(out, "--- PASS: "+name) {
					t.Fatalf("%s does not pass with %s on:\n%s", name, k.ID, out)
				}
				if ok, out = runFixture(t, name, k.ID); ok || !strings.Contains(out, "--- FAIL: "+name) {
					t.Fatalf("%s does not fail with %s disabled:\n%s", name, k.ID, out)
				}
			})
		}
	}
}
