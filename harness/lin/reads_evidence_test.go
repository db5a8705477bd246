package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// The GC-read excuses decide on the GC's recorded GETs where they are
// recorded (Options.ReadsRecorded: every envtest target's audit log),
// and kubernetes#32339's attemptToOrphan path on the proxy's delivery
// record: the race window is not consulted. Each history passed on the
// window alone before; it passes only when the evidence shows the GC
// decided on the state before the write it raced with.

// TestForegroundEndedOnReads: foreground-ended (lin stoppedWaiting),
// TestForegroundEndedBeforeDelete's race: the GC removes o's
// foregroundDeletion at 36 ms and a DELETE of o's dependent d, decided
// while o waited, lands at 45 ms. Excused only if the GC's GET of o,
// after its GET of d, answered o waiting.
func TestForegroundEndedOnReads(t *testing.T) {
	for _, tc := range []struct {
		name      string
		getBefore bool // the GC GETs o before foregroundDeletion goes (else after)
		known     bool
	}{
		{"the GC's GET answered the owner waiting", true, true},
		{"the GC's GET answered the owner no longer waiting", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			b.readsRecorded = true
			o, d := key("secret", "o"), key("rc", "d")
			b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
			b.del("client-0", o, 21*ms, 25*ms, "Background")
			b.del("client-1", o, 26*ms, 30*ms, "Foreground")
			b.get("gc", d, 31*ms, 32*ms)
			if tc.getBefore {
				b.get("gc", o, 33*ms, 34*ms)
			}
			b.write("gc", o, 36*ms, 38*ms, withoutFinalizer(model.FinalizerForeground))
			if !tc.getBefore {
				b.get("gc", o, 40*ms, 41*ms)
			}
			del := b.del("gc", d, 45*ms, 50*ms, "Background")
			r := b.check()
			if tc.known {
				expectKnown(t, r, del, model.KnownForegroundEnded)
				expectBasis(t, r, basisReads)
				return
			}
			expectIllegal(t, r, del, "was live and not waiting for dependents")
		})
	}
}

// TestStaleOrphanPolicyOnReads: stale-orphan-policy (lin gcDelete),
// TestStaleOrphanPolicy's race: attemptToOrphan removes d's orphan
// finalizer at 30 ms and a GC DELETE of d asking for Orphan lands at
// 50 ms. Excused only if the GC's latest GET of d answered it with the
// orphan finalizer.
func TestStaleOrphanPolicyOnReads(t *testing.T) {
	for _, tc := range []struct {
		name      string
		getBefore bool
		known     bool
	}{
		{"the GC's GET answered the orphan finalizer", true, true},
		{"the GC's GET answered it without", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			b.readsRecorded = true
			o, d := key("cm", "o"), key("cm", "d")
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, []string{"cascade.dev/hold"}, b.ref(o, false, false))
			b.del("client-0", d, 21*ms, 25*ms, "Orphan")
			if tc.getBefore {
				b.get("gc", d, 26*ms, 27*ms)
			}
			b.write("gc", d, 30*ms, 35*ms, withoutFinalizer(model.FinalizerOrphan))
			b.del("client-0", o, 36*ms, 40*ms, "Background")
			if !tc.getBefore {
				b.get("gc", d, 41*ms, 42*ms)
			}
			del := b.del("gc", d, 50*ms, 55*ms, "Orphan")
			r := b.check()
			if tc.known {
				expectKnown(t, r, del, model.KnownStaleOrphanPolicy)
				expectBasis(t, r, basisReads)
				return
			}
			expectIllegal(t, r, del, "put the orphan finalizer on it")
		})
	}
}

// TestOrphanSwitchedToForegroundOnDeliveries: kubernetes#32339 (lin
// gcPatch, attemptToOrphan), TestOrphanSwitchedToForeground's race: o's
// orphan deletion at 25 ms is switched to Foreground at 30 ms, and the
// GC's orphaning patch of pv lands at 40 ms. attemptToOrphan began only
// if o's event with the orphan finalizer had reached the GC's informers
// before the patch.
func TestOrphanSwitchedToForegroundOnDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		orphanAt int64 // o's orphan deletion handed on, ms; 0: never
		known    bool
	}{
		{"orphan deletion handed on before the patch", 27, true},
		{"orphan deletion never handed on", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			o, pv := key("rc", "o"), key("pv", "vol")
			b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
			b.delivered(o, 11*ms)
			b.create("client-0", pv, 11*ms, 20*ms, nil, b.ref(o, false, false))
			b.del("client-0", o, 21*ms, 25*ms, "Orphan")
			if tc.orphanAt != 0 {
				b.delivered(o, tc.orphanAt*ms)
			}
			b.del("client-1", o, 26*ms, 30*ms, "Foreground")
			gc := b.write("gc", pv, 40*ms, 45*ms, withRefs())
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownPolicySwitch)
				expectBasis(t, r, basisDeliveries)
				return
			}
			expectIllegal(t, r, gc, "gc removed")
		})
	}
}

// TestOrphanSwitchedToBackgroundOnDeliveries: kubernetes#32339 in
// gcPatch's solid-owner arm (found by cascade fuzz --target upstream
// --checks 30 --seed 11 on the delivery record): o's orphan deletion at
// 25 ms is switched to Background at 30 ms, which takes the orphan
// finalizer off while cascade.dev/hold keeps o, now a solid owner that is
// not orphaning; the GC's orphaning patch of cm d lands at 40 ms.
// attemptToOrphan began only if o's event with the orphan finalizer had
// reached the GC's informers before the patch.
func TestOrphanSwitchedToBackgroundOnDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		orphanAt int64 // o's orphan deletion handed on, ms; 0: never
		// sent is when the proxy got the GC's patch, which the audit log
		// stamps at 40 ms, ms; 0: no proxy record of it
		sent  int64
		known bool
		// later: a later version of o, still orphaning, answered before
		// the patch and handed on after it (seed 7741, run 47: the Pod's
		// removal, answered by a second DELETE): attemptToOrphan began
		// on the earlier one
		later bool
	}{
		{"orphan deletion handed on before the patch", 27, 0, true, false},
		{"orphan deletion handed on after the patch", 50, 0, false, false},
		{"orphan deletion never handed on", 0, 0, false, false},
		{"orphan deletion handed on before the proxy got the patch", 34, 36, true, false},
		// attemptToOrphan cannot have begun on it: the patch was sent
		{"orphan deletion handed on after the proxy got the patch, before its audit stamp", 38, 36, false, false},
		{"a later orphaning version handed on after the patch", 27, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			o, d := key("rc", "o"), key("cm", "d")
			b.create("client-0", o, 0, 10*ms, []string{"cascade.dev/hold"})
			b.delivered(o, 11*ms)
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
			b.delivered(d, 21*ms)
			b.del("client-0", o, 21*ms, 25*ms, "Orphan")
			if tc.orphanAt != 0 {
				b.delivered(o, tc.orphanAt*ms)
			}
			if tc.later {
				b.write("client-2", o, 25*ms+500*ms/1000, 26*ms-ms/10, label("x", "y"))
			}
			b.del("client-1", o, 26*ms, 30*ms, "Background")
			if tc.later {
				b.delivered(o, 50*ms)
			}
			if tc.sent != 0 {
				b.requested("gc", "patch", d, tc.sent*ms, 46*ms)
			}
			gc := b.write("gc", d, 40*ms, 45*ms, withRefs())
			r := b.check()
			if tc.known {
				expectKnown(t, r, gc, model.KnownPolicySwitch)
				expectBasis(t, r, basisDeliveries)
				return
			}
			expectIllegal(t, r, gc, "a solid owner that is not orphaning")
		})
	}
}
