package artifact_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

// writerEnv makes this test binary a writer process for
// TestProcessesWritingOneDirectoryKeepEveryEntry: "DIR PREFIX N".
const writerEnv = "CASCADE_ARTIFACT_TEST_WRITER"

// Processes writing artifacts into one directory at once keep every
// entry of its manifest: each file they wrote is listed with its digest,
// so each may be replaced again. (Within a process, the package's mutex
// does this; between processes, the directory's lock.)
func TestProcessesWritingOneDirectoryKeepEveryEntry(t *testing.T) {
	if spec := os.Getenv(writerEnv); spec != "" {
		writeFiles(t, spec)
		return
	}
	dir := t.TempDir()
	const procs, files = 3, 40
	cmds := make([]*exec.Cmd, procs)
	outs := make([]bytes.Buffer, procs)
	for p := range procs {
		cmds[p] = exec.Command(os.Args[0], "-test.run=^TestProcessesWritingOneDirectoryKeepEveryEntry$", "-test.count=1")
		cmds[p].Env = append(os.Environ(), fmt.Sprintf("%s=%s p%d %d", writerEnv, dir, p, files))
		cmds[p].Stdout, cmds[p].Stderr = &outs[p], &outs[p]
		if err := cmds[p].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer %d: %v\n%s", p, err, outs[p].String())
		}
	}
	manifest, err := os.ReadFile(filepath.Join(dir, artifact.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(manifest)), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		listed[name] = sum
	}
	lost := 0
	for p := range procs {
		for i := range files {
			name := fmt.Sprintf("p%d-%d.json", p, i)
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("%s was not written: %v", name, err)
			}
			d := sha256.Sum256(b)
			if listed[name] != hex.EncodeToString(d[:]) {
				lost++
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d files written by %d processes at once are not listed with their digest in the manifest", lost, procs*files, procs)
	}
}

// writeFiles writes N files PREFIX-I.json into DIR, each through Write,
// as a writer process.
func writeFiles(t *testing.T, spec string) {
	f := strings.Fields(spec)
	n, err := strconv.Atoi(f[2])
	if len(f) != 3 || err != nil {
		t.Fatalf("%s=%q: want DIR PREFIX N", writerEnv, spec)
	}
	for i := range n {
		path := filepath.Join(f[0], fmt.Sprintf("%s-%d.json", f[1], i))
		if err := artifact.WriteFile(path, []byte(fmt.Sprintf("{%q: %d}\n", f[1], i))); err != nil {
			t.Fatal(err)
		}
	}
}
