package fuzz

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// TestRaceReproducer: the client steps of a concurrent run, as sent,
// hold a race that no settled run shows: the GC hears of a dependent
// before its cluster-scoped owner, and with lookup-ignores-scope looks
// the owner up in the dependent's namespace. The race search finds it
// among unrelated steps, keeps only the two creates, and writes a
// stepped trace the model replays with its violation. The reference
// model has no such race, and neither has a run without the creates.
func TestRaceReproducer(t *testing.T) {
	sent := []string{
		"create cm/a",
		"create secret/ns2/b labels=app=web",
		"create pv/disk",
		"create cm/ns2/claim owner=pv/disk",
		"delete cm/a propagation=Foreground",
		"create rc/c selector=app=web",
	}
	bug := model.BugSet(0).With(model.BugLookupIgnoresScope)
	if trace, _ := settledReproducer(bug, sent, func(string, int) ([]string, []traces.Header) { return nil, nil }); trace != "" {
		t.Fatalf("the race has a settled reproducer:\n%s", trace)
	}
	ce, steps := raceReproducer(bug, sent, "cascade fuzz --target impl", "a test", time.Minute)
	if ce == nil {
		t.Fatal("no race reproducer")
	}
	trace := ce.Trace
	if steps != 2 {
		t.Errorf("%d client steps, want the two creates:\n%s", steps, trace)
	}
	for _, want := range []string{"create pv/disk", "create cm/ns2/claim owner=pv/disk", "# bug: lookup-ignores-scope", "! violates", "gc deliver"} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace lacks %q:\n%s", want, trace)
		}
	}
	tr, err := traces.Parse("race.trace", strings.NewReader(trace))
	if err != nil {
		t.Fatal(err)
	}
	results, _, err := traces.Replay(tr)
	if err != nil {
		t.Fatalf("the trace does not replay on the model: %v", err)
	}
	if err := traces.Diff(tr, results); err != nil {
		t.Errorf("the model does not replay the trace's expectations: %v", err)
	}
	if ce, _ := raceReproducer(0, sent, "", "", time.Minute); ce != nil {
		t.Fatalf("a race without any bug:\n%s", ce.Trace)
	}
	if ce, _ := raceReproducer(bug, append(sent[:2:2], sent[4:]...), "", "", time.Minute); ce != nil {
		t.Fatalf("a race without the creates:\n%s", ce.Trace)
	}
}

// TestRaceWindows: the windows ending at a step hold it alone first,
// then with the steps just before it or the latest earlier steps on the
// objects it names, which need not be close: an owner created several
// steps before the dependent naming it.
func TestRaceWindows(t *testing.T) {
	sent := []string{
		"create pv/disk",
		"create cm/a",
		"create secret/ns2/b",
		"delete cm/a",
		"create cm/ns2/claim owner=pv/disk",
	}
	ws := windows(sent, 4)
	if len(ws[0]) != 1 || ws[0][0] != 4 {
		t.Fatalf("first window %v, want [4]", ws[0])
	}
	want := []int{0, 4}
	if !slices.ContainsFunc(ws, func(w []int) bool { return slices.Equal(w, want) }) {
		t.Fatalf("no window %v (the owner's create and the dependent's) in %v", want, ws)
	}
	for _, w := range ws {
		if len(w) > raceWindow || w[len(w)-1] != 4 || !slices.IsSorted(w) {
			t.Fatalf("bad window %v", w)
		}
	}
	if got := objectsOf("create cm/ns2/claim owner=pv/disk owner=rc/c"); !slices.Equal(got, []string{"ConfigMap/ns2/claim", "PersistentVolume//disk", "ReplicationController/default/c"}) {
		t.Fatalf("objectsOf: %v", got)
	}
}

// TestRaceOrphanedBeforeDelete: the client steps of a concurrent impl run
// under delete-without-rv-precondition and --write-delay whose history
// showed the GC deleting rc/b after its own attemptToOrphan patch had
// taken rc/b's last ownerReference off. A client deleted pv/b, rc/b's
// owner, with Orphan and then with Background, which removed it: the GC's
// orphan work item, queued before, still orphaned rc/b, while
// attemptToDelete, sent rc/b by pv/b's DELETED event, had already decided
// on rc/b's DELETE from a GET that showed the dangling reference. The
// model found no race in these steps while its attemptToOrphan did nothing
// for an owner whose node the graph had removed; upstream's queue holds
// the node, whose dependents it still orphans. The race search finds the
// two deletes, and the model without the bug does not break.
func TestRaceOrphanedBeforeDelete(t *testing.T) {
	b, err := os.ReadFile("testdata/delete-without-rv-orphaned.steps")
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			sent = append(sent, l)
		}
	}
	bug := model.BugSet(0).With(model.BugDeleteWithoutRVPrecondition)
	if trace, _ := settledReproducer(bug, sent, func(string, int) ([]string, []traces.Header) { return nil, nil }); trace != "" {
		t.Fatalf("the race has a settled reproducer:\n%s", trace)
	}
	ce, steps := raceReproducer(bug, sent, "cascade fuzz --target impl", "a test", time.Minute)
	if ce == nil {
		t.Fatal("no race reproducer")
	}
	trace := ce.Trace
	for _, want := range []string{"delete pv/b propagation=Orphan\ndelete pv/b propagation=Background", "gc attemptToOrphan pv/b", "gc delete rc/b",
		"! violates no solid owner collected: gc deleted rc/b, which has no ownerReferences", "# bug: delete-without-rv-precondition"} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace lacks %q:\n%s", want, trace)
		}
	}
	if steps != 4 {
		t.Errorf("%d client steps, want the creates of pv/b and rc/b and the two deletes:\n%s", steps, trace)
	}
	tr, err := traces.Parse("race.trace", strings.NewReader(trace))
	if err != nil {
		t.Fatal(err)
	}
	results, _, err := traces.Replay(tr)
	if err != nil {
		t.Fatalf("the trace does not replay on the model: %v", err)
	}
	if err := traces.Diff(tr, results); err != nil {
		t.Errorf("the model does not replay the trace's expectations: %v", err)
	}
	if ce, _ := raceReproducer(0, sent, "", "", time.Minute); ce != nil {
		t.Fatalf("a race without the bug:\n%s", ce.Trace)
	}
}
