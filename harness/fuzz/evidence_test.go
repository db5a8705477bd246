package fuzz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/proxy"
)

// A failing run on upstream behind the proxy writes the proxy's evidence
// beside its history: the artifact writer writes both and still names
// the history; a failure without a history (liveness) gets the evidence
// alone.
func TestFailureWritesEvidenceBesideHistory(t *testing.T) {
	ev := proxy.Evidence{Requests: []proxy.Request{{ID: 1, Client: proxy.GarbageCollectorClient, Call: proxy.Call{Verb: proxy.VerbDelete, Resource: "configmaps", Name: "a"},
		Received: time.Unix(1, 0), Answered: time.Unix(2, 0), Code: 200}}}
	dir := t.TempDir()
	history := func(dir string) (string, error) {
		path := filepath.Join(dir, "history.html")
		return path, os.WriteFile(path, []byte("<html></html>"), 0o644)
	}
	path, err := withEvidence(history, ev)(dir)
	if err != nil || path != filepath.Join(dir, "history.html") {
		t.Fatalf("writer returned %q, %v; want the history's path", path, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
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
