package fuzz

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/impl/bugs"
	"github.com/cascade-k8s/cascade/model"
)

// Shrinking by surrogate.
//
// rapid shrinks a failing run by re-running candidates on the target; on
// impl-stepped one candidate costs about a second (a driver, real
// requests, a settle, a cleanup), so within any reasonable shrink budget
// rapid gets through a few dozen candidates and a 100-step run stays
// around 50. When the failure comes from injected bugs that the model
// also has as switches, the model with those switches on (modelSystem)
// predicts impl's behaviour, and a candidate costs a few hundred
// microseconds. The shrinker then:
//
//  1. checks that the surrogate reproduces the failing run (otherwise
//     impl failed for a reason of its own, and rapid's result stands);
//  2. minimizes the run's steps with ddmin (Zeller and Hildebrandt,
//     "Simplifying and isolating failure-inducing input", 2002) against
//     "the reference model and the surrogate disagree", then simplifies
//     the remaining steps' attributes (owners, flags, labels, finalizers,
//     policies) one at a time while the disagreement persists;
//  3. replays the minimized run on impl in lockstep, and reports it only
//     if impl fails there too. A minimized run impl passes is discarded.
//
// The result is 1-minimal for the surrogate: removing any one step or
// attribute makes the models agree. It is not the model checker's
// BFS-minimal counterexample, which is shortest over all runs, not over
// subsequences of the one found.

// ModelBugs are the model's switches of impl's injected bugs; every
// injectable bug of impl/bugs has a model switch of the same name.
func ModelBugs(set bugs.Set) (model.BugSet, error) {
	var out model.BugSet
	for _, name := range set.Names() {
		b, err := model.BugByName(name)
		if err != nil {
			return 0, fmt.Errorf("fuzz: impl's bug %q has no model switch: %w", name, err)
		}
		out = out.With(b)
	}
	return out, nil
}

// surrogateCheck runs steps in lockstep on the reference model and the
// surrogate and returns their disagreement, if any.
func (env SteppedEnv) surrogateCheck(steps []string) (*stopRun, []string) {
	opts := model.Options{Coalesce: env.Coalesce}
	l := &lockstep{m: env.model(env.Bugs), s: model.NewState(), opts: opts,
		sys: &modelSystem{m: env.model(env.Bugs | env.Surrogate), s: model.NewState(), opts: opts}}
	failed := l.guard(func() { l.script(steps) })
	return failed, l.steps
}

// modelAlone runs steps on the model without any injected bug or fault
// (a fault step, such as a lost informer update, is then not enabled and
// skipped), in lockstep with itself: the failures it finds are the
// model's own properties failing.
func (env SteppedEnv) modelAlone(steps []string) *stopRun {
	self := env
	self.Bugs, self.Surrogate = 0, 0
	f, _ := self.surrogateCheck(steps)
	return f
}

// bugs reports whether steps make the reference model and the surrogate
// disagree while the reference model alone passes: a failure of the
// injected bugs, not of the model's own properties.
func (env SteppedEnv) bugs(steps []string) bool {
	f, _ := env.surrogateCheck(steps)
	return f != nil && env.modelAlone(steps) == nil
}

// shrinkBySurrogate minimizes a failing run's steps against the surrogate
// and confirms the result on impl. It returns nil when the surrogate does
// not reproduce the failure, the model fails it alone, or impl does not
// confirm the minimized run.
func (env SteppedEnv) shrinkBySurrogate(ctx context.Context, cfg Config, it *impl.Target, candidates ...*runFailure) *runFailure {
	start := time.Now()
	for _, c := range candidates {
		if c == nil {
			continue
		}
		if f, _ := env.surrogateCheck(c.script); f == nil {
			progress(cfg, "shrink: the model with %s does not reproduce the %d-step run; keeping rapid's", env.Surrogate, len(c.script))
			continue
		}
		if f := env.modelAlone(c.script); f != nil {
			progress(cfg, "shrink: the %d-step run fails on the model alone (%s): not the injected bugs'; keeping rapid's", len(c.script), firstLine(f.summary))
			continue
		}
		fails := env.bugs
		steps := ddmin(c.script, fails)
		steps = simplify(steps, fails)
		_, steps = env.surrogateCheck(steps) // only the steps taken
		progress(cfg, "shrink: %d steps -> %d on the model with %s (%s); confirming on impl", len(c.script), len(steps), env.Surrogate, time.Since(start).Round(time.Millisecond))
		if f := env.confirm(ctx, cfg, it, steps); f != nil {
			progress(cfg, "shrink: impl fails the %d-step run too: %s", f.steps, firstLine(f.summary))
			f.attributed = true
			return f
		}
		progress(cfg, "shrink: impl passes the %d-step run; keeping rapid's", len(steps))
	}
	return nil
}

// confirm replays steps on impl in lockstep and returns the failure, or
// nil if impl agrees with the model throughout.
func (env SteppedEnv) confirm(ctx context.Context, cfg Config, it *impl.Target, steps []string) *runFailure {
	r := env.newRun(ctx, cfg, it)
	if err := r.begin(); err != nil {
		return nil
	}
	defer r.end()
	failed := r.guard(func() { r.script(steps) })
	if failed == nil || failed.kind == "error" {
		return nil
	}
	return r.failure(failed.kind, failed.summary)
}

// ddmin is Zeller's delta debugging: a subsequence of steps that still
// fails, from which no single chunk at the final granularity (one step)
// can be removed.
func ddmin(steps []string, fails func([]string) bool) []string {
	n := 2
	for len(steps) >= 2 {
		chunk := (len(steps) + n - 1) / n
		reduced := false
		for i := 0; i < len(steps); i += chunk {
			// the complement of one chunk
			rest := append(append([]string{}, steps[:i]...), steps[min(i+chunk, len(steps)):]...)
			if fails(rest) {
				steps, n, reduced = rest, max(n-1, 2), true
				break
			}
		}
		if reduced {
			continue
		}
		if n >= len(steps) {
			break
		}
		n = min(2*n, len(steps))
	}
	return steps
}

// simplify drops the optional parts of each step, one at a time, while
// the run still fails: an owner reference or one of its flags, a label,
// a finalizer, a selector, a propagation policy. Shorter steps read
// better and name fewer objects, which lets a second ddmin pass remove
// the steps that made them.
func simplify(steps []string, fails func([]string) bool) []string {
	for changed := true; changed; {
		changed = false
		for i := range steps {
			for _, alt := range simpler(steps[i]) {
				try := append([]string{}, steps...)
				try[i] = alt
				if fails(try) {
					steps, changed = try, true
					break
				}
			}
		}
		if changed {
			steps = ddmin(steps, fails)
		}
	}
	return steps
}

// simpler lists the one-change simplifications of a client step's text:
// each attribute dropped, each owner's flags dropped, each list value
// shortened to one element.
func simpler(line string) []string {
	toks := strings.Fields(line)
	if len(toks) < 3 {
		return nil
	}
	var out []string
	for i := 2; i < len(toks); i++ {
		k, v, ok := strings.Cut(toks[i], "=")
		if !ok {
			continue
		}
		without := strings.Join(append(append([]string{}, toks[:i]...), toks[i+1:]...), " ")
		switch k {
		case "owner":
			out = append(out, without)
			ref, flags, _ := strings.Cut(v, ",")
			if flags != "" {
				for _, f := range strings.Split(flags, ",") {
					out = append(out, replaceTok(toks, i, k+"="+strings.TrimSuffix(strings.Replace(v+",", ","+f+",", ",", 1), ",")))
				}
				out = append(out, replaceTok(toks, i, k+"="+ref))
			}
		case "labels", "finalizers":
			out = append(out, without)
			if parts := strings.Split(v, ","); len(parts) > 1 {
				for _, p := range parts {
					out = append(out, replaceTok(toks, i, k+"="+p))
				}
			}
		case "propagation", "selector":
			out = append(out, without)
		}
	}
	return out
}

func replaceTok(toks []string, i int, tok string) string {
	c := append([]string{}, toks...)
	c[i] = tok
	return strings.Join(c, " ")
}
