package scenarios

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func spec(labels []string, leaf string, state types.SpecState, d time.Duration) types.SpecReport {
	return types.SpecReport{
		ContainerHierarchyTexts:  []string{"on upstream kube-controller-manager"},
		ContainerHierarchyLabels: [][]string{labels[:1]},
		LeafNodeType:             types.NodeTypeIt,
		LeafNodeText:             leaf,
		LeafNodeLabels:           labels[1:],
		State:                    state,
		RunTime:                  d,
	}
}

// Every spec that ends prints one line naming its target, trace, result
// and time; a skip or failure adds its reason's first line.
func TestProgressLineNamesTargetTraceResultAndTime(t *testing.T) {
	defer func(old string) { *targetsFlag = old }(*targetsFlag)
	*targetsFlag = "model,upstream,impl,impl-stepped"
	pass := spec([]string{"upstream", "background"}, "scenario/background", types.SpecStatePassed, 3210*time.Millisecond)
	if got, want := progressLine(pass), "conform upstream scenario/background: pass (3.2s)"; got != want {
		t.Errorf("passed spec: got %q, want %q", got, want)
	}
	skip := spec([]string{"impl", "race"}, "race/x", types.SpecStateSkipped, 0)
	skip.Failure.Message = "it needs the webhook\nmore"
	if got, want := progressLine(skip), "conform impl race/x: skip (0s): it needs the webhook"; got != want {
		t.Errorf("skipped spec: got %q, want %q", got, want)
	}
	timedOut := spec([]string{"impl-stepped"}, "race/y", types.SpecStateTimedout, time.Minute)
	if got := progressLine(timedOut); !strings.HasPrefix(got, "conform impl-stepped race/y: error (1m0s)") {
		t.Errorf("timed-out spec: got %q, want an error line", got)
	}
	cut := spec([]string{"upstream"}, "scenario/cluster-scoped", types.SpecStateInterrupted, 13*time.Second)
	cut.Failure.Message = "Interrupted by User"
	if got, want := progressLine(cut), "conform upstream scenario/cluster-scoped: interrupted"; got != want {
		t.Errorf("interrupted spec: got %q, want %q (no verdict)", got, want)
	}
	setup := pass
	setup.LeafNodeType = types.NodeTypeBeforeAll
	if got := progressLine(setup); got != "" {
		t.Errorf("a BeforeAll printed %q; only specs print progress", got)
	}
	if got := progressLine(spec([]string{"upstream"}, "race/z", types.SpecStateSkipped, 0)); got != "" {
		t.Errorf("a spec a label filter left out printed %q", got)
	}
}

// The summary counts each target's specs by result, and -summary writes
// the same counts as JSON.
func TestSummaryCountsPerTarget(t *testing.T) {
	defer func(old string) { *targetsFlag = old }(*targetsFlag)
	*targetsFlag = "model,upstream,impl,impl-stepped"
	r := types.Report{SpecReports: types.SpecReports{
		spec([]string{"upstream"}, "a", types.SpecStatePassed, time.Second),
		spec([]string{"upstream"}, "b", types.SpecStateFailed, time.Second),
		spec([]string{"upstream"}, "c", types.SpecStateSkipped, 0), // left out by a filter
		func() types.SpecReport {
			s := spec([]string{"upstream"}, "d", types.SpecStateSkipped, 0)
			s.Failure.Message = "it takes GC or controller steps"
			return s
		}(),
		spec([]string{"impl"}, "a", types.SpecStatePanicked, time.Second),
		spec([]string{"impl"}, "b", types.SpecStateInterrupted, time.Second),
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "gives every target traces to run", State: types.SpecStatePassed},
	}}
	all := tally(r)
	if c := all["upstream"]; c.Passed != 1 || c.Failed != 1 || c.Skipped != 1 || c.Errors != 0 || c.Seconds != 2 {
		t.Errorf("upstream counts: %+v", *c)
	}
	if c := all["impl"]; c.Errors != 1 || c.Passed != 0 { // the interrupted spec counts nowhere
		t.Errorf("impl counts: %+v", *c)
	}
	if c := all["model"]; *c != (Counts{}) {
		t.Errorf("model ran nothing, counted %+v", *c)
	}
	var out bytes.Buffer
	printSummary(&out, all, "out/conform/junit.xml")
	for _, want := range []string{"upstream          1       1       0       1        2.0s", "JUnit report: out/conform/junit.xml"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	path := filepath.Join(t.TempDir(), "summary.json")
	if err := writeSummary(path, all); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]Counts
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back["upstream"] != *all["upstream"] || len(back) != 4 {
		t.Errorf("summary.json: %s", data)
	}
}
