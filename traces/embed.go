package traces

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// files holds the trace files of this directory, so that the cascade
// binary can replay them wherever it runs.
//
//go:embed scenarios/*.trace races/*.trace counterexamples/*.trace
var files embed.FS

// Embedded directories, in the order Embedded lists them.
const (
	DirScenarios       = "scenarios"
	DirRaces           = "races"
	DirCounterexamples = "counterexamples"
)

// Embedded parses the trace files built into the binary from the given
// directories (DirScenarios, DirRaces, DirCounterexamples; none means all
// three), in directory order and then by file name. Each trace's Path is
// the file's place in the repository, traces/<dir>/<name>.trace, so that
// errors and diffs name it as the checked-out file would be named.
func Embedded(dirs ...string) ([]*Trace, error) {
	if len(dirs) == 0 {
		dirs = []string{DirScenarios, DirRaces, DirCounterexamples}
	}
	var out []*Trace
	for _, dir := range dirs {
		if !slices.Contains([]string{DirScenarios, DirRaces, DirCounterexamples}, dir) {
			return nil, fmt.Errorf("traces: no embedded directory %q (have %s, %s, %s)", dir, DirScenarios, DirRaces, DirCounterexamples)
		}
		entries, err := fs.ReadDir(files, dir)
		if err != nil {
			return nil, fmt.Errorf("traces: embedded %s: %w", dir, err)
		}
		for _, e := range entries { // ReadDir sorts by name
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".trace") {
				continue
			}
			raw, err := files.ReadFile(path.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("traces: embedded %s/%s: %w", dir, e.Name(), err)
			}
			t, err := Parse(path.Join("traces", dir, e.Name()), bytes.NewReader(raw))
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// ShortName names a trace by its directory and file, the way the
// scenario suite and cascade conform list it: traces/races/x.trace is
// race/x, traces/scenarios/y.trace is scenario/y.
func ShortName(t *Trace) string {
	dir, file := path.Split(strings.ReplaceAll(t.Path, "\\", "/"))
	dir = path.Base(strings.TrimSuffix(dir, "/"))
	return strings.TrimSuffix(dir, "s") + "/" + strings.TrimSuffix(file, ".trace")
}

// FindEmbedded returns the embedded trace that name denotes: its Path
// (traces/races/x.trace), that path without the traces/ prefix, or its
// ShortName (race/x). It returns nil when no embedded trace matches.
func FindEmbedded(name string) (*Trace, error) {
	all, err := Embedded()
	if err != nil {
		return nil, err
	}
	name = strings.TrimPrefix(path.Clean(name), "./")
	for _, t := range all {
		if t.Path == name || strings.TrimPrefix(t.Path, "traces/") == name || ShortName(t) == name {
			return t, nil
		}
	}
	return nil, nil
}
