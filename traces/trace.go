// Package traces defines cascade's one trace format and replays traces on
// the model.
//
// A trace is a text file in the style of cockroachdb/datadriven:
//
//	# A description of what the trace shows.
//	# property: orphan respected
//	# bug: adopt-without-recheck
//
//	create deploy/d1 selector=app=web
//	create rs/r1 labels=app=web owner=deploy/d1,controller,block
//	settle
//	----
//	deploy/d1 live selector=app=web
//	rs/r1 live owners=[deploy/d1 controller block] labels=app=web
//
// Leading `#` lines are the header: `# key: value` lines are headers
// (property, found-by, bug, known, targets, labels), the others describe
// the trace. After the header come stanzas separated by blank lines: one
// or more commands (model.ParseStep syntax, or `settle`), a `----` line,
// and the expected output, which runs to the next blank line. The output
// lists, in order, every request that failed (`! COMMAND -> CODE
// Reason: message`), every property violated (`! violates ...`), and then
// the sorted state dump (model.State.Dump). `#` lines inside a stanza are
// comments.
//
// The same files are written by the model checker and by shrinking, read
// by the datadriven test, by `cascade replay` and by the scenario suite.
package traces

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cascade-k8s/cascade/model"
)

// Header keys with meaning.
const (
	HeaderProperty = "property" // the property the trace violates
	HeaderFoundBy  = "found-by" // the command that produced it
	HeaderBug      = "bug"      // bug switches to replay with, comma-separated
	HeaderKnown    = "known"    // the known-race registry entry (model.KnownRaces) the trace shows
	HeaderTargets  = "targets"  // where the trace runs: model, impl, upstream
	HeaderLabels   = "labels"   // Ginkgo labels
	HeaderReleases = "releases" // the Kubernetes releases the trace holds for (model.ParseReleaseRange); every one without it
	// HeaderKCMReleases names kube-controller-manager's releases apart
	// from kube-apiserver's, which `releases` then names: a trace found
	// on a skewed control plane (model.Release.WithKCM) holds where both
	// hold. Without it `releases` names both components' releases.
	HeaderKCMReleases = "kcm-releases"
)

// Header is one `# key: value` line.
type Header struct {
	Key, Value string
	Line       int
}

// Command is one command line of a stanza.
type Command struct {
	Line   int
	Text   string
	Settle bool       // the `settle` command
	Step   model.Step // otherwise
}

// Stanza is commands and their expected output.
type Stanza struct {
	Commands []Command
	// Expected is the output block; ExpectedFrom/ExpectedTo are the 0-based
	// line range it occupies in the file (To exclusive), for rewriting.
	Expected                 []string
	ExpectedFrom, ExpectedTo int
	SeparatorLine            int
}

// Trace is a parsed trace file.
type Trace struct {
	Path        string
	Description []string
	Headers     []Header
	Stanzas     []Stanza
	lines       []string
}

// Header returns the value of a header key.
func (t *Trace) Header(key string) string {
	for _, h := range t.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// Bugs returns the bug switches the trace names.
func (t *Trace) Bugs() (model.BugSet, error) {
	var set model.BugSet
	v := t.Header(HeaderBug)
	if v == "" || v == "none" {
		return set, nil
	}
	for _, name := range strings.Split(v, ",") {
		b, err := model.BugByName(strings.TrimSpace(name))
		if err != nil {
			return set, t.errAt(t.headerLine(HeaderBug), 1, "%v", err)
		}
		set = set.With(b)
	}
	return set, nil
}

// Releases returns the releases the trace holds for: its `# releases:`
// header, or every release.
func (t *Trace) Releases() (model.ReleaseRange, error) {
	v := t.Header(HeaderReleases)
	if v == "" {
		return model.ReleaseRange{}, nil
	}
	rr, err := model.ParseReleaseRange(v)
	if err != nil {
		return rr, t.errAt(t.headerLine(HeaderReleases), 1, "%v", err)
	}
	return rr, nil
}

// KCMReleases returns the releases of kube-controller-manager the trace
// holds for, and whether its `# kcm-releases:` header names them apart
// from Releases.
func (t *Trace) KCMReleases() (model.ReleaseRange, bool, error) {
	v := t.Header(HeaderKCMReleases)
	if v == "" {
		rr, err := t.Releases()
		return rr, false, err
	}
	rr, err := model.ParseReleaseRange(v)
	if err != nil {
		return rr, true, t.errAt(t.headerLine(HeaderKCMReleases), 1, "%v", err)
	}
	return rr, true, nil
}

// ReleaseFor is the release the trace replays on when r is asked for (the
// zero Release: none named): r when the trace holds for it. With none
// named, the default release if the trace holds for it, else the newest
// its range allows, for kube-apiserver and, where `# kcm-releases:`
// names its releases apart, for kube-controller-manager. An error says
// the trace does not hold for r.
func (t *Trace) ReleaseFor(r model.Release) (model.Release, error) {
	rr, err := t.Releases()
	if err != nil {
		return r, err
	}
	kr, apart, err := t.KCMReleases()
	if err != nil {
		return r, err
	}
	if r != (model.Release{}) {
		if !apart && rr.Contains(r) || apart && rr.Contains(r.Or().APIServer()) && kr.Contains(r.Or().KCM()) {
			return r.Or(), nil
		}
		nf := &NotForRelease{Trace: t.Path, Release: r, Holds: rr}
		if apart {
			nf.KCMHolds = &kr
		}
		return r, nf
	}
	pick := func(rr model.ReleaseRange) model.Release {
		switch {
		case rr.Contains(model.DefaultRelease):
			return model.DefaultRelease
		case rr.Last() != (model.Release{}):
			return rr.Last()
		}
		return rr.From
	}
	return pick(rr).WithKCM(pick(kr)), nil
}

// NotForRelease says a trace does not hold for the release asked.
type NotForRelease struct {
	Trace   string
	Release model.Release
	Holds   model.ReleaseRange
	// KCMHolds, when not nil, is kube-controller-manager's releases
	// (`# kcm-releases:`), Holds then kube-apiserver's.
	KCMHolds *model.ReleaseRange
}

// HoldsFor says which releases the trace holds for.
func (e *NotForRelease) HoldsFor() string {
	if e.KCMHolds == nil {
		return e.Holds.String()
	}
	return fmt.Sprintf("kube-apiserver %s with kube-controller-manager %s", e.Holds, *e.KCMHolds)
}

func (e *NotForRelease) Error() string {
	return fmt.Sprintf("%s holds for %s, not %s (its releases header)", e.Trace, e.HoldsFor(), e.Release.Or())
}

// ReleaseHeaders are the headers of a trace found on release r that
// say which releases it holds for: none on the default release; else
// r's minor (model.Release.MinorRange), since the trace may hold on that
// release only, and for a skewed control plane kube-apiserver's minor in
// `releases` and kube-controller-manager's in `kcm-releases`.
func ReleaseHeaders(r model.Release) []Header {
	r = r.Or()
	switch {
	case r == model.DefaultRelease:
		return nil
	case r.Skewed():
		return []Header{{Key: HeaderReleases, Value: r.APIServer().MinorRange()}, {Key: HeaderKCMReleases, Value: r.KCM().MinorRange()}}
	}
	return []Header{{Key: HeaderReleases, Value: r.MinorRange()}}
}

// ReleaseFlags are the flags that name release r on cascade's command
// line: none for the default release, else --kube-version and, for a
// skewed control plane, --kcm-version.
func ReleaseFlags(r model.Release) string {
	r = r.Or()
	switch {
	case r == model.DefaultRelease:
		return ""
	case r.Skewed():
		return " --kube-version " + r.APIServer().String() + " --kcm-version " + r.KCM().String()
	}
	return " --kube-version " + r.String()
}

func (t *Trace) headerLine(key string) int {
	for _, h := range t.Headers {
		if h.Key == key {
			return h.Line
		}
	}
	return 0
}

// Error is a problem at a place in a trace file.
type Error struct {
	Path      string
	Line, Col int
	Msg       string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.Path, e.Line, e.Col, e.Msg) }

func (t *Trace) errAt(line, col int, format string, args ...any) error {
	return &Error{Path: t.Path, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// ParseFile reads and parses a trace file.
func ParseFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(path, f)
}

// Parse parses a trace; path is used in error messages.
func Parse(path string, r io.Reader) (*Trace, error) {
	t := &Trace{Path: path}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		t.lines = append(t.lines, sc.Text())
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, t.errAt(len(t.lines)+1, 1, "a line longer than 1 MiB: not a trace")
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := t.checkText(); err != nil {
		return nil, err
	}
	i := 0
	for ; i < len(t.lines) && strings.HasPrefix(t.lines[i], "#"); i++ {
		text := strings.TrimSpace(strings.TrimPrefix(t.lines[i], "#"))
		if k, v, found := strings.Cut(text, ":"); found && isHeaderKey(k) {
			if err := t.addHeader(k, strings.TrimSpace(v), i+1); err != nil {
				return nil, err
			}
			continue
		}
		if err := t.nearHeader(text, i+1); err != nil {
			return nil, err
		}
		t.Description = append(t.Description, text)
	}
	for i < len(t.lines) {
		if strings.TrimSpace(t.lines[i]) == "" || strings.HasPrefix(t.lines[i], "#") {
			// a header below the header block would count for nothing
			text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t.lines[i]), "#"))
			if k, ok := headerOf(text); ok {
				return nil, t.errAt(i+1, 1, "a %s header here counts for nothing: headers are the # lines at the top of the file, before any blank line", k)
			}
			i++
			continue
		}
		st, next, err := t.parseStanza(i)
		if err != nil {
			return nil, err
		}
		t.Stanzas = append(t.Stanzas, st)
		i = next
	}
	if len(t.Stanzas) == 0 {
		return nil, t.errAt(len(t.lines)+1, 1, "expected at least one stanza (commands, ----, expected output)")
	}
	if err := t.checkHeaders(); err != nil {
		return nil, err
	}
	return t, nil
}

// Targets are the names a `# targets:` header may list: where a trace
// runs. (impl-stepped runs impl's traces and kubeconfig upstream's: they
// are not named.)
var Targets = []string{"model", "impl", "upstream", "upstream-stepped"}

// checkHeaders checks the headers with a vocabulary, so that a misspelt
// one is an input error where it is written, not a trace that silently
// runs nowhere, excuses nothing or fails as a divergence: the targets,
// the bug switches, the known race (an ID of the registry), the
// property and the releases.
func (t *Trace) checkHeaders() error {
	for _, h := range t.Headers {
		switch h.Key {
		case HeaderTargets:
			for _, name := range strings.Split(h.Value, ",") {
				if name = strings.TrimSpace(name); !slices.Contains(Targets, name) {
					return t.errAt(h.Line, 1, "unknown target %q in the targets header (valid: %s)", name, strings.Join(Targets, ", "))
				}
			}
		case HeaderKnown:
			if _, ok := model.KnownRaceByID(h.Value); !ok {
				return t.errAt(h.Line, 1, "unknown known race %q in the known header (cascade check --list-known lists the registry's IDs)", h.Value)
			}
		case HeaderProperty:
			if _, err := model.PropertyByName(h.Value); err != nil {
				return t.errAt(h.Line, 1, "%v", err)
			}
		}
	}
	if _, err := t.Bugs(); err != nil {
		return err
	}
	if _, err := t.Releases(); err != nil {
		return err
	}
	_, _, err := t.KCMReleases()
	return err
}

// addHeader adds a header line, refusing an empty value and a key given
// twice (only the first would count).
func (t *Trace) addHeader(key, value string, line int) error {
	if value == "" {
		return t.errAt(line, 1, "the %s header is empty", key)
	}
	if first := t.headerLine(key); first > 0 {
		return t.errAt(line, 1, "a second %s header (the first is at line %d): give one, its values comma-separated where it takes several", key, first)
	}
	t.Headers = append(t.Headers, Header{Key: key, Value: value, Line: line})
	return nil
}

// nearHeader refuses a description line that reads like a misspelt
// header, which would otherwise be taken as prose and the trace run
// without it: "key: value" whose value reads like a header's (one word
// or a comma-separated list, a property's name, a command) rather than
// prose, and whose key is a header key but for case or a plural s
// ("Targets:", "target:", "bugs:") or, for keys of six letters or more,
// one edit from one ("tagrets:"; two for those of eight). Prose keeps
// its sentences: "Known: the GC races its informer." and "released: it
// keeps its reference" are description.
func (t *Trace) nearHeader(text string, line int) error {
	if h, k, ok := nearHeaderKey(text); ok {
		return t.errAt(line, 1, "unknown header %q: did you mean %q? (headers: %s)", k, h, strings.Join(headerKeys, ", "))
	}
	return nil
}

// nearHeaderKey is nearHeader's test: the header key text resembles and
// the key it wrote.
func nearHeaderKey(text string) (header, key string, ok bool) {
	k, v, found := strings.Cut(text, ":")
	if !found || k == "" || strings.ContainsAny(k, " \t") || !headerLike(strings.TrimSpace(v)) {
		return "", "", false
	}
	lk := strings.ToLower(k)
	for _, h := range headerKeys {
		edits := 0
		switch {
		case len(h) >= 8:
			edits = 2
		case len(h) >= 6:
			edits = 1
		}
		if lk == h || lk+"s" == h || lk == h+"s" || editDistance(lk, h) <= edits {
			return h, k, true
		}
	}
	return "", "", false
}

// headerLike reports whether v reads like a header's value: a word or a
// comma-separated list of words, a property's name or a cascade command.
func headerLike(v string) bool {
	if _, err := model.PropertyByName(v); err == nil {
		return true
	}
	return v != "" && (strings.HasPrefix(v, "cascade ") || !strings.Contains(strings.ReplaceAll(v, ", ", ","), " "))
}

// headerKeys are the header keys, in the order README lists them.
var headerKeys = []string{HeaderProperty, HeaderFoundBy, HeaderBug, HeaderKnown, HeaderTargets, HeaderLabels, HeaderReleases, HeaderKCMReleases}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkText refuses a file that is not text (a NUL byte or invalid
// UTF-8), naming the first bad line, before any line of it is quoted in
// an error.
func (t *Trace) checkText() error {
	for i, l := range t.lines {
		if strings.IndexByte(l, 0) >= 0 || !utf8.ValidString(l) {
			return t.errAt(i+1, 1, "not a text file (a NUL byte or invalid UTF-8): not a trace")
		}
	}
	return nil
}

func isHeaderKey(k string) bool { return slices.Contains(headerKeys, k) }

// headerOf is the header key a "key: value" comment names, exactly or
// misspelt (nearHeaderKey).
func headerOf(text string) (string, bool) {
	if k, _, found := strings.Cut(text, ":"); found && isHeaderKey(k) {
		return k, true
	}
	h, _, near := nearHeaderKey(text)
	return h, near
}

func (t *Trace) parseStanza(i int) (Stanza, int, error) {
	var st Stanza
	for ; i < len(t.lines); i++ {
		line := t.lines[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "----" {
			if len(st.Commands) == 0 {
				return st, 0, t.errAt(i+1, 1, "expected a command before ----")
			}
			break
		}
		if trimmed == "" {
			return st, 0, t.errAt(i+1, 1, "expected ---- after the commands of this stanza")
		}
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		text := stripComment(line)
		cmd := Command{Line: i + 1, Text: strings.TrimSpace(text)}
		if cmd.Text == "settle" {
			cmd.Settle = true
		} else {
			lead := len(text) - len(strings.TrimLeft(text, " \t"))
			step, err := model.ParseStep(cmd.Text)
			if err != nil {
				col := 1
				if se, ok := err.(*model.SyntaxError); ok {
					col, err = se.Col+lead, fmt.Errorf("%s", se.Msg)
				}
				return st, 0, t.errAt(i+1, col, "%v", err)
			}
			cmd.Step = step
		}
		st.Commands = append(st.Commands, cmd)
	}
	if i == len(t.lines) {
		return st, 0, t.errAt(i, 1, "expected ---- after the commands of this stanza, found end of file")
	}
	st.SeparatorLine = i + 1
	i++
	st.ExpectedFrom = i
	for ; i < len(t.lines) && strings.TrimSpace(t.lines[i]) != ""; i++ {
		if strings.HasPrefix(strings.TrimSpace(t.lines[i]), "#") {
			continue
		}
		st.Expected = append(st.Expected, strings.TrimSpace(stripComment(t.lines[i])))
	}
	st.ExpectedTo = i
	return st, i, nil
}

// stripComment drops a trailing "  # comment".
func stripComment(line string) string {
	if j := strings.Index(line, " #"); j >= 0 {
		return strings.TrimRight(line[:j], " \t")
	}
	return line
}

// Rewrite returns the file's text with each stanza's expected block
// replaced by outputs[i]; everything else is kept byte for byte.
func (t *Trace) Rewrite(outputs [][]string) string {
	var b strings.Builder
	prev := 0
	for i, st := range t.Stanzas {
		for _, l := range t.lines[prev:st.ExpectedFrom] {
			b.WriteString(l + "\n")
		}
		for _, l := range outputs[i] {
			b.WriteString(l + "\n")
		}
		prev = st.ExpectedTo
	}
	for _, l := range t.lines[prev:] {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// Format renders a new trace from a description, headers and stanzas of
// commands with their outputs (used by the checker and by shrinking).
func Format(description []string, headers []Header, stanzas []Written) string {
	var b strings.Builder
	for _, d := range description {
		b.WriteString("# " + d + "\n")
	}
	for _, h := range headers {
		b.WriteString("# " + h.Key + ": " + h.Value + "\n")
	}
	for _, s := range stanzas {
		b.WriteString("\n")
		for _, c := range s.Commands {
			b.WriteString(c + "\n")
		}
		b.WriteString("----\n")
		for _, l := range s.Output {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// Written is a stanza to be formatted.
type Written struct {
	Commands []string
	Output   []string
}
