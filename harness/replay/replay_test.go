package replay

import (
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/traces"
)

// TestComparable: real targets are held to status codes and reasons of
// refused requests and to the state dump, not to the model's wording or
// its property lines.
func TestComparable(t *testing.T) {
	in := []string{
		"! delete cm/x if-rv=7 -> 409 Conflict: the ResourceVersion in the precondition (7) does not match",
		"! violates orphan respected: gc deleted pod/p",
		"cm/x live",
	}
	want := []string{"! delete cm/x if-rv=7 -> 409 Conflict", "cm/x live"}
	if got := comparable(in); !slices.Equal(got, want) {
		t.Fatalf("comparable = %q, want %q", got, want)
	}
}

// TestRunnable reads the targets header.
func TestRunnable(t *testing.T) {
	tr, err := traces.Parse("x.trace", strings.NewReader("# targets: model, impl\ncreate cm/a\n----\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !Runnable(tr, "impl") || Runnable(tr, "upstream") {
		t.Fatal("targets header misread")
	}
	tr, _ = traces.Parse("y.trace", strings.NewReader("create cm/a\n----\n"))
	if !Runnable(tr, "upstream") {
		t.Fatal("a trace without targets runs everywhere")
	}
}

// TestDiffNamesTarget: a divergence names the file, stanza and target.
func TestDiffNamesTarget(t *testing.T) {
	tr, _ := traces.Parse("d.trace", strings.NewReader("create cm/a\n----\ncm/a live\n"))
	err := Diff(tr, "upstream", [][]string{{"cm/a gone"}})
	if err == nil || !strings.Contains(err.Error(), "d.trace:2: stanza 1 (ending with \"create cm/a\") differs on upstream") || !strings.Contains(err.Error(), "+ cm/a gone") {
		t.Fatalf("got %v", err)
	}
}
