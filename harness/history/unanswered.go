package history

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// AuditIDHeader is the request header kube-apiserver takes a request's
// audit ID from (k8s.io/apiserver's WithAuditInit; it makes one up when
// the header is absent). A Recorder sends one of its own with every write
// it records, so that the audit log's record of the write, if there is
// one, can be told apart from its absence.
const AuditIDHeader = "Audit-ID"

// unanswered is a recorded write that got no answer, with the audit ID it
// was sent with.
type unanswered struct {
	op Op
	id string
}

func newAuditID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// addUnanswered records an op that got no answer (Code 0: maybe applied);
// history says whether it also belongs to Ops, the client-side history.
func (r *Recorder) addUnanswered(op Op, id string, history bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if history {
		r.ops = append(r.ops, op)
	}
	r.unanswered = append(r.unanswered, unanswered{op: op, id: id})
}

// addRefused counts a write whose connection was refused.
func (r *Recorder) addRefused() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused++
}

// Refused is the number of writes to objects in scope whose connection
// was refused (a server down, as while kube-apiserver restarts): they
// were never sent, so they are in no history, neither applied nor maybe
// applied; a client that resends them is recorded again.
func (r *Recorder) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// Unanswered returns the recorded writes that got no answer (a connection
// reset or cut short, a cancelled request: the client cannot tell whether
// the write was applied; a write whose connection was refused was never
// sent and is not recorded, neverSent) and of which the audit records hold no
// record: the ops an audit history (FromAudit) lacks. They carry Code 0,
// so the checker takes each as maybe applied, at any time after its Call
// (history.Op.Ambiguous). A write the API server received has a record,
// with the answer the client missed; FromAudit has that op already.
//
// With a graceful API server restart every write it received has its
// record (it finishes them before it exits), so these are the writes it
// never received; after a crash they may also be writes it applied and
// died before recording.
func (r *Recorder) Unanswered(records []controlplane.AuditRecord) []Op {
	audited := map[string]bool{}
	for _, rec := range records {
		audited[rec.AuditID] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Op
	for _, u := range r.unanswered {
		if !audited[u.id] {
			out = append(out, u.op)
		}
	}
	return out
}

// Tap records, for whichever Recorder is attached at the time, the writes
// of a long-lived client that get no answer: the garbage collector of a
// target that outlives each run's Recorder. Answered writes pass
// unrecorded and undecoded (the audit log has them). The zero Tap is
// ready, with nothing attached.
type Tap struct {
	rec      atomic.Pointer[Recorder]
	inFlight atomic.Int32
}

// InFlight is the number of the client's write requests (any method but
// GET) sent and not yet answered while a Recorder was attached.
func (t *Tap) InFlight() int { return int(t.inFlight.Load()) }

// Wrap returns a copy of cfg whose writes to objects in the attached
// Recorder's scope that get no answer are recorded as ops of actor.
func (t *Tap) Wrap(cfg *rest.Config, actor string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return tapTransport{tap: t, actor: actor, next: next}
	})
	return c
}

// WrapTransport returns next wrapped so that the writes sent through it
// to objects in the attached Recorder's scope that get no answer are
// recorded, each as the actor the audit log names for user and the
// request's user agent (AuditActor): for a proxy that passes on the
// requests of every kube-controller-manager client.
func (t *Tap) WrapTransport(next http.RoundTripper, user string) http.RoundTripper {
	return tapTransport{tap: t, user: user, next: next}
}

// Attach makes r the Recorder the tap records into until the returned
// function detaches it.
func (t *Tap) Attach(r *Recorder) (detach func()) {
	t.rec.Store(r)
	return func() { t.rec.CompareAndSwap(r, nil) }
}

type tapTransport struct {
	tap   *Tap
	actor string
	user  string // WrapTransport's
	next  http.RoundTripper
}

func (t tapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.tap.rec.Load()
	if r == nil {
		return t.next.RoundTrip(req)
	}
	if req.Method != http.MethodGet {
		t.tap.inFlight.Add(1)
		defer t.tap.inFlight.Add(-1)
	}
	return (&recordingTransport{r: r, actor: t.actor, user: t.user, next: t.next, onlyUnanswered: true}).RoundTrip(req)
}
