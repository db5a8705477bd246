package fuzz

import (
	"slices"
	"testing"

	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// On upstream-stepped the real ReplicaSet and ReplicationController
// controllers, whose traffic the proxy holds until the final settle,
// scale their Pods to spec.replicas there, where the model's controller
// only adopts and releases. In testdata/upstream-stepped-misscaled.trace
// (seed 3, run 3) rc/b, with selector app=web and replicas 0, met two
// Pods labelled app=web with no controller: the real controller adopted
// both at the settle and deleted them, the model kept them. The
// generator takes none of the run's steps after which the model would
// settle so: some of its steps are refused, and the state it reaches
// settles with no ReplicaSet or ReplicationController misscaled, on the
// model with every controller.
func TestUpstreamSteppedTakesNoMisscalingStep(t *testing.T) {
	tr, err := traces.ParseFile("testdata/upstream-stepped-misscaled.trace")
	if err != nil {
		t.Fatal(err)
	}
	env := upstreamSteppedEnv(&target.Target{})
	r := &steppedRun{env: env}
	r.lockstep = lockstep{m: env.model(0), s: model.NewState()}
	r.sys = upstreamSystem{r: r, failures: map[string]int{}, misscaled: map[string]string{}}
	refuser, ok := r.sys.(clientRefuser)
	if !ok {
		t.Fatal("upstream-stepped refuses no client step")
	}
	var refused []string
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			switch {
			case c.Settle:
			case c.Step.Actor == model.ActorClient:
				next, _, err := r.m.Apply(r.s, c.Step)
				if err != nil {
					continue
				}
				if refuser.refuses(next) {
					refused = append(refused, c.Text)
					continue
				}
				r.s = next
			default:
				enabled := slices.ContainsFunc(r.m.Enabled(r.s, r.opts), func(e model.Step) bool { return e.String() == c.Step.String() })
				if !enabled || !r.steppable(c.Step) {
					continue
				}
				if next, _, err := r.m.Apply(r.s, c.Step); err == nil {
					r.s = next
				}
			}
		}
	}
	if len(refused) == 0 {
		t.Error("every client step of the run was taken")
	}
	end, _, err := (&model.Model{}).Settle(r.s)
	if err != nil {
		t.Fatal(err)
	}
	if why := target.Misscaled(end); why != "" {
		t.Errorf("the run's last state settles misscaled: %s", why)
	}
	t.Logf("refused: %q", refused)
}
