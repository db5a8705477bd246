package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// WriteJSONLines writes lines to path as JSON lines, one value per line,
// in order: the form of the evidence files a failing run leaves beside
// its history (the API proxy's record, impl's graph changes).
func WriteJSONLines[T any](path string, lines []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range lines {
		if err := enc.Encode(&lines[i]); err != nil {
			_ = f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
