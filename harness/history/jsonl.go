package history

import (
	"encoding/json"
	"io"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

// WriteJSONLines writes lines to path as JSON lines, one value per line,
// in order: the form of the evidence files a failing run leaves beside
// its history (the API proxy's record, impl's graph changes).
// Like every artifact it never replaces a file cascade did not write
// (artifact.Write).
func WriteJSONLines[T any](path string, lines []T) error {
	return artifact.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for i := range lines {
			if err := enc.Encode(&lines[i]); err != nil {
				return err
			}
		}
		return nil
	})
}
