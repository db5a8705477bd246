package traces

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of every trace file from the model")

// traceFiles lists every trace this repository ships.
func traceFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"scenarios", "races", "counterexamples"} {
		fs, err := filepath.Glob(filepath.Join(dir, "*.trace"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	if len(files) == 0 {
		t.Fatal("no trace files found")
	}
	return files
}

// TestTraces replays every trace file on the model. Each stanza's output
// must equal the file's expectation, and the `# property:` header must
// agree with the violations the replay finds. Run with -rewrite to
// refresh expectations after a deliberate model change.
func TestTraces(t *testing.T) {
	for _, path := range traceFiles(t) {
		t.Run(strings.TrimSuffix(path, ".trace"), func(t *testing.T) {
			tr, err := ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			results, _, err := Replay(tr)
			if err != nil {
				t.Fatal(err)
			}
			if *rewrite {
				outs := make([][]string, len(results))
				for i, r := range results {
					outs[i] = r.Output
				}
				if err := os.WriteFile(path, []byte(tr.Rewrite(outs)), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err := Diff(tr, results); err != nil {
				t.Fatal(err)
			}
			if err := CheckHeaders(tr, results); err != nil {
				t.Fatal(err)
			}
		})
	}
}
