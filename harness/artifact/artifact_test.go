package artifact_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cascade-k8s/cascade/harness/artifact"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A file cascade did not write is never replaced, and the refusal names it.
func TestRefusesAFileCascadeDidNotWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.txt")
	if err := os.WriteFile(path, []byte("the user's notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := artifact.WriteFile(path, []byte("cascade's summary\n"))
	refusedAndKept(t, err, path, "the user's notes\n")
}

// refusedAndKept checks that err refuses path, naming it, and that path
// still holds want, alone in its directory: no temporary file was left.
func refusedAndKept(t *testing.T, err error, path, want string) {
	t.Helper()
	if !errors.Is(err, artifact.ErrExists) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want an ExistsError naming %s", err, path)
	}
	if got := read(t, path); got != want {
		t.Errorf("%s now reads %q", path, got)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the refused write left files behind: %v", entries)
	}
}

// A file cascade wrote is replaced on the next run, and the manifest
// lists its new digest in sha256sum's format.
func TestReplacesItsOwnFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "failure.trace")
	for _, content := range []string{"first\n", "second\n"} {
		if err := artifact.WriteFile(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, path); got != content {
			t.Fatalf("got %q, want %q", got, content)
		}
	}
	sum := sha256.Sum256([]byte("second\n"))
	want := hex.EncodeToString(sum[:]) + "  failure.trace\n"
	if got := read(t, filepath.Join(dir, artifact.ManifestName)); got != want {
		t.Errorf("manifest %q, want %q", got, want)
	}
}

// A file cascade wrote that was changed since is the user's now.
func TestRefusesItsOwnFileOnceChanged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.html")
	if err := artifact.WriteFile(path, []byte("<html>cascade</html>")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("<html>annotated by hand</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ee *artifact.ExistsError
	if err := artifact.WriteFile(path, []byte("<html>again</html>")); !errors.As(err, &ee) || !ee.Changed {
		t.Fatalf("got %v, want an ExistsError with Changed", err)
	}
	if got := read(t, path); got != "<html>annotated by hand</html>" {
		t.Errorf("the edited file now reads %q", got)
	}
}

// A failed write leaves the old file as it was, and no temporary file.
func TestFailedWriteKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "evidence.jsonl")
	if err := artifact.WriteFile(path, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("encoder failed")
	err := artifact.Write(path, func(w io.Writer) error {
		_, _ = w.Write([]byte("{\"half\":"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the writer's error", err)
	}
	if got := read(t, path); got != "{}\n" {
		t.Errorf("the old file now reads %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("want the file and the manifest, got %v", entries)
	}
	if err := artifact.WriteFile(path, []byte("[]\n")); err != nil {
		t.Errorf("after a failed write the file is still cascade's: %v", err)
	}
}

// rapid's fail file is moved in, and counts as cascade's afterwards; a
// move onto a file cascade did not write is refused and keeps both.
func TestMove(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "run.fail")
	if err := os.WriteFile(src, []byte("v0.4.8#1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out", "run.fail")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Move(src, out); !errors.Is(err, artifact.ErrExists) {
		t.Fatalf("got %v, want ErrExists", err)
	}
	if read(t, out) != "mine" || read(t, src) != "v0.4.8#1\n" {
		t.Fatal("a refused move changed a file")
	}
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Move(src, out); err != nil {
		t.Fatal(err)
	}
	if err := artifact.WriteFile(out, []byte("v0.4.8#2\n")); err != nil {
		t.Errorf("the moved file is not cascade's: %v", err)
	}
}

// A manifest cascade cannot read is not replaced either.
func TestRefusesAForeignManifest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, artifact.ManifestName), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := artifact.WriteFile(filepath.Join(dir, "a.trace"), nil)
	if err == nil || !strings.Contains(err.Error(), artifact.ManifestName+":1:") {
		t.Fatalf("got %v, want an error naming the manifest's line", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.trace")); err == nil {
		t.Error("a.trace was written beside a manifest cascade cannot read")
	}
}

// Concurrent writes into one directory keep every entry of the manifest.
func TestConcurrentWritesKeepEveryEntry(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := artifact.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%d.json", i)), []byte("{}")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range 16 {
		if err := artifact.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%d.json", i)), []byte("{\"again\":true}")); err != nil {
			t.Errorf("shard-%d.json was lost from the manifest: %v", i, err)
		}
	}
}

// A log written as it grows is cascade's once closed, and a file cascade
// did not write is not truncated to start one.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "suite-upstream.log")
	if err := os.WriteFile(path, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := artifact.Create(path); !errors.Is(err, artifact.ErrExists) {
		t.Fatalf("got %v, want ErrExists", err)
	}
	if read(t, path) != "kept" {
		t.Fatal("Create truncated a file cascade did not write")
	}
	path = filepath.Join(dir, "suite-impl.log")
	for _, line := range []string{"run 1\n", "run 2\n"} {
		f, err := artifact.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, line); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := read(t, path); got != line {
			t.Fatalf("got %q, want %q", got, line)
		}
	}
}

// Check writes nothing, passes paths in directories not made yet, and
// names the first path it refuses.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(mine, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(dir, "junit.xml")
	if err := artifact.WriteFile(ours, []byte("<testsuites/>")); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Check(ours, filepath.Join(dir, "new", "a.trace")); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	if err := artifact.Check(ours, mine); !errors.Is(err, artifact.ErrExists) || !strings.Contains(err.Error(), mine) {
		t.Fatalf("got %v, want ErrExists naming %s", err, mine)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("Check created a directory")
	}
}

// A file another process wrote at a path Check allowed is cascade's once
// recorded; an unwritten path is left out.
func TestRecord(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "junit-upstream.xml")
	if err := artifact.Check(report); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, []byte("<testsuites/>"), 0o644); err != nil { // Ginkgo, say
		t.Fatal(err)
	}
	if err := artifact.Record(report); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Record(filepath.Join(dir, "never-written.json")); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Check(report, filepath.Join(dir, "never-written.json")); err != nil {
		t.Errorf("after Record: %v", err)
	}
	if man := read(t, filepath.Join(dir, artifact.ManifestName)); strings.Count(man, "\n") != 1 {
		t.Errorf("manifest %q, want the report's line only", man)
	}
}

// A file that appears at the path while cascade writes (after the check,
// before the file is in place) is kept, and the write refused.
func TestFileAppearingDuringTheWriteIsKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.html")
	err := artifact.Write(path, func(w io.Writer) error {
		if err := os.WriteFile(path, []byte("written meanwhile"), 0o644); err != nil {
			return err
		}
		_, err := io.WriteString(w, "<html/>")
		return err
	})
	refusedAndKept(t, err, path, "written meanwhile")
}

// A put that panics leaves no temporary file behind.
func TestPanickingWriteLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	func() {
		defer func() { _ = recover() }()
		_ = artifact.Write(filepath.Join(dir, "a.trace"), func(io.Writer) error { panic("boom") })
	}()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// Two goroutines writing one File (a child's stdout and stderr, as
// os/exec copies them) leave a digest that matches the file.
func TestCreateConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "suite-upstream.log")
	f, err := artifact.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				fmt.Fprintf(f, "stream %d line %d\n", g, i)
			}
		}()
	}
	wg.Wait()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Check(path); err != nil {
		t.Errorf("the recorded digest does not match the file: %v", err)
	}
}

// An output directory that is a file is refused before the work.
func TestCheckRefusesAFileAsDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := artifact.Check(filepath.Join(file, "summary.txt")); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("got %v, want an error saying %s is not a directory", err, file)
	}
}
