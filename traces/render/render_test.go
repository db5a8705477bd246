package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/traces"
)

func frames(t *testing.T, path string) (*traces.Trace, []traces.Frame) {
	t.Helper()
	tr, err := traces.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := traces.Frames(tr)
	if err != nil {
		t.Fatal(err)
	}
	return tr, fs
}

// TestHTMLShowsTheRace: the page for the orphan-adoption race has a frame
// per step, marks the violating step and the adoption that made it
// possible, draws the blocking reference the adoption re-adds, and loads
// nothing from outside.
func TestHTMLShowsTheRace(t *testing.T) {
	tr, fs := frames(t, "../races/orphan-adoption.trace")
	var buf bytes.Buffer
	if err := HTML(&buf, tr, fs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if got := strings.Count(page, `class="frame"`); got != len(fs) {
		t.Errorf("%d frames drawn, want %d", got, len(fs))
	}
	for _, want := range []string{".frame[hidden]{display:none}", `<table id="swimlanes">`, "adopt rs/web-1 by=deploy/web", `<tr class="violation mark-violating" data-i="18">`, `<tr class="mark-enabling" data-i="11">`, "violates <b>orphan respected</b>", `stroke="#c62828" stroke-width="3"`, "attemptToOrphan"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, external := range []string{"http://", "https://", "<link", "src="} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), external) {
			t.Errorf("page is not self-contained: found %q", external)
		}
	}
}

// TestDOT: one step as Graphviz, with the blocking edge and deletion
// state; a step out of range is an error that says the range.
func TestDOT(t *testing.T) {
	_, fs := frames(t, "../scenarios/foreground-blocking.trace")
	var buf bytes.Buffer
	// the step after `delete cm/owner propagation=Foreground`
	step := -1
	for i, f := range fs {
		if f.Command == "delete cm/owner propagation=Foreground" {
			step = i
		}
	}
	if err := DOT(&buf, fs, step); err != nil {
		t.Fatal(err)
	}
	dot := buf.String()
	for _, want := range []string{"digraph ownership", `"cm/dep" -> "cm/owner" [color="#c62828", penwidth=2.5, label="block", style=dashed]`, `cm/owner\ndeleting\nfinalizers: foregroundDeletion`} {
		if !strings.Contains(dot, want) {
			t.Errorf("dot lacks %q:\n%s", want, dot)
		}
	}
	if err := DOT(&buf, fs, len(fs)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("out-of-range step: %v", err)
	}
}
