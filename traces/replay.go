package traces

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cascade-k8s/cascade/model"
)

// StanzaResult is what replaying one stanza produced.
type StanzaResult struct {
	Output     []string
	Violations []*model.Violation
}

// Replay runs a trace on the model, on the release Trace.ReleaseFor picks
// with none named, and returns each stanza's output. A command that
// cannot be taken (a GC step that is not enabled, an owner that cannot be
// resolved) is an error naming file and line.
func Replay(t *Trace) ([]StanzaResult, *model.State, error) {
	return ReplayOn(t, model.Release{})
}

// ReplayOn is Replay on release r (the zero Release: as Replay). A trace
// that does not hold for r is an error, *NotForRelease.
func ReplayOn(t *Trace, r model.Release) ([]StanzaResult, *model.State, error) {
	bugs, err := t.Bugs()
	if err != nil {
		return nil, nil, err
	}
	rel, err := t.ReleaseFor(r)
	if err != nil {
		return nil, nil, err
	}
	return replayModel(t, &model.Model{Bugs: bugs, Release: rel})
}

// Model is the model a trace replays on with no release named: its bug
// switches, on the release ReleaseFor picks.
func (t *Trace) Model() (*model.Model, error) {
	bugs, err := t.Bugs()
	if err != nil {
		return nil, err
	}
	rel, err := t.ReleaseFor(model.Release{})
	if err != nil {
		return nil, err
	}
	return &model.Model{Bugs: bugs, Release: rel}, nil
}

// ReplayIgnoringReleases replays t on release r whatever its releases
// header says, to show that the trace depends on the release.
func ReplayIgnoringReleases(t *Trace, r model.Release) ([]StanzaResult, *model.State, error) {
	bugs, err := t.Bugs()
	if err != nil {
		return nil, nil, err
	}
	return replayModel(t, &model.Model{Bugs: bugs, Release: r})
}

func replayModel(t *Trace, m *model.Model) ([]StanzaResult, *model.State, error) {
	s := model.NewState()
	var results []StanzaResult
	for _, st := range t.Stanzas {
		var res StanzaResult
		var out []string
		seen := map[string]bool{}
		note := func(vs []*model.Violation) {
			for _, v := range vs {
				line := "! violates " + v.Error()
				if !seen[line] {
					seen[line] = true
					out = append(out, line)
					res.Violations = append(res.Violations, v)
				}
			}
		}
		for _, c := range st.Commands {
			if c.Settle {
				next, steps, err := m.Settle(s)
				if err != nil {
					return nil, nil, t.errAt(c.Line, 1, "settle: %v", err)
				}
				for _, sd := range steps {
					note(m.CheckTransition(&model.Transition{Prev: s, Next: sd.State, Step: &sd.Step, Result: sd.Result}))
					s = sd.State
				}
				s = next
				note(m.CheckQuiescent(s))
				continue
			}
			next, r, err := m.Apply(s, c.Step)
			if err != nil {
				return nil, nil, t.errAt(c.Line, 1, "%s: %v", c.Text, err)
			}
			if !r.OK() {
				out = append(out, "! "+c.Text+" -> "+r.String())
			}
			note(m.CheckTransition(&model.Transition{Prev: s, Next: next, Step: &c.Step, Result: r}))
			s = next
		}
		res.Output = append(out, s.Dump()...)
		results = append(results, res)
	}
	return results, s, nil
}

// Diff compares replayed outputs with a trace's expectations and returns
// an error naming the first stanza that differs, with a line diff.
func Diff(t *Trace, results []StanzaResult) error {
	for i, st := range t.Stanzas {
		got := results[i].Output
		if slices.Equal(got, st.Expected) {
			continue
		}
		last := st.Commands[len(st.Commands)-1]
		var b strings.Builder
		fmt.Fprintf(&b, "%s:%d: stanza %d (ending with %q) differs from the model (-expected +model):\n", t.Path, st.SeparatorLine, i+1, last.Text)
		for _, l := range DiffLines(st.Expected, got) {
			b.WriteString("  " + l + "\n")
		}
		return fmt.Errorf("%s", strings.TrimRight(b.String(), "\n"))
	}
	return nil
}

// DiffLines is a small LCS diff of two line lists: lines prefixed "  "
// are common, "- " only in a, "+ " only in b.
func DiffLines(a, b []string) []string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, "  "+a[i])
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "- "+a[i])
			i++
		default:
			out = append(out, "+ "+b[j])
			j++
		}
	}
	return out
}

// CheckHeaders verifies that a trace with a `# property:` header really
// violates that property, that one without it violates nothing but what
// `# known:` allows, and that a trace with `# known:` shows that race: a
// violation the model's registry classifies as it (conform credits a
// passing trace's header as the race shown, so the header must be true).
func CheckHeaders(t *Trace, results []StanzaResult) error {
	want := t.Header(HeaderProperty)
	var got []*model.Violation
	for _, r := range results {
		got = append(got, r.Violations...)
	}
	if known := t.Header(HeaderKnown); known != "" && !slices.ContainsFunc(got, func(v *model.Violation) bool { return v.Known == known }) {
		return t.errAt(t.headerLine(HeaderKnown), 1, "the trace names known race %s, but replaying it shows no violation the registry classifies as %s", known, known)
	}
	if want == "" {
		for _, v := range got {
			if v.Known == "" || v.Known != t.Header(HeaderKnown) {
				return t.errAt(1, 1, "unexpected violation: %v (add `# property: %s` if the trace is meant to show it)", v, v.Property)
			}
		}
		return nil
	}
	if _, err := model.PropertyByName(want); err != nil {
		return t.errAt(t.headerLine(HeaderProperty), 1, "%v", err)
	}
	for _, v := range got {
		if v.Property == want {
			return nil
		}
	}
	return t.errAt(t.headerLine(HeaderProperty), 1, "the trace declares property %q but replaying it violates no such property", want)
}
