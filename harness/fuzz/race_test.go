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
	expectRace(t, bug, false, sent, 2, "create pv/disk", "create cm/ns2/claim owner=pv/disk", "# bug: lookup-ignores-scope", "! violates", "gc deliver")
	if ce, _ := raceReproducer(bug, false, append(sent[:2:2], sent[4:]...), "", "", time.Minute); ce != nil {
		t.Fatalf("a race without the creates:\n%s", ce.Trace)
	}
}

// TestRaceReproducerRelist: kubernetes#56121 needs an informer relist:
// the GC makes a virtual node for an owner from its dependent's event,
// verifies it while the owner exists and (forget-unobserved-virtual)
// forgets it; the owner's create and delete then both vanish in a
// relist. Only a search that lets the model's informers coalesce
// events, as impl's informer-relist fault lets its informers, finds it.
func TestRaceReproducerRelist(t *testing.T) {
	sent := []string{
		"create secret/owner",
		"create cm/other",
		"create cm/dep owner=secret/owner",
		"delete cm/other",
		"delete secret/owner",
	}
	bug := model.BugSet(0).With(model.BugForgetUnobservedVirtual)
	if ce, _ := raceReproducer(bug, false, sent, "", "", time.Minute); ce != nil {
		t.Fatalf("a race without relists:\n%s", ce.Trace)
	}
	// the owner's create and delete and the dependent's create
	expectRace(t, bug, true, sent, 3, "gc coalesce secret/owner", "# bug: forget-unobserved-virtual", "! violates garbage is collected")
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
	sent := readSteps(t, "testdata/delete-without-rv-orphaned.steps")
	bug := model.BugSet(0).With(model.BugDeleteWithoutRVPrecondition)
	if trace, _ := settledReproducer(bug, sent, func(string, int) ([]string, []traces.Header) { return nil, nil }); trace != "" {
		t.Fatalf("the race has a settled reproducer:\n%s", trace)
	}
	// the creates of pv/b and rc/b and the two deletes
	expectRace(t, bug, false, sent, 4, "delete pv/b propagation=Orphan\ndelete pv/b propagation=Background", "gc attemptToOrphan pv/b", "gc delete rc/b",
		"! violates no solid owner collected: gc deleted rc/b, which has no ownerReferences", "# bug: delete-without-rv-precondition")
}

// TestRaceUnresolvableOwner: the client steps of a concurrent impl run
// under delete-without-rv-precondition and --write-delay whose history
// showed the GC deleting the cluster-scoped pv/b after a client added a
// reference to the namespaced rc/c: attemptToDeleteItem had decided on
// pv/b, whose owner pv/a was gone, and the DELETE without the
// resourceVersion precondition did not notice the new reference. The race
// starts at pv/b's create, which is not among the latest steps on pv/b or
// rc/c: a window of the create and the steps naming the created objects
// holds it, and the model reports a GC DELETE through an unresolvable
// reference as harness/lin does. The search finds a race on pv/b.
func TestRaceUnresolvableOwner(t *testing.T) {
	sent := readSteps(t, "testdata/delete-without-rv-unresolvable.steps")
	bug := model.BugSet(0).With(model.BugDeleteWithoutRVPrecondition)
	j := slices.Index(sent, "add-owner pv/b rc/c,block")
	create, createRC := slices.Index(sent, "create pv/b labels=app=web owner=pv/a"), slices.IndexFunc(sent, func(l string) bool { return strings.HasPrefix(l, "create rc/c ") })
	want := []int{create, createRC, j}
	if !slices.ContainsFunc(windows(sent, j), func(w []int) bool { return slices.Equal(w, want) }) {
		t.Fatalf("no window %v (the creates of pv/b and rc/c and the reference) in %v", want, windows(sent, j))
	}
	r := &raceSearch{surrogate: bug}
	ce := r.reproduces(applicable(bug, sent[:create]), []string{sent[create], sent[createRC], sent[j]})
	if ce == nil || !strings.Contains(ce.Message, "gc deleted pv/b through its reference to ReplicationController c, which it cannot resolve") {
		t.Fatalf("the window does not reproduce the history's violation: %+v", ce)
	}
	ce, _ = raceReproducer(bug, false, sent, "cascade fuzz --target impl", "a test", time.Minute)
	if ce == nil || !strings.Contains(ce.Trace, "gc deleted pv/b") || !strings.Contains(ce.Trace, "create pv/b owner=pv/a") {
		t.Fatalf("no race on pv/b: %+v", ce)
	}
	if ce, _ := raceReproducer(0, false, sent, "", "", time.Minute); ce != nil {
		t.Fatalf("a race without the bug:\n%s", ce.Trace)
	}
}

// TestLanded: reproducers take a run's steps in the order they were
// answered, not sent: a step the driver retried on a conflict lands after
// one another client sent later.
func TestLanded(t *testing.T) {
	t0 := time.Now()
	ss := []sent{
		{line: "remove-finalizer pv/a cascade.dev/hold", at: t0, done: t0.Add(30 * time.Millisecond)},
		{line: "add-finalizer pv/a cascade.dev/hold", at: t0.Add(10 * time.Millisecond), done: t0.Add(20 * time.Millisecond)},
		{line: "create cm/x", at: t0.Add(11 * time.Millisecond), done: t0.Add(21 * time.Millisecond), err: os.ErrInvalid},
		{line: "delete pv/a", at: t0.Add(40 * time.Millisecond), done: t0.Add(50 * time.Millisecond)},
	}
	got := landed(ss)
	want := []string{"add-finalizer pv/a cascade.dev/hold", "remove-finalizer pv/a cascade.dev/hold", "delete pv/a"}
	if !slices.Equal(got, want) {
		t.Fatalf("landed %q, want %q", got, want)
	}
	if ss[0].line != "remove-finalizer pv/a cascade.dev/hold" {
		t.Fatal("landed reordered the run's steps")
	}
}

// expectModelReplays fails t unless the model replays the stepped trace
// text to the expectations it states.
func expectModelReplays(t *testing.T, trace string) {
	t.Helper()
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
}

// expectRace runs the race search on sent with bug (relist: the model's
// informers may coalesce) and expects a reproducer of steps client steps
// whose trace holds each of wants and replays on the model, and no race
// on the same steps without the bug.
func expectRace(t *testing.T, bug model.BugSet, relist bool, sent []string, steps int, wants ...string) {
	t.Helper()
	ce, n := raceReproducer(bug, relist, sent, "cascade fuzz --target impl", "a test", time.Minute)
	if ce == nil {
		t.Fatal("no race reproducer")
	}
	if n != steps {
		t.Errorf("%d client steps, want %d:\n%s", n, steps, ce.Trace)
	}
	for _, want := range wants {
		if !strings.Contains(ce.Trace, want) {
			t.Errorf("the trace lacks %q:\n%s", want, ce.Trace)
		}
	}
	expectModelReplays(t, ce.Trace)
	if ce, _ := raceReproducer(0, relist, sent, "", "", time.Minute); ce != nil {
		t.Fatalf("a race without the bug:\n%s", ce.Trace)
	}
}

// readSteps reads a file of client steps, one a line, "#" lines comments.
func readSteps(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			sent = append(sent, l)
		}
	}
	return sent
}
