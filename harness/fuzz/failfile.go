package fuzz

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A FailFileError says why a rapid fail file (Config.FailFile) cannot be
// replayed: it cannot be read, it is not a fail file, or rapid ignored it
// (written by another rapid, or for draws the generator no longer makes).
// rapid only logs that and goes on to random runs; cascade makes it an
// error, since a replay that replayed nothing must not pass.
type FailFileError struct {
	Path string
	Why  string
}

func (e *FailFileError) Error() string { return fmt.Sprintf("fail file %s: %s", e.Path, e.Why) }

// CheckFailFile reads path as rapid's loadFailFile (pgregory.net/rapid
// persist.go) does: lines starting with # and blank lines are comments;
// the first other line is VERSION#SEED, every later one a uint64 of the
// recorded draws. It does not compare VERSION with rapid's, which rapid
// keeps to itself: a replay that rapid ignores for its version fails
// with a *FailFileError after the fact (runRapid).
func CheckFailFile(path string) error {
	bad := func(format string, args ...any) error {
		return &FailFileError{Path: path, Why: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return bad("%v", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return bad("not a regular file")
	}
	var data []string
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(data) == 0 {
			version, seed, ok := strings.Cut(s, "#")
			if _, err := strconv.ParseUint(seed, 10, 64); !ok || version == "" || strings.Contains(seed, "#") || err != nil {
				return bad("line %d: %q is not rapid's VERSION#SEED line: not a rapid fail file", line, s)
			}
		} else if _, err := strconv.ParseUint(s, 0, 64); err != nil {
			return bad("line %d: %q is not a recorded draw (a uint64): not a rapid fail file", line, s)
		}
		data = append(data, s)
	}
	if err := sc.Err(); err != nil {
		return bad("%v", err)
	}
	if len(data) == 0 {
		return bad("no VERSION#SEED line: empty, or not a rapid fail file")
	}
	return nil
}
