package traces

import (
	"github.com/cascade-k8s/cascade/model"
)

// Frame is the system after one step of a trace: what `cascade render`
// draws and `cascade replay` walks. A `settle` command expands into one
// frame per internal step it took.
type Frame struct {
	Line       int    // the command's line in the trace file
	Command    string // the step as written, or as settle took it
	Actor      string
	Settled    bool // taken by a settle command
	Result     model.Result
	Violations []*model.Violation
	State      *model.State
	Stanza     int // 0-based stanza the step belongs to
}

// Frames replays a trace step by step. The first frame is the empty
// initial state.
func Frames(t *Trace) ([]Frame, error) {
	m, err := t.Model()
	if err != nil {
		return nil, err
	}
	s := model.NewState()
	frames := []Frame{{Command: "(initial state)", State: s, Result: model.Result{Code: 200}}}
	for si, st := range t.Stanzas {
		for _, c := range st.Commands {
			if c.Settle {
				next, steps, err := m.Settle(s)
				if err != nil {
					return nil, t.errAt(c.Line, 1, "settle: %v", err)
				}
				for _, sd := range steps {
					vs := m.CheckTransition(&model.Transition{Prev: s, Next: sd.State, Step: &sd.Step, Result: sd.Result})
					frames = append(frames, Frame{Line: c.Line, Command: sd.Step.String(), Actor: sd.Step.Actor.String(), Settled: true, Result: sd.Result, Violations: vs, State: sd.State, Stanza: si})
					s = sd.State
				}
				s = next
				if vs := m.CheckQuiescent(s); len(vs) > 0 {
					last := &frames[len(frames)-1]
					last.Violations = append(last.Violations, vs...)
				}
				continue
			}
			next, r, err := m.Apply(s, c.Step)
			if err != nil {
				return nil, t.errAt(c.Line, 1, "%s: %v", c.Text, err)
			}
			vs := m.CheckTransition(&model.Transition{Prev: s, Next: next, Step: &c.Step, Result: r})
			frames = append(frames, Frame{Line: c.Line, Command: c.Text, Actor: c.Step.Actor.String(), Result: r, Violations: vs, State: next, Stanza: si})
			s = next
		}
	}
	return frames, nil
}
