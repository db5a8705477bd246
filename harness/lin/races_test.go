package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// Known races of the GC and the API server that only a history shows:
// each test sets a write inside and outside its race window.

// TestStaleOrphanPolicy: a GC DELETE with propagationPolicy Orphan that
// puts back the orphan finalizer attemptToOrphan removed is upstream's
// own behaviour when the removal came within the race window before it
// (the GC's GET saw the finalizer), and a silent orphaning otherwise.
func TestStaleOrphanPolicy(t *testing.T) {
	inAndOutOfWindow(t, 50*ms, model.KnownStaleOrphanPolicy, []string{"put the orphan finalizer on it"}, func(b *builder, at int64) int {
		o, d := key("cm", "o"), key("cm", "d")
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-0", d, 11*ms, 20*ms, []string{"cascade.dev/hold"}, b.ref(o, false, false))
		b.del("client-0", d, 21*ms, 25*ms, "Orphan")
		b.write("gc", d, 30*ms, 35*ms, withoutFinalizer(model.FinalizerOrphan))
		b.del("client-0", o, 36*ms, 40*ms, "Background")
		return b.del("gc", d, at, at+5*ms, "Orphan")
	})
}

// TestOrphanSwitchedToForeground: attemptToOrphan removes a cluster-scoped
// dependent's reference to a namespaced owner (unresolvable from it) as
// upstream's orphan path does; when a DELETE switched the owner's orphan
// deletion to Foreground within the race window before the patch, the
// patch is the known kubernetes#32339 race, and outside it a violation.
func TestOrphanSwitchedToForeground(t *testing.T) {
	inAndOutOfWindow(t, 40*ms, model.KnownPolicySwitch, []string{"gc removed"}, func(b *builder, at int64) int {
		o, pv := key("rc", "o"), key("pv", "vol")
		b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
		b.create("client-0", pv, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 21*ms, 25*ms, "Orphan")
		b.del("client-1", o, 26*ms, 30*ms, "Foreground")
		return b.write("gc", pv, at, at+5*ms, withRefs())
	})
}

// TestVirtualNamespace: a GC that has not yet observed a cluster-scoped
// object holds it as a virtual node carrying the namespace of the
// dependent it was made from (kubernetes#124378); attemptToDeleteItem
// then resolves the object's reference to a namespaced owner in that
// namespace, where a foreground-deleting owner makes it waiting, and
// deletes the object with Foreground. That is the known race while the
// object is new; long after its creation, with no dependent in the
// owner's namespace, or with the owner solid there, it is a violation.
func TestVirtualNamespace(t *testing.T) {
	cases := []struct {
		name       string
		at         int64 // the GC's DELETE, ms
		dependent  bool  // secret c references pv a
		foreground bool  // secret c is being deleted with foregroundDeletion
		known      bool
		refLater   bool // pv a gets its reference by a patch after its create
	}{
		{"new, referenced from the owner's namespace", 60, true, true, true, false},
		{"new, its reference added after the create", 60, true, true, true, true},
		{"long after its creation", 5000, true, true, false, false},
		{"no dependent in a namespace", 60, false, true, false, false},
		{"a solid owner in the borrowed namespace", 60, true, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			c, a := key("secret", "c"), key("pv", "a")
			b.create("client-0", c, 0, 10*ms, []string{"cascade.dev/hold"})
			if tc.refLater {
				b.create("client-1", a, 11*ms, 15*ms, nil)
				b.write("client-1", a, 16*ms, 20*ms, withRefs(b.ref(c, true, true)))
			} else {
				b.create("client-1", a, 11*ms, 20*ms, nil, b.ref(c, true, true))
			}
			if tc.dependent {
				b.write("client-0", c, 21*ms, 25*ms, withRefs(b.ref(a, true, true)))
			}
			if tc.foreground {
				b.del("client-2", c, 26*ms, 30*ms, "Foreground")
			}
			del := b.del("gc", a, tc.at*ms, (tc.at+5)*ms, "Foreground")
			r := b.check()
			if tc.known {
				expectKnown(t, r, del, model.KnownVirtualNamespace)
			} else {
				expectIllegal(t, r, del, "through its reference to v1/Secret c")
			}
		})
	}
}

// TestCycleUnblocked: a and b own each other with blocking references
// and a is deleted in the foreground. The GC deletes b, a's waiting
// dependent with a dependent of its own (a), in the foreground, and
// since a is deleting its dependents it first patches b's references
// non-blocking (the cycle-breaking unblock). A DELETE that leaves b's
// reference blocking breaks the rule, unless a's deletion was too recent
// for the GC's graph to have it. When the GC's graph changes are
// recorded (an in-process GC), a recent deletion excuses nothing if
// they show the graph had a's deletion, a's reference and b's before
// the worker's GET of the waiting owner a, after which it reads the
// graph.
func TestCycleUnblocked(t *testing.T) {
	cases := []struct {
		name    string
		at      int64 // the GC's DELETE, ms
		unblock bool
		applied int64  // when the graph had a's deletion, ms; 0: not recorded
		want    string // "" Ok, "known", or "illegal"
	}{
		{"unblocked first", 5000, true, 0, ""},
		{"still blocking", 5000, false, 0, "illegal"},
		{"still blocking, a's deletion just written", 40, false, 0, "known"},
		{"still blocking, a's deletion just written but in the graph", 40, false, 31, "illegal"},
		{"still blocking, a's deletion in the graph after the GET", 40, false, 34, "known"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			a, bk := key("cm", "a"), key("cm", "b")
			b.create("client-0", a, 0, 10*ms, nil)
			b.create("client-0", bk, 11*ms, 20*ms, nil, b.ref(a, true, false))
			b.write("client-0", a, 21*ms, 25*ms, withRefs(b.ref(bk, true, false)))
			b.del("client-1", a, 26*ms, 30*ms, "Foreground")
			if tc.applied != 0 {
				b.applied(bk, 22*ms)
				b.applied(a, tc.applied*ms)
				b.get("gc", bk, 32*ms, 33*ms)
				b.get("gc", a, 33*ms, 34*ms)
			}
			if tc.unblock {
				b.write("gc", bk, (tc.at-10)*ms, (tc.at-5)*ms, withRefs(b.ref(a, false, false)))
			}
			del := b.del("gc", bk, tc.at*ms, (tc.at+5)*ms, "Foreground")
			r := b.check()
			switch tc.want {
			case "":
				expectOk(t, r)
			case "known":
				expectKnown(t, r, del, model.KnownStaleGraph)
			case "illegal":
				words := []string{"still blocking, while its dependent"}
				if tc.applied != 0 {
					words = append(words, "the GC's graph had both before the worker read it")
				}
				expectIllegal(t, r, del, words...)
			}
		})
	}
}

// TestForegroundEndedBeforeDelete: an owner being deleted with a user
// finalizer is switched to Foreground, so the GC decides to delete its
// non-blocking dependent and, with no dependent blocking, removes
// foregroundDeletion; the decided DELETE lands after, on a dependent
// whose owner is still deleting but no longer waits (found by cascade
// fuzz --target impl --write-delay). Within the race window of the
// finalizer's removal it is the known race, outside it a violation.
func TestForegroundEndedBeforeDelete(t *testing.T) {
	inAndOutOfWindow(t, 40*ms, model.KnownForegroundEnded, []string{"was live and not waiting for dependents"}, func(b *builder, at int64) int {
		o, d := key("secret", "o"), key("rc", "d")
		b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
		b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 21*ms, 25*ms, "Background")
		b.del("client-1", o, 26*ms, 30*ms, "Foreground")
		b.write("gc", o, 31*ms, 35*ms, withoutFinalizer(model.FinalizerForeground))
		return b.del("gc", d, at, at+5*ms, "Background")
	})
}

// TestUnblockAfterWaitEnded: the GC's cycle-breaking unblock patch of b,
// decided while b's owner a waited for dependents, lands after a DELETE
// switched a's deletion to Orphan, or to Background, which removed a
// (both found by cascade fuzz --target impl). Within the race window of
// the switch it is kubernetes#32339 or the wait ended; long after, no
// owner waits and the patch is illegal.
func TestUnblockAfterWaitEnded(t *testing.T) {
	for _, tc := range []struct{ then, known string }{
		{"Orphan", model.KnownPolicySwitch},
		{"Background", model.KnownForegroundEnded},
	} {
		t.Run(tc.then, func(t *testing.T) {
			inAndOutOfWindow(t, 36*ms, tc.known, []string{"no owner of it was waiting for dependents"}, func(b *builder, at int64) int {
				a, bk := key("rc", "a"), key("secret", "b")
				b.create("client-0", a, 0, 10*ms, nil)
				b.create("client-0", bk, 11*ms, 20*ms, nil, b.ref(a, true, false))
				unblocked := b.ref(a, false, false)
				b.write("client-0", a, 21*ms, 25*ms, withRefs(b.ref(bk, true, false)))
				b.del("client-0", a, 26*ms, 30*ms, "Foreground")
				b.del("client-0", a, 31*ms, 35*ms, tc.then)
				return b.write("gc", bk, at, at+5*ms, withRefs(unblocked))
			})
		})
	}
}

// TestWaitingRefRemovedAfterWaitEnded: pod a has a solid owner, rc b, and
// an owner waiting for dependents, cm b (held by a user finalizer), so
// attemptToDeleteItem's solid arm removes a's reference to cm b; a
// Background DELETE of cm b removes foregroundDeletion before the patch
// lands (found by a bug-free cascade fuzz --target impl run). Within the
// race window it is model.KnownForegroundEnded; long after, cm b is a solid
// owner that is not orphaning, and the removal is illegal.
func TestWaitingRefRemovedAfterWaitEnded(t *testing.T) {
	inAndOutOfWindow(t, 36*ms, model.KnownForegroundEnded, []string{"a solid owner that is not orphaning"}, func(b *builder, at int64) int {
		rc, cm, pod := key("rc", "b"), key("cm", "b"), key("pod", "a")
		b.create("client-0", rc, 0, 10*ms, nil)
		b.create("client-0", cm, 11*ms, 20*ms, []string{"cascade.dev/hold"})
		b.create("client-0", pod, 21*ms, 25*ms, nil, b.ref(rc, false, false), b.ref(cm, true, true))
		b.del("client-1", cm, 26*ms, 30*ms, "Foreground")
		b.del("client-0", cm, 31*ms, 35*ms, "Background")
		return b.write("gc", pod, at, at+5*ms, withRefs(b.ref(rc, false, false)))
	})
}

// inAndOutOfWindow builds a history twice with build, which returns the
// op to judge, a GC write sent at at: at early, within the race window of
// the writes before it, it is the known race known; 5 s later it is
// illegal, the message holding words.
func inAndOutOfWindow(t *testing.T, early int64, known string, words []string, build func(b *builder, at int64) int) {
	t.Helper()
	for _, at := range []int64{early, 5000 * ms} {
		b := newBuilder(t)
		op := build(b, at)
		r := b.check()
		if at == early {
			expectKnown(t, r, op, known)
		} else {
			expectIllegal(t, r, op, words...)
		}
	}
}

// TestUnblockPutsBackReference: the cycle-breaking unblock patch lists
// the graph's references, and a strategic merge by UID puts back one a
// write (here a client's) has just removed, non-blocking (found by a
// bug-free fuzz run with --informer-lag). Within the race window of the
// removal it is the graph behind the store; long after, the GC added a
// reference.
func TestUnblockPutsBackReference(t *testing.T) {
	inAndOutOfWindow(t, 30*ms, model.KnownStaleGraph, []string{"gc added an ownerReference"}, func(b *builder, at int64) int {
		a, bk := key("pv", "a"), key("pv", "b")
		b.create("client-0", a, 0, 10*ms, nil)
		b.create("client-0", bk, 11*ms, 20*ms, nil, b.ref(a, true, false))
		ref := b.ref(a, false, false)
		b.write("client-1", bk, 21*ms, 25*ms, withRefs())
		return b.write("gc", bk, at, at+5*ms, withRefs(ref))
	})
}

// TestOrphanedAfterOwnerRemoved: attemptToOrphan removes a cluster-scoped
// dependent's reference to a namespaced owner while the owner is deleting
// with Orphan; a DELETE with Background takes the orphan finalizer off
// and the owner is removed before the patch lands (found by a bug-free
// fuzz run with --informer-lag). attemptToOrphan holds the owner's node,
// so within the race window it is kubernetes#32339; long after, the GC
// acted on an unresolvable reference.
func TestOrphanedAfterOwnerRemoved(t *testing.T) {
	inAndOutOfWindow(t, 40*ms, model.KnownPolicySwitch, []string{"gc removed"}, func(b *builder, at int64) int {
		o, pv := key("rc", "o"), key("pv", "vol")
		b.create("client-0", o, 0, 10*ms, nil)
		b.create("client-0", pv, 11*ms, 20*ms, nil, b.ref(o, false, false))
		b.del("client-0", o, 21*ms, 25*ms, "Orphan")
		b.del("client-1", o, 26*ms, 30*ms, "Background")
		return b.write("gc", pv, at, at+5*ms, withRefs())
	})
}
