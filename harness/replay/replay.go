// Package replay runs cascade traces on real targets: client steps through
// harness/driver, `settle` by waiting for the target to go quiet, and GC or
// controller steps through a stepped target when the target has one. Each
// stanza's output is compared with the trace's expectation the way the
// model's replay compares it, except that a refused request is compared by
// status code and reason only: the model cannot know a real server's exact
// wording.
package replay

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// Target is what a trace replays against.
type Target interface {
	// Settle waits until the target is quiescent: its GC and controllers
	// have nothing left to do with the driver's objects.
	Settle(ctx context.Context, d *driver.Driver) error
	// Step performs one internal (GC or controller) step, or says it
	// cannot: targets that are not steppable return ErrNotSteppable.
	Step(ctx context.Context, st model.Step) (model.Result, error)
}

// StateStepper is a Target that takes each internal step knowing the
// model's states before and after it (the stepped upstream target, which
// reads from them what IO the real controller manager is to do), and the
// model's result of the step: Run calls StepWith instead of Step when the
// model can take the step.
type StateStepper interface {
	StepWith(ctx context.Context, st model.Step, prev, next *model.State, want model.Result) (model.Result, error)
}

// ErrNotSteppable is returned by targets that cannot take internal steps
// one at a time (the upstream kube-controller-manager).
var ErrNotSteppable = fmt.Errorf("this target cannot be stepped: the trace's GC or controller steps need the model or impl")

// Runnable reports whether a trace can run on a target named name: its
// `# targets:` header lists it (no header means every target).
func Runnable(t *traces.Trace, name string) bool {
	h := t.Header(traces.HeaderTargets)
	if h == "" {
		return true
	}
	for _, x := range strings.Split(h, ",") {
		if strings.TrimSpace(x) == name {
			return true
		}
	}
	return false
}

// Run replays a trace on a target through d, running the model in
// lockstep so that if-rv=N can be mapped to real resourceVersions. It
// returns each stanza's real output.
func Run(ctx context.Context, t *traces.Trace, d *driver.Driver, target Target) ([][]string, error) {
	m, err := t.Model()
	if err != nil {
		return nil, err
	}
	s := model.NewState()
	rv := func(tg model.Target, n int) bool {
		o := s.Lookup(tg.Kind, tg.Namespace, tg.Name)
		return o != nil && o.RV == n
	}
	var outs [][]string
	for _, st := range t.Stanzas {
		var out []string
		for _, c := range st.Commands {
			if c.Settle {
				if err := target.Settle(ctx, d); err != nil {
					return nil, fmt.Errorf("%s:%d: settle: %w", t.Path, c.Line, err)
				}
				if n, _, err := m.Settle(s); err == nil {
					s = n
				}
				continue
			}
			var r model.Result
			ss, withState := target.(StateStepper)
			switch {
			case c.Step.Actor == model.ActorClient:
				r, err = d.Do(ctx, c.Step, rv)
			case withState:
				next, want, merr := m.Apply(s, c.Step)
				if merr != nil {
					return nil, fmt.Errorf("%s:%d: %s: the model cannot take it: %w", t.Path, c.Line, c.Text, merr)
				}
				r, err = ss.StepWith(ctx, c.Step, s, next, want)
			default:
				r, err = target.Step(ctx, c.Step)
			}
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", t.Path, c.Line, c.Text, err)
			}
			if !r.OK() {
				out = append(out, "! "+c.Text+" -> "+r.String())
			}
			if n, _, err := m.Apply(s, c.Step); err == nil {
				s = n
			}
		}
		dump, err := eventualDump(ctx, d, out, st.Expected)
		if err != nil {
			return nil, err
		}
		outs = append(outs, append(out, dump...))
	}
	return outs, nil
}

// eventualDump dumps the target and, while the stanza's output differs
// from what the trace expects, dumps again for up to a second: a GC
// writes its Warning events through client-go's asynchronous broadcaster
// (impl and kube-controller-manager alike), so an event may land just
// after the step that emitted it. Any other difference stays and is
// reported.
func eventualDump(ctx context.Context, d *driver.Driver, out, expected []string) ([]string, error) {
	deadline := time.Now().Add(time.Second)
	for {
		dump, err := d.Dump(ctx)
		if err != nil || slices.Equal(comparable(append(slices.Clip(out), dump...)), comparable(expected)) || time.Now().After(deadline) {
			return dump, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var refused = regexp.MustCompile(`^(! .* -> \d+ \w+)(: .*)?$`)

// comparable reduces an output to what a real target can be held to:
// refused requests by code and reason, no property-violation lines (real
// targets are judged by the harness's own checks), and the state dump.
func comparable(lines []string) []string {
	var out []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "! violates "):
		case strings.HasPrefix(l, "! "):
			if m := refused.FindStringSubmatch(l); m != nil {
				out = append(out, m[1])
			} else {
				out = append(out, l)
			}
		default:
			out = append(out, l)
		}
	}
	return out
}

// Diff compares a real replay with the trace's expectations, naming the
// first stanza that differs with a line diff (-expected +target).
func Diff(t *traces.Trace, target string, outs [][]string) error {
	for i, st := range t.Stanzas {
		want, got := comparable(st.Expected), comparable(outs[i])
		if slices.Equal(want, got) {
			continue
		}
		last := st.Commands[len(st.Commands)-1]
		var b strings.Builder
		fmt.Fprintf(&b, "%s:%d: stanza %d (ending with %q) differs on %s (-expected +%s):\n", t.Path, st.SeparatorLine, i+1, last.Text, target, target)
		for _, l := range traces.DiffLines(want, got) {
			b.WriteString("  " + l + "\n")
		}
		return fmt.Errorf("%s", strings.TrimRight(b.String(), "\n"))
	}
	return nil
}
