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

// TestCascadingProtectionReadsBeforeTheDelete: the deletion-protection
// webhook counts an object's dependents when the API server calls it,
// after the DELETE arrived and before the removal it then makes (its
// LISTs read the API server live), so a dependent whose reference came
// from a write still in flight when the DELETE was sent may be missing
// from its count though the removal linearizes after that write. Found
// by `cascade fuzz --target upstream --write-delay 200ms --seed 32`
// (harness/fuzz/testdata/open-concurrent, write-delay-seed32-run50): a
// Pod created with a reference to a Cascading Job 16 ms before the
// Job's DELETE was sent and answered 51 ms after it; the DELETE, forced
// after the create by a patch that answered the Job live, removed the
// Job, and lin said the webhook owed a denial for 1 active dependent.
// A reference written before the DELETE was sent still holds it.
func TestCascadingProtectionReadsBeforeTheDelete(t *testing.T) {
	cascading := label(model.ProtectionLabel, model.ProtectCascading)
	for _, tc := range []struct {
		name               string
		depCall, depReturn int64
		illegal            bool
	}{
		{"a dependent written while the DELETE was in flight", 35 * ms, 60 * ms, false},
		{"a dependent written before the DELETE was sent", 30 * ms, 38 * ms, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			o, d := key("job", "a"), key("pod", "d")
			b.create("client-1", o, 0, 10*ms, nil)
			b.write("client-1", o, 11*ms, 20*ms, cascading)
			b.create("client-3", d, tc.depCall, tc.depReturn, []string{"cascade.dev/hold"}, b.ref(o, true, true))
			dl := b.del("client-0", o, 40*ms, 100*ms, "Background")
			// a patch that answered the Job live after the dependent's
			// create returned: the removal linearizes after both
			live := *b.ops[1].Got
			b.add(history.Op{Actor: "client-1", Verb: history.Patch, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
				Code: 200, Got: &live, Call: 70 * ms, Return: 75 * ms})
			history.AssignLanes(b.ops)
			r := Check(b.ops, Options{Protection: true})
			if tc.illegal {
				expectIllegal(t, r, dl, model.PropProtectionHolds, "Cascading and 1 active dependents")
			} else {
				expectOk(t, r)
			}
		})
	}
}
