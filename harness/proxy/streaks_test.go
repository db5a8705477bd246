package proxy

import "testing"

// The record counts, per object, the GC's writes answered with an error
// since its last 2xx write, as requests are answered: a 2xx write resets
// the object's count; other clients, the second process, subresources,
// unanswered requests and objects out of scope do not count; Take
// starts the count again.
func TestGCFailStreakCountsFailedWritesInARow(t *testing.T) {
	gc := func(verb, name string, code int) Request {
		return Request{Client: GarbageCollectorClient, Call: Call{Verb: verb, Resource: "statefulsets", Namespace: "run-ns", Name: name}, Code: code}
	}
	in := func(ns, _ string) bool { return ns == "run-ns" }
	p := &Proxy{}
	for range 4 {
		p.rec.request(gc(VerbDelete, "a", 403))
	}
	p.rec.request(gc(VerbPatch, "a", 200))
	for range 3 {
		p.rec.request(gc(VerbDelete, "a", 403))
		p.rec.request(gc(VerbGet, "a", 200))
	}
	p.rec.request(gc(VerbDelete, "b", 409))
	p.rec.request(gc(VerbDelete, "b", 0))
	other := gc(VerbDelete, "a", 403)
	other.Client = "replicaset-controller"
	second := gc(VerbDelete, "a", 403)
	second.Process = WorkloadsProcess
	status := gc(VerbPatch, "a", 500)
	status.Subresource = "status"
	out := gc(VerbDelete, "c", 403)
	out.Namespace = "elsewhere"
	for _, r := range []Request{other, second, status, out, out, out, out, out} {
		p.rec.request(r)
	}
	if got := p.GCFailStreak(in); got != 3 {
		t.Fatalf("streak %d, want 3 (a's 3 failed DELETEs after its patch)", got)
	}
	if got := p.GCFailStreak(func(string, string) bool { return true }); got != 5 {
		t.Fatalf("streak over every namespace %d, want 5 (c's)", got)
	}
	p.Take()
	if got := p.GCFailStreak(in); got != 0 {
		t.Fatalf("streak after Take %d, want 0", got)
	}
}
