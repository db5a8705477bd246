package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderSaysWhereThePageOpens: render names the step the page opens
// on, the property it violates and the step that made it possible; a
// trace that violates nothing says so.
func TestRenderSaysWhereThePageOpens(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "race.html")
	out, code := cascade(t, "render", "../../traces/races/orphan-adoption.trace", "--html", page)
	want := "wrote " + page + " (23 steps); opens at step 18 (gc delete rs/web-1), which violates orphan respected; step 11 (controller adopt rs/web-1 by=deploy/web) made it possible\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, output:\n%s\nwant:\n%s", code, out, want)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), `<nav data-open="18">`) {
		t.Fatalf("page does not open on step 18 (%v)", err)
	}
	out, code = cascade(t, "render", "../../traces/races/orphan-adoption-fixed.trace", "--html", filepath.Join(dir, "fixed.html"))
	if code != 0 || !strings.HasSuffix(out, "(16 steps); no step violates a property\n") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}
