package model

import (
	"fmt"
	"slices"
)

// MaxSettleSteps bounds Settle.
const MaxSettleSteps = 10000

// maxClosure bounds the internal-step search of Quiescent.
const maxClosure = 100000

// ObservablyEqual reports whether two states look the same to a client
// of the API: the same stored objects, field by field, and the same GC
// events. Quiescent and Settle compare states this way.
func ObservablyEqual(a, b *State) bool {
	return objectsEqual(a.Objects, b.Objects) && stringsEqual(a.Events, b.Events)
}

// objectsEqual compares two object lists; lists that share their backing
// array (copy-on-write successors that did not touch the store) are
// equal without a look at the objects.
func objectsEqual(a, b []Object) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.UID != y.UID || x.Kind != y.Kind || x.Namespace != y.Namespace || x.Name != y.Name || x.RV != y.RV ||
			x.Deleting != y.Deleting || x.Replicas != y.Replicas || x.Selector != y.Selector ||
			!slices.Equal(x.Owners, y.Owners) || !slices.Equal(x.Finalizers, y.Finalizers) || !slices.Equal(x.Labels, y.Labels) {
			return false
		}
	}
	return true
}

func stringsEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// internalSuccessors lists the states internal steps lead to from s.
func (m *Model) internalSuccessors(s *State) []Settled {
	var out []Settled
	for _, st := range m.Enabled(s, Options{}) {
		if !st.Internal() {
			continue
		}
		n, r, err := m.Apply(s, st)
		if err == nil {
			out = append(out, Settled{Step: st, Result: r, State: n})
		}
	}
	return out
}

// pathToChange searches internal steps breadth-first for the shortest
// path to a state whose observable part differs from s's and that is
// not in avoid. nil means no internal actor can change what clients see.
func (m *Model) pathToChange(s *State, avoid map[string]bool) ([]Settled, error) {
	type entry struct {
		s    *State
		path []Settled
	}
	seen := map[string]bool{string(s.Encode(nil)): true}
	queue := []entry{{s: s}}
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		for _, sd := range m.internalSuccessors(e.s) {
			enc := string(sd.State.Encode(nil))
			if seen[enc] {
				continue
			}
			seen[enc] = true
			path := append(append([]Settled(nil), e.path...), sd)
			if !ObservablyEqual(sd.State, s) && !avoid[enc] {
				return path, nil
			}
			if len(seen) > maxClosure {
				return nil, fmt.Errorf("more than %d states reachable by internal steps alone", maxClosure)
			}
			queue = append(queue, entry{sd.State, path})
		}
	}
	return nil, nil
}

// Quiescent reports whether every informer has caught up (no watch or
// virtual delete event is pending) and no sequence of internal steps (GC,
// controller, apiextensions) can change the API state any more. Work
// retried forever, such as a delete that deletion protection refuses or
// an owner kind nobody serves, cycles through internal states without
// changing the store, so it does not keep a state from being quiescent.
func (m *Model) Quiescent(s *State) (bool, error) {
	if s.GC.Watch.Pending() || s.Controller.Watch.Pending() || len(s.GC.VirtualEvents) > 0 {
		return false, nil // informers have not caught up
	}
	if start, stop := syncNeeded(s); len(start)+len(stop) > 0 {
		return false, nil // the GC's monitors lag discovery
	}
	p, err := m.pathToChange(s, nil)
	return p == nil && err == nil, err
}

// Settled is one step Settle took.
type Settled struct {
	Step   Step
	Result Result
	State  *State
}

// Settle runs internal steps with a fixed, deterministic schedule until
// the state is quiescent: it takes the first step, in Enabled's canonical
// order, that leads somewhere new; when every step leads back to where it
// has been, it follows the shortest path to a change of API state if
// there is one, and otherwise stops. It is the model's counterpart of
// waiting for a real control plane to go quiet.
func (m *Model) Settle(s *State) (*State, []Settled, error) {
	var taken []Settled
	visited := map[string]bool{}
	for len(taken) < MaxSettleSteps {
		visited[string(s.Encode(nil))] = true
		next := (*Settled)(nil)
		for _, sd := range m.internalSuccessors(s) {
			if !visited[string(sd.State.Encode(nil))] {
				next = &sd
				break
			}
		}
		if next != nil {
			taken = append(taken, *next)
			s = next.State
			continue
		}
		path, err := m.pathToChange(s, visited)
		if err != nil {
			return s, taken, err
		}
		if path == nil {
			return s, taken, nil
		}
		for _, sd := range path {
			visited[string(sd.State.Encode(nil))] = true
		}
		taken = append(taken, path...)
		s = path[len(path)-1].State
	}
	return s, taken, fmt.Errorf("did not settle within %d internal steps (livelock)", MaxSettleSteps)
}
