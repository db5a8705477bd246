package lin

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// simWatch turns a sim's writes into the events a kubeconfig target's
// observer receives: one per write that changed the store, each kind's in
// the order they took effect, each delivered some lag after it took
// effect (now and then a long one, as on a loaded machine).
type simWatch struct {
	rng    *rand.Rand
	events []history.WatchEvent
	last   map[model.KindID]int64 // the last delivery of each kind's watch
}

func (w *simWatch) see(s *sim, before map[history.Key]*history.Object, k history.Key, at int64) {
	was, now := before[k], s.live[k]
	if was == now {
		return
	}
	ev := history.WatchEvent{}
	if now != nil {
		ev.Object = clone(now)
	} else {
		s.rv++ // a deletion is a revision of its own
		ev.Object, ev.Removed = clone(was), true
		ev.Object.RV = s.rv
	}
	lag := 1 + w.rng.Int64N(20*ms)
	if w.rng.IntN(20) == 0 {
		lag += 300 * ms
	}
	ev.At = max(at+lag, w.last[k.Kind]+1)
	w.last[k.Kind] = ev.At
	w.events = append(w.events, ev)
}

// observedSim is a sim history of n ops as a kubeconfig target records
// it: the requests of the driver's clients as they sent them, and every
// write of the others — the GC, and the last client lane, which stands
// for a workload controller — only as harness/history's observer derives
// it from the watch (history.ObservedOps). The observer starts at 0.
func observedSim(seed uint64, n, clients int) []history.Op {
	s := newSim(seed)
	s.watch = &simWatch{rng: rand.New(rand.NewPCG(seed, 0xa7c4)), last: map[model.KindID]int64{}}
	all := s.run(n, clients)
	hidden := history.ClientActor(clients - 1)
	var recorded []history.Op
	for _, op := range all {
		if op.Actor != hidden && op.Actor != history.ActorGC {
			recorded = append(recorded, op)
		}
	}
	recorded = history.Merge(recorded)
	events := slices.Clone(s.watch.events)
	slices.SortStableFunc(events, func(a, b history.WatchEvent) int { return int(a.At - b.At) })
	return history.Merge(recorded, history.ObservedOps(0, events, recorded))
}

// TestObservedSimHistoriesAreLinearizable: a legal history stays legal
// as a kubeconfig target records it, and its check decides (the timeout
// only guards against a regression hanging the suite).
func TestObservedSimHistoriesAreLinearizable(t *testing.T) {
	for seed := range uint64(4) {
		ops := observedSim(seed, 300, 4)
		r := Check(ops, Options{Timeout: time.Minute})
		if r.Verdict != "Ok" || len(r.Known) > 0 {
			t.Fatalf("seed %d: %s %s", seed, r.Verdict, r.Summary)
		}
	}
}

// BenchmarkCheck2000Observed checks a sim history of at least 2,000 ops
// as a kubeconfig target records it (compare BenchmarkCheck2000, a sim
// history of 2,000 ops as an audit log records it). The sim's writes
// seen only by watch come out as fewer ops than the sim made, so it runs
// longer until the recorded history has 2,000.
func BenchmarkCheck2000Observed(b *testing.B) {
	var ops []history.Op
	for n := 2000; len(ops) < 2000; n += 100 {
		ops = observedSim(1, n, 4)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := Check(ops, Options{Timeout: time.Minute}); r.Verdict != "Ok" {
			b.Fatalf("%s: %s", r.Verdict, r.Summary)
		}
	}
	b.ReportMetric(float64(len(ops)), "ops")
}
