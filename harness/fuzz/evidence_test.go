package fuzz

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/proxy"
)

// A failing run on upstream behind the proxy writes the proxy's evidence
// beside its history: the artifact writer writes both and still names
// the history; a failure without a history (liveness) gets the evidence
// alone.
func TestFailureWritesEvidenceBesideHistory(t *testing.T) {
	ev := proxy.Evidence{Requests: []proxy.Request{{ID: 1, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbDelete, Resource: "configmaps", Name: "a"},
		Received: time.Unix(1, 0), Answered: time.Unix(2, 0), Code: 200}}}
	data := writtenBesideHistory(t, withEvidence(writeHistoryHTML, ev), EvidenceFile)
	if !strings.Contains(string(data), `"client":"generic-garbage-collector"`) || !strings.Contains(string(data), `"verb":"delete"`) {
		t.Errorf("%s lacks the GC's DELETE: %s", EvidenceFile, data)
	}
	alone := t.TempDir()
	if path, err := withEvidence(nil, ev)(alone); err != nil || path != "" {
		t.Fatalf("writer without a history returned %q, %v", path, err)
	}
	if _, err := os.Stat(filepath.Join(alone, EvidenceFile)); err != nil {
		t.Errorf("no evidence written without a history: %v", err)
	}
}

// A failing run on impl writes its GC's graph changes beside its
// history, one JSON line per change in the order the GC applied them,
// each with its moment, a restart's reset included.
func TestFailureWritesGraphChangesBesideHistory(t *testing.T) {
	changes := []history.GraphChange{
		{Reset: true, At: time.Unix(1, 0).UnixNano()},
		{UID: "u-owner", RV: 7, At: time.Unix(2, 0).UnixNano()},
		{UID: "u-dep", RV: 9, Deleted: true, At: time.Unix(3, 500).UnixNano()},
	}
	data := writtenBesideHistory(t, withGraphChanges(writeHistoryHTML, changes), GraphChangesFile)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(changes) {
		t.Fatalf("%s has %d lines, want %d: %s", GraphChangesFile, len(lines), len(changes), data)
	}
	for i, l := range lines {
		var got graphChangeLine
		if err := json.Unmarshal([]byte(l), &got); err != nil || got.GraphChange == nil {
			t.Fatalf("line %d %q: %v", i+1, l, err)
		}
		if *got.GraphChange != changes[i] {
			t.Errorf("line %d reads back as %+v, want %+v", i+1, *got.GraphChange, changes[i])
		}
	}
	if !strings.Contains(lines[2], `"time":"1970-01-01T00:00:03.0000005Z"`) {
		t.Errorf("line 3 lacks its moment: %s", lines[2])
	}
}

// writeHistoryHTML stands in for a failure's history writer: it writes
// history.html in dir and returns its path.
func writeHistoryHTML(dir string) (string, error) {
	path := filepath.Join(dir, "history.html")
	return path, os.WriteFile(path, []byte("<html></html>"), 0o644)
}

// writtenBesideHistory runs a failure's artifact writer in a fresh
// directory, checks that it returns the history's path, and returns the
// contents of the file name it wrote beside it.
func writtenBesideHistory(t *testing.T, write func(string) (string, error), name string) []byte {
	t.Helper()
	dir := t.TempDir()
	path, err := write(dir)
	if err != nil || path != filepath.Join(dir, "history.html") {
		t.Fatalf("writer returned %q, %v; want the history's path", path, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
