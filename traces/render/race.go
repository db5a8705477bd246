package render

import (
	"slices"
	"strings"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// Race is the pair of steps a page opens on: the step that violates the
// trace's property, and the step that made the violation possible.
type Race struct {
	Violating int    // frame index, or -1 when no step violates anything
	Enabling  int    // frame index, or -1 when no single step is found
	Property  string // the property Violating violates
}

// FindRace marks the steps that matter. The violating step is the first
// frame that violates the trace's `# property:` header (any property when
// the header names none, or names one no step violates).
//
// The enabling step is found in one of two ways. When the violating step
// is a GC write, and another actor wrote its object between the worker's
// decision (the attemptToDelete or attemptToOrphan that decided the
// write) and the write itself, the first such write is the race: the
// decision was stale when it landed. Otherwise it is the last command
// written in the trace before the violating step (not the decision
// itself) that the violation needs: replayed without that one command,
// skipping the later commands it leaves not enabled (the actor would not
// have taken them), the trace no longer violates the property. Earlier
// commands the violation also needs set the scene; the last one is the
// racing write, the stale delivery or the lost event.
func FindRace(t *traces.Trace, frames []traces.Frame) Race {
	r := Race{Violating: -1, Enabling: -1}
	want := t.Header(traces.HeaderProperty)
	r.Violating, r.Property = firstViolation(frames, want)
	if r.Violating < 0 && want != "" {
		r.Violating, r.Property = firstViolation(frames, "")
	}
	if r.Violating < 0 {
		return r
	}
	steps := parseSteps(frames)
	decision := decisionOf(steps, r.Violating)
	if decision > 0 {
		target := steps[r.Violating].Target.String()
		for i := decision + 1; i < r.Violating; i++ {
			if writes(steps[i]) && steps[i].Actor != model.ActorGC && steps[i].Target.String() == target && frames[i].Result.OK() {
				r.Enabling = i
				return r
			}
		}
	}
	m, err := t.Model()
	if err != nil {
		return r
	}
	for i := r.Violating - 1; i > 0; i-- {
		f := frames[i]
		if f.Settled || i == decision || f.Line == frames[r.Violating].Line {
			continue
		}
		if !violatesWithout(t, m, f.Line, r.Property) {
			r.Enabling = i
			break
		}
	}
	return r
}

// parseSteps reads each frame's command back (frame 0 has none).
func parseSteps(frames []traces.Frame) []model.Step {
	out := make([]model.Step, len(frames))
	for i := 1; i < len(frames); i++ {
		out[i], _ = model.ParseStep(frames[i].Command)
	}
	return out
}

// decisionOf is the frame of the GC work item that decided the write at
// frame v, or -1 when v is not a GC write.
func decisionOf(steps []model.Step, v int) int {
	if st := steps[v]; st.Actor != model.ActorGC || st.Op != model.OpSend {
		return -1
	}
	for i := v - 1; i > 0; i-- {
		if st := steps[i]; st.Actor == model.ActorGC && (st.Op == model.OpAttemptToDelete || st.Op == model.OpAttemptToOrphan) && st.Target.String() == steps[v].Target.String() {
			return i
		}
	}
	return -1
}

// writes reports whether a step is a write to the API server: every
// client request, an adoption or release, a GC write.
func writes(st model.Step) bool {
	switch st.Actor {
	case model.ActorClient:
		return true
	case model.ActorController:
		return st.Op == model.OpAdopt || st.Op == model.OpRelease
	case model.ActorGC:
		return st.Op == model.OpSend
	}
	return st.Op == model.OpCleanup
}

// firstViolation is the first frame violating the property (any when
// property is empty), and the property's name.
func firstViolation(frames []traces.Frame, property string) (int, string) {
	for i, f := range frames {
		for _, v := range f.Violations {
			if property == "" || v.Property == property {
				return i, v.Property
			}
		}
	}
	return -1, ""
}

// violatesWithout replays the trace without the command on one line,
// skipping every command that is then not enabled or fails to resolve,
// and reports whether some step still violates the property.
func violatesWithout(t *traces.Trace, m *model.Model, line int, property string) bool {
	s := model.NewState()
	hit := func(vs []*model.Violation) bool {
		return slices.ContainsFunc(vs, func(v *model.Violation) bool { return v.Property == property })
	}
	for _, st := range t.Stanzas {
		for _, c := range st.Commands {
			if c.Line == line {
				continue
			}
			if c.Settle {
				next, steps, err := m.Settle(s)
				if err != nil {
					return false
				}
				for _, sd := range steps {
					if hit(m.CheckTransition(&model.Transition{Prev: s, Next: sd.State, Step: &sd.Step, Result: sd.Result})) {
						return true
					}
					s = sd.State
				}
				if s = next; hit(m.CheckQuiescent(s)) {
					return true
				}
				continue
			}
			next, res, err := m.Apply(s, c.Step)
			if err != nil {
				continue
			}
			if hit(m.CheckTransition(&model.Transition{Prev: s, Next: next, Step: &c.Step, Result: res})) {
				return true
			}
			s = next
		}
	}
	return false
}

// Lane names. A controller's lane is the kind that adopts, then
// laneControllerTail ("Deployment controller").
const (
	laneInformers      = "GC informers (graph builder)"
	laneAttemptDelete  = "GC worker: attemptToDelete"
	laneAttemptOrphan  = "GC worker: attemptToOrphan"
	laneCtrlInformers  = "controller informers"
	laneAPIExtensions  = "apiextensions (CRD cleanup)"
	laneClientAdmin    = "client"
	laneClientLimited  = "client as=limited"
	laneControllerTail = " controller"
)

// lanes assigns each frame (but the initial state) to the actor that
// took it: each client principal; the controllers' shared informers;
// each adopting controller, named by the kind that adopts; the GC's
// informers (deliveries, relist faults, discovery sync, virtual delete
// events); the GC's attemptToOrphan and attemptToDelete workers, with
// each write they sent; and the apiextensions CRD cleanup. It returns the
// lanes that took a step, in that order (controllers by name), and each
// frame's lane index (-1 for frame 0).
func lanes(frames []traces.Frame) ([]string, []int) {
	decidedBy := map[string]string{} // work item key -> the worker that decided its writes
	steps := parseSteps(frames)
	byFrame := make([]string, len(frames))
	for i := 1; i < len(frames); i++ {
		byFrame[i] = laneOf(steps[i], decidedBy)
	}
	names := slices.Clone(byFrame[1:])
	slices.SortFunc(names, func(a, b string) int {
		if d := laneRank(a) - laneRank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	names = slices.Compact(names)
	of := make([]int, len(frames))
	of[0] = -1
	for i := 1; i < len(frames); i++ {
		of[i] = slices.Index(names, byFrame[i])
	}
	return names, of
}

// laneRank orders lanes left to right: clients, the controllers, the GC.
func laneRank(name string) int {
	switch name {
	case laneClientAdmin:
		return 0
	case laneClientLimited:
		return 1
	case laneCtrlInformers:
		return 2
	case laneInformers:
		return 4
	case laneAttemptOrphan:
		return 5
	case laneAttemptDelete:
		return 6
	case laneAPIExtensions:
		return 7
	}
	return 3 // a controller
}

func laneOf(st model.Step, decidedBy map[string]string) string {
	switch st.Actor {
	case model.ActorClient:
		if st.Principal == model.PrincipalLimited {
			return laneClientLimited
		}
		return laneClientAdmin
	case model.ActorGC:
		switch st.Op {
		case model.OpAttemptToDelete:
			decidedBy[st.Target.String()] = laneAttemptDelete
			return laneAttemptDelete
		case model.OpAttemptToOrphan:
			decidedBy[st.Target.String()] = laneAttemptOrphan
			return laneAttemptOrphan
		case model.OpSend:
			if w, ok := decidedBy[st.Target.String()]; ok {
				return w
			}
			if st.Write == model.WritePatchOwners {
				return laneAttemptOrphan
			}
			return laneAttemptDelete
		}
		return laneInformers
	case model.ActorController:
		if st.Op == model.OpAdopt || st.Op == model.OpRelease {
			return st.By.Kind.Info().Kind + laneControllerTail
		}
		return laneCtrlInformers
	}
	return laneAPIExtensions
}
