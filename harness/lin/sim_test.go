package lin

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// sim generates legal concurrent histories: clients and a GC, each with
// one request in flight at a time, whose requests take effect at an
// instant inside their intervals, applied in that order to an in-memory
// store with the API server's semantics. The GC only writes what the
// rules allow on the state its write lands on.
type sim struct {
	rng  *rand.Rand
	live map[history.Key]*history.Object
	keys []history.Key
	uid  int
	rv   uint64
	ops  []history.Op
	// watch: record a watch event of every write (observed_test.go).
	watch *simWatch
}

const simHold = "cascade.dev/hold"

func newSim(seed uint64) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(seed, 0x5eed)), live: map[history.Key]*history.Object{}, rv: 1000}
	for _, ns := range []string{"run-a", "run-b", "run-c"} {
		for _, short := range []string{"cm", "pod", "rs"} {
			for i := range 5 {
				s.keys = append(s.keys, history.Key{Kind: kind(short), Namespace: ns, Name: fmt.Sprintf("%s%d", short, i)})
			}
		}
	}
	return s
}

// run generates n ops from clients client lanes plus the GC.
func (s *sim) run(n, clients int) []history.Op {
	type lane struct {
		actor          string
		call, lin, ret int64
	}
	plan := func(l *lane, from int64) {
		l.call = from + s.rng.Int64N(10*ms)
		l.lin = l.call + 1 + s.rng.Int64N(30*ms)
		l.ret = l.lin + 1 + s.rng.Int64N(30*ms)
	}
	lanes := make([]*lane, clients+1)
	for i := range lanes {
		lanes[i] = &lane{actor: history.ClientActor(i)}
		if i == clients {
			lanes[i].actor = history.ActorGC
		}
		plan(lanes[i], 0)
	}
	for len(s.ops) < n {
		l := lanes[0]
		for _, x := range lanes[1:] {
			if x.lin < l.lin {
				l = x
			}
		}
		var before map[history.Key]*history.Object
		if s.watch != nil {
			before = maps.Clone(s.live)
		}
		var op *history.Op
		if l.actor == history.ActorGC {
			op = s.gc()
		} else {
			op = s.client(l.actor)
		}
		if op != nil {
			op.Actor, op.Call, op.Return = l.actor, l.call, l.ret
			s.ops = append(s.ops, *op)
			if s.watch != nil {
				s.watch.see(s, before, op.Key(), l.lin)
			}
		}
		plan(l, l.ret)
	}
	history.AssignLanes(s.ops)
	return s.ops
}

func (s *sim) pick() history.Key { return s.keys[s.rng.IntN(len(s.keys))] }

func (s *sim) opOn(k history.Key, v history.Verb) *history.Op {
	return &history.Op{Verb: v, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
}

func (s *sim) put(o *history.Object) *history.Object {
	s.rv++
	o.RV = s.rv
	s.live[o.Key()] = o
	return o
}

func clone(o *history.Object) *history.Object {
	c := *o
	c.Owners, c.Finalizers = slices.Clone(o.Owners), slices.Clone(o.Finalizers)
	return &c
}

func (s *sim) client(actor string) *history.Op {
	k := s.pick()
	cur := s.live[k]
	switch r := s.rng.IntN(20); {
	case r < 7: // create
		op := s.opOn(k, history.Create)
		if cur != nil {
			op.Code, op.Reason = 409, "AlreadyExists"
			return op
		}
		s.uid++
		o := &history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: fmt.Sprintf("uid-%d", s.uid), Replicas: -1}
		if s.rng.IntN(6) == 0 {
			o.Finalizers = []string{simHold}
		}
		for range s.rng.IntN(3) {
			if owner := s.live[s.pick()]; owner != nil && owner.Namespace == k.Namespace && owner.UID != o.UID {
				o.Owners = append(o.Owners, refTo(owner, s.rng.IntN(2) == 0))
			}
		}
		sent := clone(o)
		sent.UID = ""
		op.Sent, op.Code = sent, 201
		if s.rng.IntN(50) == 0 { // no answer; applied or not
			op.Code = 0
			if s.rng.IntN(2) == 0 {
				return op
			}
		}
		got := s.put(o)
		if op.Code != 0 {
			op.Got = got
		}
		return op
	case r < 12: // delete
		op := s.opOn(k, history.Delete)
		op.Delete = &history.DeleteOptions{Propagation: []string{"", "Background", "Foreground", "Orphan"}[s.rng.IntN(4)]}
		if cur == nil {
			op.Code, op.Reason = 404, "NotFound"
			return op
		}
		if s.rng.IntN(8) == 0 {
			op.Delete.PreconditionRV = fmt.Sprint(cur.RV - 1)
			op.Code, op.Reason = 409, "Conflict"
			return op
		}
		op.Code = 200
		fins := history.DeletionFinalizers(cur, op.Delete)
		if len(fins) == 0 {
			delete(s.live, k)
			op.Removed = true
			op.Got = &history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: cur.UID, Replicas: -1}
			return op
		}
		o := clone(cur)
		changed := !o.Deleting || !history.SameFinalizers(o.Finalizers, fins)
		o.Deleting, o.Finalizers = true, fins
		if changed {
			op.Got = s.put(o)
		} else {
			op.Got = cur
		}
		return op
	default: // patch: finalizer, ownerReference or label
		op := s.opOn(k, history.Patch)
		if cur == nil {
			op.Code, op.Reason = 404, "NotFound"
			return op
		}
		o := clone(cur)
		choice := s.rng.IntN(3)
		if o.Deleting && o.HasFinalizer(simHold) && s.rng.IntN(2) == 0 {
			choice = 0 // let objects held in deletion go
		}
		switch choice {
		case 0:
			if o.HasFinalizer(simHold) {
				o.Finalizers = slices.DeleteFunc(o.Finalizers, func(f string) bool { return f == simHold })
			} else if o.Deleting {
				op.Code, op.Reason = 422, "Invalid"
				return op
			} else {
				o.Finalizers = append(o.Finalizers, simHold)
			}
		case 1:
			if len(o.Owners) > 0 {
				o.Owners = o.Owners[1:]
			} else if owner := s.live[s.pick()]; owner != nil && owner.Namespace == k.Namespace && owner.UID != o.UID {
				o.Owners = []history.Ref{refTo(owner, s.rng.IntN(2) == 0)}
			}
		default:
			o.Labels = map[string]string{"v": fmt.Sprint(s.rng.IntN(3))}
		}
		op.Sent = &history.Object{RV: cur.RV}
		op.Code = 200
		if o.Deleting && len(o.Finalizers) == 0 {
			delete(s.live, k)
			op.Removed, op.Got = true, o
			return op
		}
		op.Got = s.put(o)
		return op
	}
}

func refTo(o *history.Object, block bool) history.Ref {
	return history.Ref{APIVersion: o.Kind.Info().APIVersion, Kind: o.Kind.Info().Kind, Name: o.Name, UID: o.UID, Block: block}
}

// gc makes one write the rules allow, or nothing.
func (s *sim) gc() *history.Op {
	st := s.store()
	var choices []func() *history.Op
	for _, k := range s.keys {
		cur := s.live[k]
		if cur == nil {
			continue
		}
		e := st.get(k, keyHash(k))
		// attemptToDeleteItem as the model decides it
		var classes []model.RefClass
		var keep, stale []history.Ref
		for _, r := range cur.Owners {
			rs, _ := resolve(st, cur, &r)
			classes = append(classes, rs)
			if model.RefRemovable(rs) {
				stale = append(stale, r)
			} else {
				keep = append(keep, r)
			}
		}
		switch {
		case model.GCMayDelete(classes) && !cur.Deleting:
			choices = append(choices, func() *history.Op { return s.gcDelete(cur) })
		case len(keep) > 0 && len(stale) > 0:
			choices = append(choices, func() *history.Op { return s.gcPatch(cur, func(o *history.Object) { o.Owners = keep }) })
		}
		if !cur.Deleting {
			continue
		}
		for _, f := range []string{model.FinalizerOrphan, model.FinalizerForeground} {
			if !cur.HasFinalizer(f) {
				continue
			}
			deps := referrers(st, e, model.GCFinalizerWaits(f))
			switch {
			case len(deps) == 0:
				choices = append(choices, func() *history.Op {
					return s.gcPatch(cur, func(o *history.Object) {
						o.Finalizers = slices.DeleteFunc(o.Finalizers, func(x string) bool { return x == f })
					})
				})
			case f == model.FinalizerOrphan:
				d := deps[0].e.obj
				choices = append(choices, func() *history.Op {
					return s.gcPatch(d, func(o *history.Object) {
						o.Owners = slices.DeleteFunc(o.Owners, func(r history.Ref) bool { return r.UID == cur.UID })
					})
				})
			}
		}
	}
	if len(choices) == 0 {
		return nil
	}
	return choices[s.rng.IntN(len(choices))]()
}

func (s *sim) gcDelete(cur *history.Object) *history.Op {
	k := cur.Key()
	op := s.opOn(k, history.Delete)
	policy := "Background"
	switch {
	case cur.HasFinalizer(model.FinalizerOrphan):
		policy = "Orphan"
	case cur.HasFinalizer(model.FinalizerForeground):
		policy = "Foreground"
	}
	op.Delete = &history.DeleteOptions{Propagation: policy, PreconditionUID: cur.UID, PreconditionRV: fmt.Sprint(cur.RV)}
	op.Code = 200
	fins := history.DeletionFinalizers(cur, op.Delete)
	if len(fins) == 0 {
		delete(s.live, k)
		op.Removed = true
		op.Got = &history.Object{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: cur.UID, Replicas: -1}
		return op
	}
	o := clone(cur)
	o.Deleting, o.Finalizers = true, fins
	op.Got = s.put(o)
	return op
}

func (s *sim) gcPatch(cur *history.Object, change func(*history.Object)) *history.Op {
	op := s.opOn(cur.Key(), history.Patch)
	o := clone(cur)
	change(o)
	op.Sent = &history.Object{UID: cur.UID}
	op.Code = 200
	if o.Deleting && len(o.Finalizers) == 0 {
		delete(s.live, cur.Key())
		op.Removed, op.Got = true, o
		return op
	}
	op.Got = s.put(o)
	return op
}

// store is the sim's live objects as a checker store (strict mode).
func (s *sim) store() *store {
	st := newStore()
	for k, o := range s.live {
		kh := keyHash(k)
		st = st.with(k, kh, newEntry(k, kh, o, objHash(o), 0, nil))
	}
	return st
}

func TestSimulatedHistoriesAreLinearizable(t *testing.T) {
	for seed := range uint64(6) {
		ops := newSim(seed).run(300, 4)
		for _, noPart := range []bool{false, true} {
			r := Check(ops, Options{NoPartition: noPart})
			if r.Verdict != "Ok" || len(r.Known) > 0 {
				t.Fatalf("seed %d (partitioned %v): %s %s", seed, !noPart, r.Verdict, r.Summary)
			}
		}
	}
}

// TestSimulatedHistoriesMutated breaks legal histories in ways the checker
// must notice: a removal dropped from the record, an answer with an old
// resourceVersion, a GC delete of an object with a solid owner.
func TestSimulatedHistoriesMutated(t *testing.T) {
	ops := newSim(7).run(400, 4)
	mutate := func(name string, pick func(i int, op *history.Op) bool, change func([]history.Op, int) []history.Op) {
		t.Run(name, func(t *testing.T) {
			for i := range ops {
				if !pick(i, &ops[i]) {
					continue
				}
				bad := slices.Clone(ops)
				bad = change(bad, i)
				history.AssignLanes(bad)
				if r := Check(bad, Options{}); r.Verdict != "Illegal" {
					t.Fatalf("mutating op %d (%s): want Illegal, got %s: %s", i, ops[i].String(), r.Verdict, r.Summary)
				}
				return
			}
			t.Fatalf("no op to mutate")
		})
	}
	// A removal followed by a create of the same key: without the removal
	// the create finds the object live.
	mutate("drop a removal", func(i int, op *history.Op) bool {
		if !op.Removed || !op.OK() {
			return false
		}
		for j := i + 1; j < len(ops); j++ {
			if ops[j].Key() == op.Key() && ops[j].Verb == history.Create && ops[j].OK() && ops[j].Call > op.Return {
				return true
			}
		}
		return false
	}, func(h []history.Op, i int) []history.Op { return slices.Delete(h, i, i+1) })
	mutate("answer an old resourceVersion", func(i int, op *history.Op) bool {
		return op.Verb == history.Patch && op.OK() && !op.Removed && op.Got.RV > 1001
	}, func(h []history.Op, i int) []history.Op {
		g := *h[i].Got
		g.RV = 1
		h[i].Got = &g
		return h
	})
	mutate("gc deletes an object with no owners", func(i int, op *history.Op) bool {
		return op.Verb == history.Delete && op.Actor != history.ActorGC && op.OK() && op.Got != nil && op.Got.UID != "" &&
			len(liveOwners(ops, i)) == 0
	}, func(h []history.Op, i int) []history.Op {
		h[i].Actor = history.ActorGC
		return h
	})
}

// liveOwners returns the ownerReferences the object op i deletes had at
// its last successful write before op i.
func liveOwners(ops []history.Op, i int) []history.Ref {
	for j := i - 1; j >= 0; j-- {
		if ops[j].Key() == ops[i].Key() && ops[j].OK() && ops[j].Got != nil && ops[j].Return < ops[i].Call {
			return ops[j].Got.Owners
		}
	}
	return []history.Ref{{}}
}

func BenchmarkCheck2000(b *testing.B) {
	ops := newSim(1).run(2000, 4)
	b.ReportAllocs()
	for b.Loop() {
		if r := Check(ops, Options{}); r.Verdict != "Ok" {
			b.Fatalf("%s: %s", r.Verdict, r.Summary)
		}
	}
}

func BenchmarkCheck2000Unpartitioned(b *testing.B) {
	ops := newSim(1).run(2000, 4)
	b.ReportAllocs()
	for b.Loop() {
		if r := Check(ops, Options{NoPartition: true}); r.Verdict != "Ok" {
			b.Fatalf("%s: %s", r.Verdict, r.Summary)
		}
	}
}

// wideCascade is a history in which the GC deletes n pods of a ReplicaSet
// at once after the ReplicaSet's deletion, except that the delete of the
// last pod returned before the ReplicaSet's deletion was sent: illegal.
// It returns the history and that op.
func wideCascade(t testing.TB, n int) ([]history.Op, int) {
	b := &builder{live: map[history.Key]*history.Object{}, rv: 100}
	rs := key("rs", "r")
	b.create("client-0", rs, 0, ms, nil)
	for i := range n {
		p := key("pod", fmt.Sprintf("p%d", i))
		b.create("controller/replicaset-controller", p, int64(i+2)*ms, int64(i+3)*ms, nil, b.ref(rs, true, true))
	}
	start := int64(n+10) * ms
	b.del("client-0", rs, start, start+ms, "Background")
	last := 0
	for i := range n {
		last = b.del("gc", key("pod", fmt.Sprintf("p%d", i)), start+2*ms, start+100*ms, "Background")
	}
	b.ops[last].Call, b.ops[last].Return = start-5*ms, start-4*ms
	history.AssignLanes(b.ops)
	return b.ops, last
}

// TestWideIllegalHistory: many concurrent GC deletes around an illegal
// one. The creates overlap pairwise (closed intervals), so there are
// exponentially many orders to try; states that differ only in the order
// of ops on other keys must merge for the search to end (the timeout only
// guards against a regression hanging the suite).
func TestWideIllegalHistory(t *testing.T) {
	ops, bad := wideCascade(t, 60)
	r := Check(ops, Options{Timeout: 2 * time.Minute})
	if r.Verdict != "Illegal" || r.Culprit != bad || !strings.Contains(r.Summary, model.PropNoSolidOwnerCollected) {
		t.Fatalf("want op %d illegal, got %s (culprit %d): %s", bad, r.Verdict, r.Culprit, r.Summary)
	}
}

func BenchmarkCheckIllegalWide400(b *testing.B) {
	ops, _ := wideCascade(b, 400)
	for b.Loop() {
		if r := Check(ops, Options{}); r.Verdict != "Illegal" {
			b.Fatalf("%s: %s", r.Verdict, r.Summary)
		}
	}
}

// TestCheckTimeoutIsInconclusive: a check that runs out of time decides
// nothing, and says so without blaming the system. In the history every
// GC request went unanswered, so each may have taken effect any time
// after the run began: its search takes far longer than the timeout.
func TestCheckTimeoutIsInconclusive(t *testing.T) {
	ops := newSim(1).run(2000, 4)
	for i := range ops {
		if ops[i].Actor == history.ActorGC {
			ops[i].Call, ops[i].Code = 0, 0
		}
	}
	r := Check(ops, Options{Timeout: 200 * time.Millisecond})
	if r.Verdict != "Unknown" || r.Culprit != -1 || !strings.HasPrefix(r.Summary, "Inconclusive: ") ||
		!strings.Contains(r.Summary, "the checker could not decide within 200ms") || !strings.Contains(r.Summary, "no verdict on the system under test") {
		t.Fatalf("want Unknown, no culprit and an inconclusive summary, got %s (culprit %d): %s", r.Verdict, r.Culprit, r.Summary)
	}
}
