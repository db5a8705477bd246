package target

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/lin"
	"github.com/cascade-k8s/cascade/impl/gc"
	"github.com/cascade-k8s/cascade/model"
)

// A replay's history (Spec.History): the audit log's records from just
// before the replay's first request to just after its last settle, in
// the replay's scope, checked as fuzzing checks a concurrent run's.

// auditIdle is how long the audit log must have nothing new before a read
// of it counts as complete (AuditReader.ReadIdle), as fuzzing's follower.
const auditIdle = 300 * time.Millisecond

// HistoryError is a replay whose history is not linearizable: a request's
// answer the API server could not have given, or a GC or controller
// write the model's specification forbids where it lands.
type HistoryError struct {
	// Summary is lin's one paragraph naming the op and the rule.
	Summary string
}

func (e *HistoryError) Error() string { return "history: " + e.Summary }

// auditTail reads the audit log from where it ended when it was opened.
type auditTail struct {
	r *controlplane.AuditReader
}

// tailAudit opens the audit log and reads past what is in it already.
func (t *Target) tailAudit(ctx context.Context) (*auditTail, error) {
	if t.CP == nil || t.CP.AuditLog() == "" {
		return nil, errors.New("checking the history needs the audit log of an envtest target")
	}
	r, err := t.CP.FollowAudit()
	if err != nil {
		return nil, err
	}
	a := &auditTail{r: r}
	if _, err := a.read(ctx); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// read returns the records written since the last read, once the log has
// had nothing new for auditIdle.
func (a *auditTail) read(ctx context.Context) ([]controlplane.AuditRecord, error) {
	return a.r.ReadIdle(ctx, auditIdle)
}

func (a *auditTail) close() { _ = a.r.Close() }

// check reads the replay's records and checks the history of the objects
// under prefix on release, with the webhook's denials required when
// protection, and with graph, impl's GC's graph changes during the
// replay, as the evidence of what its graph held (with its requests
// from the audit log, as cascade fuzz checks a run); nil when it is
// linearizable (known upstream races included, as fuzzing reports them).
func (a *auditTail) check(ctx context.Context, prefix string, protection bool, release model.Release, graph []history.GraphChange) (error, error) {
	recs, err := a.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	scope := history.Scope{Prefix: prefix}
	ops, err := history.FromAudit(recs, scope)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	reads, err := history.ReadsFromAudit(recs, scope)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	history.AssignLanes(ops)
	opts := lin.Options{Timeout: time.Minute, Protection: protection, Reads: reads, ReadsRecorded: true, Release: release, GraphChanges: graph}
	if len(graph) > 0 {
		opts.GCRequests = history.GCRequestsFromAudit(recs, scope)
	}
	res := lin.Check(ops, opts)
	switch res.Verdict {
	case porcupine.Ok:
		return nil, nil
	case porcupine.Unknown:
		return nil, fmt.Errorf("history: %s", res.Summary)
	}
	return &HistoryError{Summary: res.Summary}, nil
}

// GraphRecorder records the events an impl GC applied to its graph
// (gc.Options.OnGraphChange: pass Add), as history.GraphChange evidence
// for harness/lin (lin.Options.GraphChanges). The impl target keeps one;
// a test that starts impl itself can too.
type GraphRecorder struct {
	mu      sync.Mutex
	changes []history.GraphChange
}

// Add is the GC's OnGraphChange. The time is taken after the graph
// builder applied the event, so it bounds the application from above. A
// version that does not parse is kept as 0, which proves nothing.
func (g *GraphRecorder) Add(c gc.GraphChange) {
	at := time.Now().UnixNano()
	rv, _ := strconv.ParseUint(c.ResourceVersion, 10, 64)
	g.mu.Lock()
	g.changes = append(g.changes, history.GraphChange{UID: string(c.UID), RV: rv, Deleted: c.Deleted, Replaced: string(c.Replaced), Reset: c.Reset, At: at})
	g.mu.Unlock()
}

// Take returns the changes recorded since the last call, in order, and
// forgets them.
func (g *GraphRecorder) Take() []history.GraphChange {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.changes
	g.changes = nil
	return out
}

func (t *Target) TakeGraphChanges() []history.GraphChange {
	if t.graph == nil {
		return nil
	}
	return t.graph.Take()
}
