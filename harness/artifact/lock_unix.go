//go:build unix

package artifact

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on the directory dir itself, so
// that cascade processes writing artifacts into one directory update its
// manifest one at a time: each reads the manifest, changes it and
// replaces it under the lock, and none loses another's entry. Locking
// the directory, not a file in it, leaves no lock file behind, and the
// manifest cannot carry the lock: it is replaced by a rename. A file
// system that has no flock (some network ones) is written without it,
// as before locking: an entry lost there makes a file refused the next
// time, never replaced.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EINVAL) {
		err = nil // unlocked, as above
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the last descriptor releases the lock
}
