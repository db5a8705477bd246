package fuzz

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/proxy"
)

// EvidenceFile is the name of the file a failing run's proxy evidence is
// written to in the output directory, beside history.html: every watch
// event handed to kube-controller-manager's informers with its moment,
// and every request of its clients with its answer (proxy.Evidence,
// JSON lines).
const EvidenceFile = "evidence.jsonl"

// GraphChangesFile is the name of the file a failing run on a target
// with an in-process GC (impl) writes its GC's graph changes to, beside
// history.html: every event the graph builder applied, in the order it
// applied them, and every restart of the GC (history.GraphChange, JSON
// lines). It is impl's counterpart of EvidenceFile, and what lin judged
// the run's "the GC had not seen it" races on.
const GraphChangesFile = "graph-changes.jsonl"

// The other artifacts of a failing run, in Config.Out: its shrunk trace,
// its history (concurrent runs) and its one-line summary.
const (
	TraceFile   = "failure.trace"
	HistoryFile = "history.html"
	SummaryFile = "summary.txt"
)

// OutputFiles lists the paths in dir a failing run may write, all but
// rapid's fail file (whose name is dated): the fuzz command checks them
// (artifact.Check) before the first run.
func OutputFiles(dir string) []string {
	var paths []string
	for _, name := range []string{TraceFile, HistoryFile, SummaryFile, EvidenceFile, GraphChangesFile} {
		paths = append(paths, filepath.Join(dir, name))
	}
	return paths
}

// withEvidence is write (a failure's artifact writer, nil for none)
// that also writes ev to EvidenceFile in the output directory.
func withEvidence(write func(string) (string, error), ev proxy.Evidence) func(string) (string, error) {
	return alsoWriting(write, EvidenceFile, ev.WriteFile)
}

// withGraphChanges is write that also writes the GC's graph changes to
// GraphChangesFile in the output directory.
func withGraphChanges(write func(string) (string, error), changes []history.GraphChange) func(string) (string, error) {
	return alsoWriting(write, GraphChangesFile, func(path string) error { return writeGraphChanges(path, changes) })
}

// alsoWriting is write that also writes the file name in the output
// directory with put. It returns write's path (the history's): the extra
// file is named by its fixed name (Failure.Evidence).
func alsoWriting(write func(string) (string, error), name string, put func(path string) error) func(string) (string, error) {
	return func(dir string) (string, error) {
		err := put(filepath.Join(dir, name))
		if write == nil {
			return "", err
		}
		path, werr := write(dir)
		return path, errors.Join(werr, err)
	}
}

// graphChangeLine is one line of GraphChangesFile: the change, and its
// moment in a form a person reads.
type graphChangeLine struct {
	Time        string               `json:"time"`
	GraphChange *history.GraphChange `json:"graph_change"`
}

// writeGraphChanges writes changes to path as JSON lines, in the order
// the GC applied them.
func writeGraphChanges(path string, changes []history.GraphChange) error {
	lines := make([]graphChangeLine, len(changes))
	for i := range changes {
		c := &changes[i]
		lines[i] = graphChangeLine{Time: time.Unix(0, c.At).UTC().Format(time.RFC3339Nano), GraphChange: c}
	}
	return history.WriteJSONLines(path, lines)
}
