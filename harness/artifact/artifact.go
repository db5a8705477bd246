// Package artifact writes cascade's output files (counterexample traces,
// failure histories, evidence, reports) so that cascade never replaces a
// file it did not write.
//
// Every file written through this package is recorded, with the SHA-256
// of what was written, in a manifest beside it: ManifestName in the same
// directory, in sha256sum's format ("HEX  NAME" per line), so that
// 'sha256sum -c .cascade-artifacts' checks a directory by hand. A path
// that does not exist is written. A path that exists is replaced only
// when the manifest lists it with the digest of its present content: a
// file cascade wrote and nobody changed since. Anything else (a user's
// file, a file of an older cascade that kept no manifest, a report the
// user edited) is refused with an *ExistsError, and nothing is written.
//
// The manifest is updated after the file is in place, and replaced
// atomically. Processes writing into one directory take turns (an
// flock(2) on the directory) to move a file into place and update the
// manifest, so none loses another's entry. A crash between placing a
// file and recording it leaves it unlisted; it is then refused the next
// time, never overwritten unseen: every failure of this scheme errs
// towards keeping a file.
package artifact

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// ManifestName is the file, in each directory cascade writes artifacts
// to, that lists them with their digests.
const ManifestName = ".cascade-artifacts"

// ErrExists is matched (errors.Is) by every *ExistsError.
var ErrExists = errors.New("file exists and cascade did not write it")

// ExistsError is the error for a path that exists and that cascade may
// not replace: the manifest does not list it, or lists other content.
type ExistsError struct {
	// Path is the file left alone.
	Path string
	// Changed is set when the manifest lists the file but its content
	// changed since cascade wrote it.
	Changed bool
}

func (e *ExistsError) Error() string {
	why := "cascade did not write it"
	if e.Changed {
		why = "it changed since cascade wrote it"
	}
	return fmt.Sprintf("%s exists and %s; not overwriting it (move it away, or write elsewhere)", e.Path, why)
}

// Is makes errors.Is(err, ErrExists) true.
func (e *ExistsError) Is(target error) bool { return target == ErrExists }

// mu serialises this process's artifact writes; lockDir serialises
// processes' manifest updates in one directory.
var mu sync.Mutex

// WriteFile writes data to path under the package's rule, creating the
// directory if need be.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write writes what put writes to path under the package's rule. put
// writes to a temporary file beside path; path is replaced only when put
// and the write succeed, so a failed put leaves the old file, or none.
// Writes are serialised in the process, so put must not write an
// artifact itself.
func Write(path string, put func(io.Writer) error) error {
	mu.Lock()
	defer mu.Unlock()
	// refused before put does its work, and checked again by commit
	if _, _, _, err := claim(path); err != nil {
		return err
	}
	h := sha256.New()
	err := replace(path, func(w io.Writer) error { return put(io.MultiWriter(w, h)) },
		func(tmp string) error { return commit(path, h, tmp) })
	if err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return err
}

// commit moves the file tmp, whose content h has hashed, to path and
// lists it in the manifest, holding the directory's lock: the manifest
// is read again under it, so that the rule is checked against, and the
// entry added to, what other processes recorded meanwhile.
func commit(path string, h hash.Hash, tmp string) error {
	dir, name := split(path)
	return withManifest(dir, func(m *manifest) error {
		if err := m.place(tmp, path, name); err != nil {
			return err
		}
		return m.record(name, h)
	})
}

// withManifest calls change with dir's manifest as it is now, holding
// the directory's lock (lockDir) until change returns.
func withManifest(dir string, change func(*manifest) error) error {
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	m, err := readManifest(dir)
	if err != nil {
		return err
	}
	return change(m)
}

// replace writes what put writes to a new temporary file beside path and
// moves it there with place; on any failure, a panic included, it
// removes the temporary file.
func replace(path string, put func(io.Writer) error, place func(tmp string) error) (err error) {
	tmp, err := createTemp(path)
	if err != nil {
		return err
	}
	placed := false
	defer func() {
		if !placed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name()) // created by this call
		}
	}()
	bw := bufio.NewWriter(tmp)
	if err := put(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := place(tmp.Name()); err != nil {
		return err
	}
	placed = true
	return nil
}

// createTemp creates a new file beside path, named after it, with mode
// 0644 less the umask, as os.WriteFile would give path itself.
func createTemp(path string) (*os.File, error) {
	dir, name := split(path) // the rename or link into place must stay on path's file system
	for try := 0; ; try++ {
		p := filepath.Join(dir, fmt.Sprintf(".%s.cascade-%d", name, rand.Uint32()))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

// place moves the file tmp to path (named name in m's directory), checking
// the rule again first: a file may have appeared at path, or changed,
// since claim. A path that is still absent is linked, which fails rather
// than replace a file created in between; a file cascade wrote is
// replaced by a rename.
func (m *manifest) place(tmp, path, name string) error {
	exists, err := m.mayReplace(path, name)
	if err != nil {
		return err
	}
	if !exists {
		err := os.Link(tmp, path)
		if errors.Is(err, fs.ErrExist) {
			return &ExistsError{Path: path}
		}
		if err == nil {
			return os.Remove(tmp)
		}
		// no hard links on this file system: rename, as for a file
		// cascade wrote
	}
	return os.Rename(tmp, path)
}

// Move renames src, a file cascade wrote elsewhere, to path under the
// package's rule, and records it. Both must be on one file system.
func Move(src, path string) error {
	mu.Lock()
	defer mu.Unlock()
	if _, _, _, err := claim(path); err != nil {
		return err
	}
	h, err := digestFile(src)
	if err != nil {
		return err
	}
	return commit(path, h, src)
}

// File is an artifact written as it goes (a log a person may follow while
// it grows). Create checks the rule once; Close records the digest of
// everything written. A process killed before Close leaves the file
// unlisted, so the next run refuses it rather than replace it.
type File struct {
	mu   sync.Mutex // os/exec copies a child's stdout and stderr from two goroutines
	f    *os.File
	h    hash.Hash
	dir  string
	name string
}

// Create opens path for writing under the package's rule, truncating a
// file cascade wrote before.
func Create(path string) (*File, error) {
	mu.Lock()
	defer mu.Unlock()
	m, name, exists, err := claim(path)
	if err != nil {
		return nil, err
	}
	// the path was checked: a new file must still be new (O_EXCL), and a
	// file cascade wrote is not followed should it have become a link
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if exists {
		flags = os.O_WRONLY | os.O_TRUNC | syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, &ExistsError{Path: path}
	}
	if err != nil {
		return nil, err
	}
	return &File{f: f, h: sha256.New(), dir: m.dir, name: name}, nil
}

// Name is the file's path, as given to Create.
func (f *File) Name() string { return f.f.Name() }

// Write writes p to the file.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.f.Write(p)
	f.h.Write(p[:n])
	return n, err
}

// Close closes the file and lists it, with its digest, in the manifest
// as it is now (other files may have been recorded since Create).
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.f.Close(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return recordAnew(f.dir, f.name, f.h)
}

// recordAnew lists name with h's digest in dir's manifest as it is now,
// read again under the directory's lock: other files may have been
// recorded since this one was claimed. The caller holds mu.
func recordAnew(dir, name string, h hash.Hash) error {
	return withManifest(dir, func(m *manifest) error { return m.record(name, h) })
}

// claim reads the manifest of path's directory, creating the directory
// if need be, and checks that path may be written; exists says whether
// it holds a file (cascade's). The caller holds mu.
func claim(path string) (m *manifest, name string, exists bool, err error) {
	dir, name := split(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", false, err
	}
	if m, err = readManifest(dir); err != nil {
		return nil, "", false, err
	}
	if exists, err = m.mayReplace(path, name); err != nil {
		return nil, "", false, err
	}
	return m, name, exists, nil
}

// split is path's directory ("." for a bare name) and file name.
func split(path string) (dir, name string) {
	dir, name = filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, name
}

// Check reports, without writing anything, whether each path may be
// written now: a command calls it before long work, so that an output
// path holding a file cascade did not write is refused at the start and
// not after the work.
func Check(paths ...string) error {
	mu.Lock()
	defer mu.Unlock()
	for _, path := range paths {
		dir, name := split(path)
		m, err := readManifest(dir)
		if errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("%s: %s is not a directory", path, filepath.Clean(dir))
		}
		if err != nil {
			return err
		}
		if _, err := m.mayReplace(path, name); err != nil {
			return err
		}
	}
	return nil
}

// Record lists the file at path, as it is now, as cascade's: for a file a
// process cascade started wrote (Ginkgo's JUnit report, a test binary)
// at a path Check allowed before it started. A path that does not exist
// (the process never wrote it) is left out.
func Record(path string) error {
	mu.Lock()
	defer mu.Unlock()
	h, err := digestFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	dir, name := split(path)
	return recordAnew(dir, name, h)
}

// manifest is one directory's manifest: file name to hex digest.
type manifest struct {
	dir     string
	digests map[string]string
}

// readManifest reads dir's manifest; a missing one is empty. A manifest
// cascade cannot parse is an error rather than something to replace: it
// may not be cascade's.
func readManifest(dir string) (*manifest, error) {
	m := &manifest{dir: dir, digests: map[string]string{}}
	path := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if d, err := hex.DecodeString(sum); !ok || err != nil || len(d) != sha256.Size || name == "" {
			return nil, fmt.Errorf("%s:%d: not a line of cascade's artifact manifest (HEX  NAME); not touching the directory", path, i+1)
		}
		m.digests[name] = sum
	}
	return m, nil
}

// mayReplace reports whether path (named name in m's directory) may be
// written: it does not exist, or m lists it with its present digest;
// exists says which.
func (m *manifest) mayReplace(path, name string) (exists bool, err error) {
	if name == ManifestName {
		return false, fmt.Errorf("%s: the name of cascade's artifact manifest", path)
	}
	if strings.Contains(name, "\n") {
		return false, fmt.Errorf("%q: a file name with a newline cannot be listed in the manifest", path)
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	want, listed := m.digests[name]
	if !listed || !info.Mode().IsRegular() {
		return true, &ExistsError{Path: path}
	}
	h, err := digestFile(path)
	if err != nil {
		return true, err
	}
	if hex.EncodeToString(h.Sum(nil)) != want {
		return true, &ExistsError{Path: path, Changed: true}
	}
	return true, nil
}

// record lists name with h's digest and replaces the manifest file.
func (m *manifest) record(name string, h hash.Hash) error {
	m.digests[name] = hex.EncodeToString(h.Sum(nil))
	names := make([]string, 0, len(m.digests))
	for n := range m.digests {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", m.digests[n], n)
	}
	path := filepath.Join(m.dir, ManifestName)
	put := func(w io.Writer) error { _, err := w.Write(b.Bytes()); return err }
	if err := replace(path, put, func(tmp string) error { return os.Rename(tmp, path) }); err != nil {
		return fmt.Errorf("record %s in %s: %w", name, path, err)
	}
	return nil
}

// digestFile hashes the file at path.
func digestFile(path string) (hash.Hash, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h, nil
}
