package check

import (
	"fmt"
	"math"

	"github.com/cascade-k8s/cascade/model"
)

// step is one successor of a state, as counterexample replay lists them;
// next is nil for a step the model refused.
type step struct {
	text string
	next *model.State
}

// successors lists, in a fixed order, every step from s: unused client
// ops first, then the model's internal and fault steps. The order and the
// numbering must match expand's, which numbers actions the same way: a
// step the model refuses keeps its number (next is nil), so that a step
// the reduction skips without applying it numbers like the rest.
func (e *explorer) successors(s *model.State) []step {
	var out []step
	for i, op := range e.ops {
		if !e.opEnabled(s, i) {
			continue
		}
		n, _, err := e.m.Apply(s, op)
		if err != nil {
			out = append(out, step{text: op.String()})
			continue
		}
		e.sent(n, i)
		out = append(out, step{text: op.String(), next: n})
	}
	for _, st := range e.m.Enabled(s, e.opts) {
		n, _, err := e.m.Apply(s, st)
		if err != nil {
			n = nil
		}
		out = append(out, step{text: st.String(), next: n})
	}
	return out
}

// opEnabled reports whether client op i may be sent from s: not sent
// yet, and with Ordered every op before it sent.
func (e *explorer) opEnabled(s *model.State, i int) bool {
	if e.scope.OpBudget > 0 {
		return s.Budget < uint64(e.scope.OpBudget)
	}
	if s.Budget&(1<<i) != 0 {
		return false
	}
	before := uint64(1)<<i - 1
	return !e.scope.Ordered || s.Budget&before == before
}

// sent records in n that client op i was sent.
func (e *explorer) sent(n *model.State, i int) {
	if e.scope.OpBudget > 0 {
		n.Budget++
		return
	}
	n.Budget |= 1 << i
}

func (e *explorer) canon(s *model.State) *model.State {
	if e.scope.Symmetry {
		return s.Canonical()
	}
	return s
}

func (e *explorer) admitted(s *model.State) bool {
	for i, f := range e.admits {
		if f(s) > e.scope.Constraints[i].Max {
			return false
		}
	}
	return true
}

// expand checks frontier state idx and, when the level is expanded and
// the constraints admit it, every transition out of it, claiming each
// successor and storing those it claims first.
func (e *explorer) expand(w *worker, fr *frontier, idx, level int, expand bool) error {
	s, err := w.dec.Decode(fr.enc(idx))
	if err != nil {
		return fmt.Errorf("internal error: %v", err)
	}
	fp := fr.fps[idx]
	var asleep sleepMask // the state's sleep set
	if e.sleep {
		asleep = ^sleepMask(fr.awake[idx])
	}
	order := uint64(idx) << 20
	if !expand || !e.admitted(s) {
		return e.quiescent(w, s, fp, level, order)
	}
	// changed records that some internal step changes what clients see.
	// Quiescent would then find that step as its path to a change, so the
	// state is not quiescent and the search for one can be skipped.
	changed := false
	a := 0
	// next numbers the next step (see successors).
	next := func() (int, error) {
		if a >= maxActions {
			return 0, fmt.Errorf("scope %s: a state with more than %d successors", e.scope.Name, maxActions)
		}
		a++
		return a - 1, nil
	}
	emit := func(act int, st *model.Step, info *sleepStep, n *model.State, r model.Result) error {
		w.generated++
		e.checkTransition(w, s, n, st, r, level+1, fp, int32(act), order|uint64(act))
		// The successor's sleep set from this arrival, in n's terms: taken
		// before canonicalising, which keeps the attemptToDelete queue's
		// order unless the step added UIDs (a create, which puts no item
		// to sleep anyway).
		awake := sleepAll
		if e.sleep {
			z := sleepAfter(w.infos, info, n, asleep)
			if !sameUIDs(s, n) {
				z &^= sleepItemClasses // canonicalising may renumber the queue
			}
			awake = ^z
		}
		// The frontier is canonical, and Canonical depends only on the
		// UID table: a successor that shares its parent's table (no step
		// but a create adds UIDs) is canonical already.
		if e.scope.Symmetry && !sameUIDs(s, n) {
			n = n.Canonical()
		}
		// Encode into the free end of the worker's output chunk: a state
		// this worker claims first stays there, one it does not is
		// overwritten by the next. The claim waits until the next
		// successor is computed (see touch).
		w.claimPending()
		tail := w.out.tail()
		enc := w.dec.EncodeNext(tail, n)
		if len(enc) > math.MaxUint32 {
			return fmt.Errorf("scope %s: a state encoding exceeds 4 GiB", e.scope.Name)
		}
		h := model.FingerprintBytes(enc)
		e.seen.touch(h)
		w.pending, w.pendingFP, w.pendingOrd, w.pendingAwake = true, h, packOrd(level+1, idx, act), uint32(awake)
		// An encoding longer than the chunk's free end was appended
		// elsewhere, and is copied in if claimed.
		w.pendingEnc, w.pendingInPlace = enc, len(enc) <= cap(tail)
		return nil
	}
	w.steps = e.m.AppendEnabled(w.steps[:0], s, e.opts)
	if e.sleep {
		w.infos = classify(w.infos, s, w.steps, len(e.ops), &w.keys)
	}
	for i := range e.ops {
		if !e.opEnabled(s, i) {
			continue
		}
		act, err := next()
		if err != nil {
			return err
		}
		n, r, err := e.m.ApplyStep(s, &e.ops[i])
		if err != nil {
			continue
		}
		e.sent(n, i)
		if r.Code != 404 && !e.reached[i].Load() {
			e.reached[i].Store(true)
		}
		if err := emit(act, &e.ops[i], &e.opInfos[i], n, r); err != nil {
			return err
		}
	}
	for i := range w.steps {
		st := &w.steps[i]
		act, err := next()
		if err != nil {
			return err
		}
		var info *sleepStep
		asleepStep := false
		if e.sleep {
			info = &w.infos[i]
			if b := info.bit; b >= 0 && asleep&(1<<b) != 0 {
				// In the sleep set: every state it leads to is reached
				// at the same depth with it taken before the step that
				// reached s (reduction.go). Had it set changed, the
				// quiescence search below finds s not quiescent all the
				// same, only later.
				if e.reduce {
					w.slept++
					continue
				}
				asleepStep = true
			}
		}
		if asleepStep && e.silentSleep {
			// Neither its successor nor its transition is looked at,
			// and it is not even applied, only counted: a step with a
			// sleep class is a GC delivery, lost update, virtual delete
			// event, discovery sync or work item, and Apply takes every
			// such step the model lists (model.Enabled). (Had it set
			// changed, the quiescence search below finds s not
			// quiescent all the same.)
			w.generated++
			w.unclaimed++
			continue
		}
		n, r, err := e.m.ApplyStep(s, st)
		if err != nil {
			continue
		}
		if !changed && st.Internal() && !model.ObservablyEqual(n, s) {
			changed = true
		}
		if asleepStep { // taken and checked, not claimed (explorer.sleep)
			w.generated++
			w.unclaimed++
			if !e.silentSleep {
				e.checkTransition(w, s, n, st, r, level+1, fp, int32(act), order|uint64(act))
			}
			continue
		}
		if err := emit(act, st, info, n, r); err != nil {
			return err
		}
	}
	if changed {
		return nil
	}
	return e.quiescent(w, s, fp, level, order)
}

// quiescent is checkQuiescent for a worker, which steps out of the
// visited table meanwhile: the internal-step search may take long, and a
// grower would wait for it.
func (e *explorer) quiescent(w *worker, s *model.State, fp uint64, level int, order uint64) error {
	e.seen.leave(w.claimer)
	defer e.seen.enter(w.claimer)
	return e.checkQuiescent(s, fp, level, order)
}

// sleepPays reports whether an unreduced search should keep its sleep
// sets (explorer.sleep) after a level that took this many transitions,
// this many of them asleep. Classifying every state's steps and a sleep
// set per successor cost about what skipping the work of one successor
// in 16 saves (all-policies, 4-9% asleep per level, took as many
// instructions with them as without). A level of fewer than 2048
// transitions says too little to stop.
func sleepPays(transitions, asleep int64) bool {
	return transitions < 2048 || asleep*16 >= transitions
}

// sameUIDs reports whether two states share one UID table.
func sameUIDs(a, b *model.State) bool {
	return len(a.UIDs) == len(b.UIDs) && (len(a.UIDs) == 0 || &a.UIDs[0] == &b.UIDs[0])
}

func (e *explorer) checkTransition(w *worker, prev, next *model.State, st *model.Step, r model.Result, level int, fp uint64, act int32, order uint64) {
	// A step that leaves the store as it was (most GC steps) can violate
	// or witness only the properties that are not StoreOnly.
	sameStore := model.SameStore(prev, next)
	// The worker's Transition is overwritten field by field, and only
	// when a property reads it: it points only into the worker's decoder
	// memory, which lives on anyway.
	t := &w.trans
	filled := false
	if !sameStore || !e.alwaysStoreOnly {
		t.Prev, t.Next, t.Step, t.Result = prev, next, st, r
		filled = true
		for _, v := range e.m.CheckTransition(t) {
			e.offer(v, &candidate{level: level, fp: fp, act: act, order: order}, st)
		}
	}
	open := w.open
	if sameStore {
		open = open[:w.openAny] // the StoreOnly ones find nothing
	}
	accept := model.StepsAccept(st)
	for _, i := range open {
		pi := e.sometimes[i]
		if accept&(1<<pi) == 0 || e.witnessed[i].Load() {
			continue
		}
		p := &model.Properties[pi]
		if !filled {
			t.Prev, t.Next, t.Step, t.Result = prev, next, st, r
			filled = true
		}
		if p.Check(e.m, t) != nil {
			e.witnessed[i].Store(true)
		}
	}
}

func (e *explorer) checkQuiescent(s *model.State, fp uint64, level int, order uint64) error {
	q, err := e.m.Quiescent(s)
	if err != nil {
		return err
	}
	if !q {
		return nil
	}
	for _, v := range e.m.CheckQuiescent(s) {
		e.offer(v, &candidate{level: level, fp: fp, act: -1, order: order}, nil)
	}
	return nil
}
