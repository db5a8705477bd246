package model

import (
	"fmt"
	"slices"
)

// MaxSettleSteps bounds Settle.
const MaxSettleSteps = 10000

// MaxSettleOrders bounds SettlesTo: the states it settles from, one per
// order of the pending steps it varies (a 9-object run's settle with 8
// pending events needed 60 ms to try them all).
const MaxSettleOrders = 5000

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

// SettlesTo searches for a settle of s that ends, quiescent, in a state
// whose dump is want, and returns its path of internal steps (found
// reports whether there is one). Settle takes one schedule, Enabled's
// canonical order; a real control plane left to settle by itself takes an
// order of its own, and where the outcome depends on the order its end is
// still one the model allows if an interleaving of the model's internal
// steps reaches it. That is the model's answer to "could the settle have
// ended here", with no timing in it.
//
// What varies between settles of a real GC is the order in which its
// informers hand on the events pending when it starts: each resource's
// informer runs on a goroutine of its own and all feed one graph builder,
// so which of two events it takes first (rc/d's creation or its owner's
// deletion) decides, say, whether addDependentToOwners reports an
// OwnerRefInvalidNamespace event. So the search takes, in every order,
// any prefix of the steps first accepts (the GC's deliveries: they read
// and write only the GC's graph and queues, so the pending events are
// all that such steps can take), and from each state so reached Settle's
// canonical schedule. Searching every interleaving of every internal step
// would be exhaustive but is beyond reach even for a run's small state
// (over 100 000 states for a 9-object run whose settle takes 8 pending
// events and a retry loop). A path found is an interleaving of the
// model's; found=false says only that none of those reaches want.
// States whose events are not all among want's are passed over: the
// model's events are only ever added. Search is bounded by
// MaxSettleOrders states, each settled.
func (m *Model) SettlesTo(s *State, want []string, first func(Step) bool) (path []Settled, found bool, err error) {
	// nodes is the closure of s under first's steps: each state, the
	// step that reached it and its parent's index (-1 for s)
	type node struct {
		sd     Settled
		parent int
	}
	nodes := []node{{sd: Settled{State: s}, parent: -1}}
	seen := map[string]bool{string(s.Encode(nil)): true}
	for i := 0; i < len(nodes); i++ {
		cur := nodes[i].sd.State
		if !eventsAmong(cur.Events, want) {
			continue
		}
		end, rest, err := m.Settle(cur)
		if err != nil {
			return nil, false, err
		}
		if slices.Equal(end.Dump(), want) {
			for j := i; nodes[j].parent >= 0; j = nodes[j].parent {
				path = append(path, nodes[j].sd)
			}
			slices.Reverse(path)
			return append(path, rest...), true, nil
		}
		for _, sd := range m.internalSuccessors(cur) {
			if !first(sd.Step) {
				continue
			}
			enc := string(sd.State.Encode(nil))
			if seen[enc] {
				continue
			}
			seen[enc] = true
			if len(seen) > MaxSettleOrders {
				return nil, false, fmt.Errorf("more than %d orders of the pending steps", MaxSettleOrders)
			}
			nodes = append(nodes, node{sd: sd, parent: i})
		}
	}
	return nil, false, nil
}

// eventsAmong reports whether every event of have is a line of want.
func eventsAmong(have, want []string) bool {
	for _, e := range have {
		if !slices.Contains(want, e) {
			return false
		}
	}
	return true
}
