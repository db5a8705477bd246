package traces

import (
	"strings"
	"testing"
)

// TestParseErrors: a malformed trace is reported with file, line and
// column, and what was expected.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"unknown command", "create cm/a\nfrobnicate cm/a\n----\n", "bad.trace:2:1: unknown command \"frobnicate\""},
		{"bad argument column", "create cm/a\n  delete cm/a propagation=Sideways\n----\n", "bad.trace:2:15: propagation: expected Background, Foreground or Orphan"},
		{"missing separator", "create cm/a\n\ncreate cm/b\n----\n", "bad.trace:2:1: expected ---- after the commands"},
		{"separator missing at end", "create cm/a\n", "bad.trace:1:1: expected ---- after the commands of this stanza, found end of file"},
		{"no stanza", "# only a header\n", "bad.trace:2:1: expected at least one stanza"},
		{"stanza without commands", "----\ncm/a live\n", "bad.trace:1:1: expected a command before ----"},
		{"second stanza without commands", "create cm/a\n----\ncm/a live\n\n# nothing\n----\n", "bad.trace:6:1: expected a command before ----"},
		{"header after a blank line", "# A trace.\n\n# property: orphan respected\ncreate cm/a\n----\n", "bad.trace:3:1: a property header here counts for nothing"},
		{"misspelt header after a blank line", "# A trace.\n\n# Targets: impl\ncreate cm/a\n----\n", "bad.trace:3:1: a targets header here counts for nothing"},
		{"header between stanzas", "create cm/a\n----\ncm/a live\n\n# targets: model\ncreate cm/b\n----\n", "bad.trace:5:1: a targets header here counts for nothing"},
		{"header key in capitals", "# Targets: model\ncreate cm/a\n----\n", `bad.trace:1:1: unknown header "Targets": did you mean "targets"?`},
		{"header key singular", "# target: impl\ncreate cm/a\n----\n", `bad.trace:1:1: unknown header "target": did you mean "targets"?`},
		{"header key plural", "# bugs: adopt-without-recheck\ncreate cm/a\n----\n", `bad.trace:1:1: unknown header "bugs": did you mean "bug"?`},
		{"header key misspelt", "# proprety: orphan respected\ncreate cm/a\n----\n", `bad.trace:1:1: unknown header "proprety": did you mean "property"?`},
		{"header twice", "# targets: model\n# targets: upstream\ncreate cm/a\n----\n", "bad.trace:2:1: a second targets header (the first is at line 1)"},
		{"empty header", "# bug:\ncreate cm/a\n----\n", "bad.trace:1:1: the bug header is empty"},
		{"uppercase name", "create cm/A\n----\n", `bad.trace:1:8: "cm/A": an object's name and namespace are lowercase`},
		{"bad namespace", "create cm/Prod/a\n----\n", `bad.trace:1:8: "cm/Prod/a": an object's name`},
		{"not text", "create cm/a\n\x00\x01\xff\xfe\n----\n", "bad.trace:2:1: not a text file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.trace", strings.NewReader(c.text))
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("got %v, want an error starting %q", err, c.want)
			}
		})
	}
}

// TestProseIsNotAHeader: a description line that only looks like a
// header ("released: it keeps...", prose after a word close to a header
// key) stays description.
func TestProseIsNotAHeader(t *testing.T) {
	prose := []string{"The Pod is not", "released: it keeps its controller reference.", "Note: any text.", "By: hand", "Now: gone", "Shown: twice",
		"Levels: two", "Known: the GC races its informer.", "Release: kubernetes#136817 changed this in v1.36.", "Target: the GC's DELETE"}
	text := "# " + strings.Join(prose, "\n# ") + "\ncreate cm/a\n----\ncm/a live\n"
	tr, err := Parse("p.trace", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Headers) != 0 || len(tr.Description) != len(prose) {
		t.Fatalf("headers %v, description %q", tr.Headers, tr.Description)
	}
}

// TestKnownHeaderMustBeShown: a trace naming a known race must show a
// violation the registry classifies as it (conform credits the header).
func TestKnownHeaderMustBeShown(t *testing.T) {
	tr, err := Parse("k.trace", strings.NewReader("# known: kubernetes#26120\ncreate cm/a\n----\ncm/a live\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := Replay(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckHeaders(tr, res); err == nil || !strings.HasPrefix(err.Error(), "k.trace:1:1: the trace names known race kubernetes#26120, but replaying it shows no violation") {
		t.Fatalf("got %v", err)
	}
}

// TestReplayErrors: a command the model cannot take names its line.
func TestReplayErrors(t *testing.T) {
	tr, err := Parse("r.trace", strings.NewReader("create cm/a\ngc attemptToDelete cm/a\n----\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Replay(tr)
	if err == nil || !strings.HasPrefix(err.Error(), "r.trace:2:1: gc attemptToDelete cm/a: step not enabled") {
		t.Fatalf("got %v", err)
	}
}

// A header with a vocabulary that names nothing in it is a parse error at
// its line: a misspelt target, bug, known race, property or release range
// would otherwise make a trace run nowhere, excuse nothing, or fail as a
// divergence.
func TestHeadersNameWhatExists(t *testing.T) {
	for header, want := range map[string]string{
		"# targets: model, marsrover":                `h.trace:2:1: unknown target "marsrover" in the targets header`,
		"# bug: no-such-bug":                         `h.trace:2:1: unknown bug "no-such-bug"`,
		"# known: kubernetes#000":                    `h.trace:2:1: unknown known race "kubernetes#000"`,
		"# property: no such property":               `h.trace:2:1: unknown property "no such property"`,
		"# releases: banana":                         "h.trace:2:1: ",
		"# targets: model, impl, upstream":           "",
		"# known: kubernetes#114603":                 "",
		"# property: orphan respected":               "",
		"# bug: uid-only-identity, no-cycle-unblock": "",
	} {
		_, err := Parse("h.trace", strings.NewReader("# a trace\n"+header+"\ncreate cm/a\n----\ncm/a live\n"))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", header, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%s: got %v, want an error starting %q", header, err, want)
		}
	}
}

// TestDiffNamesStanza: a wrong expectation fails with the file, the
// stanza and a line diff.
func TestDiffNamesStanza(t *testing.T) {
	tr, err := Parse("d.trace", strings.NewReader("create cm/a\n----\ncm/a gone\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := Replay(tr)
	if err != nil {
		t.Fatal(err)
	}
	err = Diff(tr, res)
	if err == nil || !strings.Contains(err.Error(), "d.trace:2: stanza 1 (ending with \"create cm/a\")") || !strings.Contains(err.Error(), "- cm/a gone") || !strings.Contains(err.Error(), "+ cm/a live") {
		t.Fatalf("got %v", err)
	}
}

// TestRewriteKeepsEverythingElse: rewriting replaces expectations only.
func TestRewriteKeepsEverythingElse(t *testing.T) {
	text := "# about\n\ncreate cm/a  # a comment\n----\nstale\n\n# between\ndelete cm/a\n----\n"
	tr, err := Parse("w.trace", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := tr.Rewrite([][]string{{"cm/a live"}, {"cm/a gone"}})
	want := "# about\n\ncreate cm/a  # a comment\n----\ncm/a live\n\n# between\ndelete cm/a\n----\ncm/a gone\n"
	if got != want {
		t.Fatalf("rewrite:\n%s\nwant:\n%s", got, want)
	}
}
