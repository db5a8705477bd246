package history

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// A server that takes each request's audit ID and drops the connection
// without answering, as an API server going down does.
func droppingServer(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get(AuditIDHeader))
		mu.Unlock()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), ids...) }
}

var cmResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func createCM(t *testing.T, cfg *rest.Config, name string) {
	t.Helper()
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetName(name)
	if _, err := dc.Resource(cmResource).Namespace("run1-default").Create(context.Background(), u, metav1.CreateOptions{}); err == nil {
		t.Fatal("the create was answered by a server that drops every connection")
	}
}

// A write that gets no answer is an op of unknown outcome, unless the
// audit log holds a record of its audit ID: then the server received it
// and the audit history has its outcome.
func TestRecorderUnanswered(t *testing.T) {
	srv, ids := droppingServer(t)
	rec := NewRecorder(Scope{Prefix: "run1"})
	createCM(t, rec.Wrap(&rest.Config{Host: srv.URL}, ClientActor(0)), "a")
	createCM(t, rec.Wrap(&rest.Config{Host: srv.URL}, ClientActor(0)), "b")
	seen := ids()
	if len(seen) != 2 || seen[0] == "" || seen[0] == seen[1] {
		t.Fatalf("expected two requests with distinct audit IDs, got %q", seen)
	}
	lost := rec.Unanswered([]controlplane.AuditRecord{{AuditID: seen[0]}})
	if len(lost) != 1 || lost[0].Name != "b" || lost[0].Code != 0 || !lost[0].Ambiguous() || lost[0].Sent == nil {
		t.Fatalf("expected only b's create, sent and unanswered, got %+v", lost)
	}
	if all := rec.Ops(); len(all) != 2 {
		t.Fatalf("the client-side history must keep both creates, got %d", len(all))
	}
}

// A write whose connection is refused never reached a server, as one sent
// while kube-apiserver restarts: it is no op at all, neither answered nor
// maybe applied, while one whose connection is dropped after it was sent
// is maybe applied (TestRecorderUnanswered).
func TestRecorderDropsRefusedWrites(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now: every dial is refused
	rec := NewRecorder(Scope{Prefix: "run1"})
	createCM(t, rec.Wrap(&rest.Config{Host: url}, ClientActor(0)), "a")
	if all := rec.Ops(); len(all) != 0 {
		t.Errorf("a refused write is in the history: %+v", all)
	}
	if lost := rec.Unanswered(nil); len(lost) != 0 {
		t.Errorf("a refused write is maybe applied: %+v", lost)
	}
	if n := rec.Refused(); n != 1 {
		t.Errorf("Refused() = %d, want the 1 refused write counted", n)
	}
	dropping, _ := droppingServer(t)
	createCM(t, rec.Wrap(&rest.Config{Host: dropping.URL}, ClientActor(0)), "b")
	if lost := rec.Unanswered(nil); len(lost) != 1 || lost[0].Name != "b" || !lost[0].Ambiguous() {
		t.Errorf("a write cut short after it was sent must be maybe applied, got %+v", lost)
	}
}

// A tap records only while a recorder is attached, and only writes that
// get no answer.
func TestTapRecordsUnansweredWhileAttached(t *testing.T) {
	srv, _ := droppingServer(t)
	var tap Tap
	cfg := tap.Wrap(&rest.Config{Host: srv.URL, UserAgent: "cascade-impl/garbage-collector"}, ActorGC)
	createCM(t, cfg, "before")
	rec := NewRecorder(Scope{Prefix: "run1"})
	detach := tap.Attach(rec)
	createCM(t, cfg, "during")
	detach()
	createCM(t, cfg, "after")
	lost := rec.Unanswered(nil)
	if len(lost) != 1 || lost[0].Name != "during" || lost[0].Actor != ActorGC {
		t.Fatalf("expected the GC's create sent while attached, got %+v", lost)
	}
	if len(rec.Ops()) != 0 || tap.InFlight() != 0 {
		t.Fatalf("a tap adds nothing to the client-side history and ends with nothing in flight: %d ops, %d in flight", len(rec.Ops()), tap.InFlight())
	}
}
