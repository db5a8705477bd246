package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// TestCascadingProtectionRequired: with the deletion-protection webhook
// known to run, a DELETE may not succeed on a live object labelled
// Cascading while, at the point it linearizes, it has active dependents
// as the model counts them (model.ActiveDependents): a live object with
// an ownerReference to it and not being deleted, or a workload's
// spec.replicas. A dependent being deleted, or one created concurrently
// with the DELETE (which may then linearize first), does not hold it.
func TestCascadingProtectionRequired(t *testing.T) {
	cascading := label(model.ProtectionLabel, model.ProtectCascading)
	cases := []struct {
		name    string
		webhook bool
		// history builds the ops and returns the DELETE of the protected
		// object.
		history func(b *builder) int
		illegal bool
	}{
		{"a live dependent holds it", true, func(b *builder) int {
			o, d := key("cm", "owner"), key("cm", "dep")
			b.create("client-0", o, 0, 10*ms, nil)
			b.write("client-0", o, 11*ms, 20*ms, cascading)
			b.create("client-0", d, 21*ms, 30*ms, nil, b.ref(o, false, false))
			return b.del("client-1", o, 40*ms, 50*ms, "Background")
		}, true},
		{"without the webhook a success is permitted", false, func(b *builder) int {
			o, d := key("cm", "owner"), key("cm", "dep")
			b.create("client-0", o, 0, 10*ms, nil)
			b.write("client-0", o, 11*ms, 20*ms, cascading)
			b.create("client-0", d, 21*ms, 30*ms, nil, b.ref(o, false, false))
			return b.del("client-1", o, 40*ms, 50*ms, "Background")
		}, false},
		{"a dependent being deleted does not hold it", true, func(b *builder) int {
			o, d := key("cm", "owner"), key("cm", "dep")
			b.create("client-0", o, 0, 10*ms, nil)
			b.write("client-0", o, 11*ms, 20*ms, cascading)
			b.create("client-0", d, 21*ms, 30*ms, []string{"cascade.dev/hold"}, b.ref(o, false, false))
			b.del("client-0", d, 31*ms, 35*ms, "Background")
			return b.del("client-1", o, 40*ms, 50*ms, "Background")
		}, false},
		{"a dependent created concurrently may come after", true, func(b *builder) int {
			o, d := key("cm", "owner"), key("cm", "dep")
			b.create("client-0", o, 0, 10*ms, nil)
			b.write("client-0", o, 11*ms, 20*ms, cascading)
			b.create("client-0", d, 41*ms, 45*ms, nil, b.ref(o, false, false))
			return b.del("client-1", o, 40*ms, 50*ms, "Background")
		}, false},
		{"a dependent removed before holds it no longer", true, func(b *builder) int {
			o, d := key("cm", "owner"), key("cm", "dep")
			b.create("client-0", o, 0, 10*ms, nil)
			b.write("client-0", o, 11*ms, 20*ms, cascading)
			b.create("client-0", d, 21*ms, 30*ms, nil, b.ref(o, false, false))
			b.del("client-0", d, 31*ms, 35*ms, "Background")
			return b.del("client-1", o, 40*ms, 50*ms, "Background")
		}, false},
		{"a workload's replicas hold it", true, func(b *builder) int {
			o := key("rc", "web")
			b.create("client-0", o, 0, 10*ms, nil)
			b.write("client-0", o, 11*ms, 20*ms, func(x *history.Object) {
				cascading(x)
				x.Replicas = 2
			})
			return b.del("client-1", o, 40*ms, 50*ms, "Background")
		}, true},
		{"a workload scaled to zero does not", true, func(b *builder) int {
			o := key("rc", "web")
			b.create("client-0", o, 0, 10*ms, nil)
			b.write("client-0", o, 11*ms, 20*ms, func(x *history.Object) {
				cascading(x)
				x.Replicas = 0
			})
			return b.del("client-1", o, 40*ms, 50*ms, "Background")
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			del := tc.history(b)
			history.AssignLanes(b.ops)
			r := Check(b.ops, Options{Protection: tc.webhook})
			if tc.illegal {
				expectIllegal(t, r, del, model.PropProtectionHolds, "active dependents")
			} else {
				expectOk(t, r)
			}
		})
	}
}

// TestProtectionDenialPermitted: a webhook denial of a DELETE is
// permitted on an object labelled Cascading even when no dependent is in
// the history (the webhook counts every object in the cluster), and
// illegal on an unlabelled one.
func TestProtectionDenialPermitted(t *testing.T) {
	for _, labelled := range []bool{true, false} {
		b := newBuilder(t)
		o := key("cm", "owner")
		b.create("client-0", o, 0, 10*ms, nil)
		if labelled {
			b.write("client-0", o, 11*ms, 20*ms, label(model.ProtectionLabel, model.ProtectCascading))
		}
		dl := b.refused("client-1", history.Delete, o, 30*ms, 40*ms, 403, "Forbidden")
		b.ops[dl].Message = `admission webhook "vdeletion.cascade.dev" denied the request: forbidden by deletion protection`
		history.AssignLanes(b.ops)
		r := Check(b.ops, Options{Protection: true})
		if labelled {
			expectOk(t, r)
		} else {
			expectIllegal(t, r, dl, model.ProtectionLabel)
		}
	}
}
