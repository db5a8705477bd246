package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

func release(t *testing.T, v string) model.Release {
	t.Helper()
	r, err := model.ParseRelease(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOwnerChangeBeforeDelete: the GC GETs cm/d with its reference to
// the deleted cm/o and decides to delete it; a client removes the
// reference before the GC's DELETE, sent without a resourceVersion
// precondition, lands. On v1.33.13 that is kubernetes#114603, present in
// the release, when the reads show the GC's GET with the old references;
// with no GET recorded (a bare window), or on v1.34 and later (whose GC
// always sends the precondition), it is a violation.
func TestOwnerChangeBeforeDelete(t *testing.T) {
	for _, c := range []struct {
		name, release string
		gcGet, known  bool
		writer        string // who removes the reference
	}{
		{"v1.33 with the GC's GET", "v1.33.13", true, true, "client-1"},
		{"v1.33 without a recorded GET", "v1.33.13", false, false, "client-1"},
		{"v1.37 with the GC's GET", "v1.37.2", true, false, "client-1"},
		// another of the GC's workers (attemptToOrphan's patch, found on
		// v1.31.13 by the conform matrix) changes the references
		{"v1.33, the GC's own patch in between", "v1.33.13", true, true, "gc"},
		{"v1.37, the GC's own patch in between", "v1.37.2", true, false, "gc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBuilder(t)
			b.release, b.readsRecorded = release(t, c.release), true
			o, d := key("cm", "o"), key("cm", "d")
			b.create("client-0", o, 0, 10*ms, nil)
			b.create("client-0", d, 11*ms, 20*ms, nil, b.ref(o, false, false))
			b.del("client-0", o, 21*ms, 30*ms, "Background")
			if c.gcGet {
				b.get("gc", d, 31*ms, 33*ms)
			}
			b.write(c.writer, d, 40*ms, 45*ms, withRefs())
			del := b.del("gc", d, 50*ms, 55*ms, "Background")
			b.ops[del].Delete.PreconditionUID = b.ops[1].Got.UID
			r := b.check()
			if !c.known {
				expectIllegal(t, r, del, "which has no ownerReferences")
				return
			}
			expectKnown(t, r, del, model.KnownOwnerChangeBeforeDelete)
			if !contains(r.Known[0].Message, "present in this release (v1.33.13;") {
				t.Errorf("the finding does not name the release: %s", r.Known[0].Message)
			}
		})
	}
}

// TestUpdateOfRemovedObject: a PUT carrying the UID of an object another
// client removed answers 409 Conflict before kubernetes#132470
// (k8s.io/apiserver v0.34, so v1.33.13) and 404 NotFound since: a
// Conflict on v1.37.2 breaks the API's semantics.
func TestUpdateOfRemovedObject(t *testing.T) {
	for _, c := range []struct {
		release string
		code    int
		legal   bool
	}{
		{"v1.33.13", 409, true},
		{"v1.37.2", 409, false},
		{"v1.33.13", 404, true},
		{"v1.37.2", 404, true},
	} {
		b := newBuilder(t)
		b.release = release(t, c.release)
		x := key("cm", "x")
		b.create("client-0", x, 0, 10*ms, nil)
		uid := b.live[x].UID
		b.del("client-0", x, 11*ms, 20*ms, "")
		reason := map[int]string{409: "Conflict", 404: "NotFound"}[c.code]
		put := b.refused("client-1", history.Update, x, 30*ms, 40*ms, c.code, reason)
		b.ops[put].Sent = &history.Object{Kind: x.Kind, Namespace: x.Namespace, Name: x.Name, UID: uid, Replicas: -1}
		r := b.check()
		if c.legal {
			expectOk(t, r)
		} else {
			expectIllegal(t, r, put, "answered Conflict while no")
		}
	}
}
