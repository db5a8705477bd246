package fuzz

import (
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// A concurrent run's client steps, settled one at a time, are searched
// for the fewest steps on which the model with the injected bug and the
// reference model end apart; the reproducer is a trace the model
// replays as written.
func TestSettledReproducer(t *testing.T) {
	bug, err := model.BugByName("delete-dependents-without-policy")
	if err != nil {
		t.Fatal(err)
	}
	sent := []string{
		"create cm/a",
		"create secret/x labels=app=web",
		"create rc/b selector=app=web owner=cm/a,controller",
		"label secret/x app=web",
		"create pod/c labels=app=web owner=rc/b,controller,block",
		"create cm/z owner=secret/x",
		"delete secret/x propagation=Orphan",
		"delete cm/a propagation=Background",
		"create cm/a",
	}
	header := func(summary string, steps int) ([]string, []traces.Header) {
		return []string{"test: " + firstLine(summary)}, nil
	}
	text, steps := settledReproducer(model.BugSet(0).With(bug), sent, header)
	if text == "" {
		t.Fatal("no settled reproducer of a cascade through an rc the GC deletes without a policy")
	}
	// create cm/a, create rc/b owned by it, delete cm/a: the GC's DELETE
	// of rc/b without a policy puts the orphan finalizer on it, which the
	// history shows even though rc/b is gone once the GC settles
	if steps != 3 || !strings.Contains(text, "breaks cascades are never silently orphaned") {
		t.Errorf("want 3 client steps breaking %q, got %d:\n%s", model.PropNeverSilentlyOrphaned, steps, text)
	}
	tr, err := traces.Parse("reproducer.trace", strings.NewReader(text))
	if err != nil {
		t.Fatalf("the reproducer does not parse: %v\n%s", err, text)
	}
	results, _, err := traces.Replay(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := traces.Diff(tr, results); err != nil {
		t.Errorf("the model does not replay its own expectations: %v", err)
	}

	// Steps the bug plays no part in have no reproducer.
	if text, _ := settledReproducer(model.BugSet(0).With(bug), sent[:4], header); text != "" {
		t.Errorf("a reproducer without a cascade through an rc:\n%s", text)
	}
}

// Under lost-first-update, impl's Auto mode drops the GC informer's first
// update that shows an object being deleted; the surrogate loses the same
// updates, and the foreground deletion it never hears of is stuck in the
// settled state.
func TestSettledReproducerLosesFirstUpdate(t *testing.T) {
	bug, err := model.BugByName("lost-first-update")
	if err != nil {
		t.Fatal(err)
	}
	sent := []string{
		"create cm/a",
		"create secret/s",
		"create cm/b owner=cm/a,block",
		"delete secret/s",
		"delete cm/a propagation=Foreground",
	}
	header := func(string, int) ([]string, []traces.Header) { return nil, nil }
	text, steps := settledReproducer(model.BugSet(0).With(bug), sent, header)
	if steps != 2 || !strings.Contains(text, "cm/a gone") {
		t.Fatalf("want 2 client steps (create cm/a, delete it in the foreground) after which the model has cm/a gone, got %d:\n%s", steps, text)
	}
}
