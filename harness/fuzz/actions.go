package fuzz

import (
	"slices"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/model"
)

// The actions of a stepped run, as rapid action keys. Besides the client
// verbs and the internal-step groups (internalVerbs), three compound
// actions shape what random runs reach: race, cycle and drain, and the
// mid-run settle.

// actions are the run's rapid actions, the swarm's choice of client verbs
// among them.
func (r *steppedRun) actions(t *rapid.T, g *gen) map[string]func(*rapid.T) {
	actions := map[string]func(*rapid.T){}
	verbs := g.swarm(t, g.verbs())
	for verb, draw := range verbs {
		actions[verb] = func(t *rapid.T) { r.client(draw(t)) }
	}
	// An action with nothing to do creates an object instead of skipping:
	// rapid ends a run once its actions have been skipped twice as often
	// as taken, and early in a run, before anything exists, most internal
	// actions would be.
	create := verbs["create"]
	for verb, match := range internalVerbs {
		if r.env.offered(verb) {
			actions[verb] = func(t *rapid.T) {
				if !r.drawInternal(t, match) {
					r.client(create(t))
				}
			}
		}
	}
	// a client step inside a GC or controller decision window: on an
	// object a work item has decided about, or an adoption is pending
	// for, before the write lands
	actions["race"] = func(t *rapid.T) {
		hot := g.hot()
		if len(hot) == 0 {
			r.client(create(t))
			return
		}
		r.client(g.onKey(t, rapid.SampledFrom(hot).Draw(t, "race-target")))
	}
	// two live objects made each other's owners (or one its own): the
	// GC's circular-dependency handling needs a cycle, which owner
	// references drawn one at a time close only rarely
	// a compound action: the client steps draw gives, or a create when
	// it gives none
	steps := func(draw func(*rapid.T) []string) func(*rapid.T) {
		return func(t *rapid.T) {
			lines := draw(t)
			if lines == nil {
				r.client(create(t))
				return
			}
			for _, l := range lines {
				r.client(l)
			}
		}
	}
	actions["cycle"] = steps(g.cycle)
	// a workload and an object it would adopt, in one namespace: what
	// the adopting controller's races start from. Offered in every run:
	// offered in half of them, as the swarm offers verbs, it found
	// adopt-without-recheck in 60 runs per find instead of 21, and of
	// the other bugs only lookup-ignores-scope needed fewer (71 against
	// 100; TestGeneratorReach, 40 seeds)
	if len(r.env.AdopterKinds) > 0 {
		actions["family"] = steps(func(t *rapid.T) []string { return g.family(t, r.env.AdopterKinds) })
	}
	// the GC and controllers catching up in an order rapid draws: internal
	// steps, one at a time, until none is enabled (or 40 were taken)
	actions["drain"] = func(t *rapid.T) {
		took := false
		for range 40 {
			var internal []model.Step
			for _, st := range r.m.Enabled(r.s, model.Options{}) {
				if st.Internal() && (st.Actor != model.ActorController || len(r.env.AdopterKinds) > 0) && r.steppable(st) {
					internal = append(internal, st)
				}
			}
			if len(internal) == 0 {
				break
			}
			// no compare per step: the run compares after the action,
			// and a step impl cannot take fails at once anyway
			r.take(internal[rapid.IntRange(0, len(internal)-1).Draw(t, "drain-step")])
			took = true
		}
		if !took {
			r.client(create(t))
		}
	}
	// the GC catching up on everything: deep cascades in one action,
	// between client steps that race with the GC one step at a time
	// Not on upstream-stepped, whose settle opens the proxy: an item
	// the settle leaves failing (a delete the webhook denies) keeps
	// retrying on the real GC's own back-off timer, and a retry whose GET
	// passed before the proxy held again has its write held with no step
	// of the model's to account for it.
	if r.env.Hold == nil {
		actions["settle"] = func(t *rapid.T) {
			if !r.settleSteps() {
				r.client(create(t))
			}
		}
	}
	return actions
}

// repeat takes a drawn number of actions, from half to one and a half
// times cfg.Steps, and
// compares the states after each. It stands in for rapid's t.Repeat,
// whose geometric run lengths make most runs much shorter than the
// average; on impl a run costs about a second before its first step, so
// short runs are wasted. The length is a draw of its own, so rapid still
// shrinks it (down to half), and the surrogate shrinker below that.
func (r *steppedRun) repeat(t *rapid.T, actions map[string]func(*rapid.T)) {
	keys := make([]string, 0, len(actions))
	for k := range actions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	steps := max(r.cfg.Steps, 2)
	n := rapid.IntRange(steps/2, steps*3/2).Draw(t, "steps")
	for range n {
		actions[rapid.SampledFrom(keys).Draw(t, "action")](t)
		r.compare()
	}
}

// drawInternal takes one enabled internal step of a verb on both, chosen
// by rapid, and reports whether one was enabled.
func (r *steppedRun) drawInternal(t *rapid.T, match func(model.Step) bool) bool {
	var enabled []model.Step
	for _, st := range r.m.Enabled(r.s, r.opts) {
		if match(st) && r.steppable(st) {
			enabled = append(enabled, st)
		}
	}
	if len(enabled) == 0 {
		return false
	}
	r.take(enabled[rapid.IntRange(0, len(enabled)-1).Draw(t, "which")])
	return true
}
