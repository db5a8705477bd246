package fuzz

import (
	"errors"
	"path/filepath"

	"github.com/cascade-k8s/cascade/harness/proxy"
)

// EvidenceFile is the name of the file a failing run's proxy evidence is
// written to in the output directory, beside history.html: every watch
// event handed to kube-controller-manager's informers with its moment,
// and every request of its clients with its answer (proxy.Evidence,
// JSON lines).
const EvidenceFile = "evidence.jsonl"

// withEvidence is write (a failure's artifact writer, nil for none)
// that also writes ev to EvidenceFile in the output directory.
func withEvidence(write func(string) (string, error), ev proxy.Evidence) func(string) (string, error) {
	return func(dir string) (string, error) {
		err := ev.WriteFile(filepath.Join(dir, EvidenceFile))
		if write == nil {
			return "", err
		}
		path, werr := write(dir)
		return path, errors.Join(werr, err)
	}
}
