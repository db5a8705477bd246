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
