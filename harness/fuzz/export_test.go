package fuzz

import (
	"context"

	"github.com/cascade-k8s/cascade/impl"
)

// ConfirmSteps is confirm for the external tests: a run of the given
// steps on the shared impl, begun and ended as every stepped run is. It
// returns the failure's kind and summary, or "" when impl agrees.
func (env SteppedEnv) ConfirmSteps(ctx context.Context, it *impl.Target, steps []string) (kind, summary string) {
	if f := env.confirm(ctx, Config{Universe: DefaultUniverse}, it, steps); f != nil {
		return f.kind, f.summary
	}
	return "", ""
}

// BeginRun begins a run on the shared impl as RunStepped does, and
// returns its end.
func (env SteppedEnv) BeginRun(ctx context.Context, it *impl.Target) (end func(), err error) {
	r := env.newRun(ctx, Config{Universe: DefaultUniverse}, it)
	if err := r.begin(); err != nil {
		return nil, err
	}
	return r.end, nil
}

// ScriptSteps runs steps as one lockstep run on env (its shared impl, or
// upstream-stepped through env.Hold), begun and ended as every stepped
// run is, and returns the failure ("" when the target agrees) and the
// internal steps the target took.
func (env SteppedEnv) ScriptSteps(ctx context.Context, steps []string) (kind, summary string, internals int) {
	r := env.newRun(ctx, Config{Universe: DefaultUniverse}, nil)
	if err := r.begin(); err != nil {
		return "error", err.Error(), 0
	}
	defer r.end()
	if failed := r.guard(func() { r.script(steps) }); failed != nil {
		return failed.kind, failed.summary, r.internals
	}
	return "", "", r.internals
}
