package fuzz

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/lin"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// sent is one client step of a concurrent run as it was executed: sent
// at at, answered at done.
type sent struct {
	client   int
	line     string
	step     model.Step
	at, done time.Time
	res      model.Result
	err      error
}

// landed lists the steps that were sent (err == nil) in the order they
// were answered, the closer guess at the order they took effect in: a
// step's write lands at its last request, and the driver sends a step
// again when a resourceVersion conflict refuses it, so a step sent first
// may land after one another client sent later (found by fuzzing impl: a
// finalizer removal retried past another client's add, which replayed in
// the order sent left the owner stuck and hid a race).
func landed(ss []sent) []string {
	ss = slices.Clone(ss)
	slices.SortStableFunc(ss, func(a, b sent) int { return a.done.Compare(b.done) })
	var lines []string
	for _, x := range ss {
		if x.err == nil {
			lines = append(lines, x.line)
		}
	}
	return lines
}

// concurrentRun is one rapid check of a concurrent run.
type concurrentRun struct {
	ctx     context.Context
	env     ConcurrentEnv
	cfg     Config
	program [][]string // per client, its steps in order
	sent    []sent
	fail    func(kind, summary string, write func(string) (string, error))
	ops     int
	known   []string
	// maybe counts the history's ops whose outcome is unknown; restarts
	// are the run's restarts (restart.go)
	maybe     int
	refused   int // writes refused while a server was down (history.Recorder.Refused)
	restartAt []time.Duration
	restarts  []restartDone
	// restartFailed is set when a restart failed on its second attempt
	// too (startRestarts): the run fails on that, and the campaign ends.
	restartFailed bool
	// undecided is the checker's summary when it could not decide the
	// run's history in time ("" when it did).
	undecided string
	checked   time.Duration // how long the check of the history took
	// proxied summarizes the proxy's evidence of a passed run ("" without
	// a proxy)
	proxied string
	// evidence is the proxy's record of the run, once taken (takeEvidence)
	evidence *proxy.Evidence
	// excused names the known races the run passed through, each with
	// what admitted it (lin.Known.Basis)
	excused []string
	// delivered: the history was checked with the proxy's delivery record
	delivered bool
	// graph holds the graph changes the run's GC applied so far
	// (takeGraphChanges; impl only)
	graph []history.GraphChange
	// knownLive names the registry entries that excused a liveness
	// violation of the quiet state
	knownLive []string
}

// takeEvidence takes the proxy's record of the run from the proxy the
// first time, and returns the same record after that.
func (r *concurrentRun) takeEvidence() proxy.Evidence {
	if r.evidence == nil {
		ev := r.env.Evidence()
		r.evidence = &ev
	}
	return *r.evidence
}

// apiServerBreaks are the times the run's kube-apiserver restarts began,
// each of which broke every watch.
func (r *concurrentRun) apiServerBreaks() []time.Time {
	var out []time.Time
	for _, x := range r.restarts {
		if x.name == apiServerRestartName && !x.began.IsZero() {
			out = append(out, x.began)
		}
	}
	return out
}

// takeGraphChanges adds the graph changes the GC applied since the last
// call to the run's and returns them all; nil on targets whose GC's graph
// is out of sight.
func (r *concurrentRun) takeGraphChanges() []history.GraphChange {
	if r.env.GraphChanges != nil {
		r.graph = append(r.graph, r.env.GraphChanges()...)
	}
	return r.graph
}

// run draws a program, runs it with one goroutine per client, waits for
// quiet, and checks the history and the final state.
func (r *concurrentRun) run(t *rapid.T) {
	r.draw(t)
	r.exec(t)
}

// draw draws the run's program: every rapid draw of a concurrent run
// happens here, before anything reaches the cluster, so DrawConcurrent
// draws the same programs without one.
func (r *concurrentRun) draw(t *rapid.T) {
	g := &gen{u: r.cfg.Universe, limited: r.env.Limited != nil}
	actions := map[string]func(*rapid.T){}
	for verb, draw := range g.verbs() {
		if verb == "crd" {
			continue // crdFamily below, in few runs
		}
		actions[verb] = func(t *rapid.T) {
			c := rapid.IntRange(0, r.cfg.Clients-1).Draw(t, "client")
			r.program[c] = append(r.program[c], draw(t))
		}
	}
	compound := func(draw func(*rapid.T) []string) func(*rapid.T) {
		return func(t *rapid.T) {
			c := rapid.IntRange(0, r.cfg.Clients-1).Draw(t, "client")
			r.program[c] = append(r.program[c], draw(t)...)
		}
	}
	// a workload and an object its controller would adopt, in one
	// namespace, sent by one client: what the adoption races start from
	// (stepstate.go family), which random creates draw together rarely
	actions["family"] = compound(func(t *rapid.T) []string { return g.family(t, SteppedAdopterKinds) })
	// two objects owning each other, perhaps deleted in the foreground:
	// random creates and add-owners close such a circle rarely (no-cycle-
	// unblock was not found in 127 runs on impl without it)
	actions["ring"] = compound(g.ring)
	if r.env.Relist {
		actions["fleeting"] = compound(g.fleeting)
	}
	if r.env.Lag {
		actions["scoped"] = compound(g.scoped)
	}
	// a CRD and custom resources in one run of eight: on upstream the
	// run then waits out the GC's 30-second discovery sync to settle
	if len(g.u.customKinds()) > 0 && rapid.IntRange(0, 7).Draw(t, "crds") == 0 {
		actions["crd"] = compound(g.crdFamily)
	}
	t.Repeat(actions)
	r.restartAt = drawRestarts(t, r.env.Restarts)
}

// exec runs the drawn program on the cluster and checks its history and
// final state.
func (r *concurrentRun) exec(t *rapid.T) {
	prefix := "cascade-" + driver.NewRunID()
	scope := history.Scope{Prefix: prefix}
	// The driver's writes are recorded client side on every target: the
	// history of a target without an audit log, and on one with it, the
	// writes that got no answer and have no audit record (maybe applied).
	rec := history.NewRecorder(scope)
	admin := rec.Wrap(r.env.Admin, history.ClientActor(0))
	if r.env.GCTap != nil {
		defer r.env.GCTap.Attach(rec)()
	}
	var obs *history.Observer
	if r.env.Audit == nil {
		var err error
		if obs, err = history.NewObserver(r.env.Admin, scope); err != nil {
			r.fatal(t, err)
		}
		if err := obs.Start(r.ctx); err != nil {
			r.fatal(t, err)
		}
		defer func() { _ = obs.Stop() }()
	}
	var limitedCfg *rest.Config
	if r.env.Limited != nil {
		limitedCfg = r.env.Limited
		if rec != nil {
			limitedCfg = rec.Wrap(r.env.Limited, history.ClientActor(0))
		}
	}
	d, err := driver.New(admin, limitedCfg, prefix)
	if err != nil {
		r.fatal(t, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), time.Minute)
		defer cancel()
		_ = d.Cleanup(ctx)
	}()
	if r.env.GraphChanges != nil {
		r.env.GraphChanges() // the earlier runs' and their cleanups'
	}
	if r.env.Evidence != nil {
		r.env.Evidence() // likewise
	}
	if r.env.Audit != nil {
		// the earlier run's cleanup: its deletes of CRDs, whose names no
		// run prefix scopes, would otherwise fall into this history
		if _, err := r.env.Audit(r.ctx); err != nil {
			t.Fatalf("error: %v", err)
		}
	}
	r.execute(d)
	dyn, err := dynamic.NewForConfig(r.env.Admin)
	if err != nil {
		r.fail("error", err.Error(), nil)
	}
	r.settle(d, dyn, prefix)

	var ops []history.Op
	opts := lin.Options{Timeout: r.env.LinTimeout, Protection: r.env.Protection, Release: r.env.Release}
	opts.GraphChanges = r.takeGraphChanges()
	stale := staleFromGraph(opts.GraphChanges)
	if r.env.Evidence != nil {
		// the GC's informers' deliveries: what the GC could have seen
		ev := r.takeEvidence()
		opts.Deliveries = ev.GCDeliveries()
		// the GC's own requests, on the deliveries' clock: when it decided
		opts.GCRequests = ev.GCRequests()
		// the order the graph took those events in, from the kcm's log
		opts.GraphLog = ev.GraphBuilder
		r.delivered = len(opts.Deliveries) > 0
	}
	if r.env.Audit != nil {
		recs, err := r.env.Audit(r.ctx)
		if err != nil {
			r.fail("error", fmt.Sprintf("audit log: %v", err), nil)
		}
		stale = stale.union(staleFromAudit(recs, r.apiServerBreaks()))
		if ops, err = history.FromAudit(recs, scope); err != nil {
			r.fail("error", fmt.Sprintf("history: %v", err), nil)
		}
		// the audit log records every controller GET: their rechecks
		if opts.Reads, err = history.ReadsFromAudit(recs, scope); err != nil {
			r.fail("error", fmt.Sprintf("history: %v", err), nil)
		}
		opts.ReadsRecorded = true
		if r.env.Evidence == nil && len(opts.GraphChanges) > 0 {
			// an in-process GC: its requests from the audit log bound
			// when it read its graph, as the proxy's record does
			// upstream (lin gcPatch with graph changes)
			opts.GCRequests = history.GCRequestsFromAudit(recs, scope)
		}
		// writes whose answer was lost, and which the server never
		// recorded: maybe applied (a restart's)
		if lost := rec.Unanswered(recs); len(lost) > 0 {
			ops = history.Merge(ops, lost)
		}
	} else {
		if err := obs.Stop(); err != nil {
			r.fail("error", fmt.Sprintf("watch: %v", err), nil)
		}
		if err := rec.Err(); err != nil {
			r.fail("error", fmt.Sprintf("recording: %v", err), nil)
		}
		mine := rec.Ops()
		ops = history.Merge(mine, obs.Ops(mine))
	}
	r.refused = rec.Refused()
	history.AssignLanes(ops)
	r.ops = len(ops)
	for i := range ops {
		if ops[i].Ambiguous() {
			r.maybe++
		}
	}
	began := time.Now()
	res := interruptible(r.ctx, func() lin.Result { return lin.Check(ops, opts) })
	r.checked = time.Since(began)
	for _, k := range res.Known {
		r.known = append(r.known, k.Issue+" (on "+k.Basis+"): "+k.Message)
		r.excused = append(r.excused, k.Issue+" on "+k.Basis)
	}
	r.judge(res)

	objs, err := listRun(r.ctx, dyn, prefix)
	if err != nil {
		r.fail("error", err.Error(), nil)
	}
	v, known := checkLiveness(objs, stale, r.env.Release)
	for _, k := range known {
		r.known = append(r.known, k.Known+": "+k.Message)
		r.knownLive = append(r.knownLive, k.Known)
	}
	if v != nil {
		r.fail("liveness", fmt.Sprintf("once quiet: %s", v), nil)
	}
	if r.env.Evidence != nil {
		r.proxied = r.takeEvidence().Summary()
	}
}

// settle waits until the cluster is quiet. After a restart, or after
// creating a CRD, it settles again and again, a second apart, until the
// run's state is live or the bound has passed (liveUntil: the restarts'
// Rewatch, APIServerRewatch for kube-apiserver; CRDRewatch): a quiet
// window cannot tell a GC that is done from one whose informers or work
// items are still backing off, and a fixed wait long enough for the worst
// back-off would cost every run it. Any other run settles once.
func (r *concurrentRun) settle(d *driver.Driver, dyn dynamic.Interface, prefix string) {
	until := liveUntil(r.restarts, d.LastCRD())
	for {
		if err := r.env.Settler.Settle(r.ctx, d); err != nil {
			r.fail("liveness", fmt.Sprintf("the cluster did not go quiet: %v", err), nil)
		}
		if !time.Now().Before(until) {
			return
		}
		objs, err := listRun(r.ctx, dyn, prefix)
		if err != nil {
			r.fail("error", err.Error(), nil)
		}
		if v, _ := checkLiveness(objs, staleFromGraph(r.takeGraphChanges()), r.env.Release); v == nil {
			return
		}
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// fatal ends a run that could not be set up: an error, or no verdict at
// all when fuzzing was interrupted.
func (r *concurrentRun) fatal(t *rapid.T, err error) {
	stopIfInterrupted(r.ctx)
	t.Fatalf("error: %v", err)
}

// judge takes the checker's verdict on the run's history: an illegal
// history fails the run; one the checker could not decide in time is no
// verdict on the target, so no failure for rapid to shrink, and the run
// is reported inconclusive.
func (r *concurrentRun) judge(res lin.Result) {
	switch res.Verdict {
	case porcupine.Ok:
	case porcupine.Unknown:
		r.undecided = res.Summary
	default:
		r.fail("linearizability", res.Summary, func(dir string) (string, error) {
			path := filepath.Join(dir, HistoryFile)
			return path, res.Visualize(path)
		})
	}
}

// execute runs every client's steps in order, the clients at once, and
// the run's restarts at their times; it returns once all are done.
func (r *concurrentRun) execute(d *driver.Driver) {
	// A failed restart stops the clients: the run then fails at once,
	// naming the restart's error, instead of resending every step to a
	// server that may not come back.
	clients, stop := context.WithCancel(r.ctx)
	defer stop()
	waitRestarts := startRestarts(r.ctx, r.env.Restarts, r.restartAt, stop)
	defer func() {
		r.restarts = waitRestarts()
		for _, x := range r.restarts {
			if x.err != nil && r.ctx.Err() == nil {
				r.restartFailed = true
				r.fail("error", fmt.Sprintf("restart %s: %v", x.name, x.err), nil)
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c, steps := range r.program {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := driver.WithClient(clients, c)
			for _, line := range steps {
				if clients.Err() != nil {
					return // a restart failed
				}
				st, err := model.ParseStep(line)
				if err != nil {
					continue // cannot happen: the generator writes trace syntax
				}
				s := sent{client: c, line: line, step: st, at: time.Now()}
				s.res, s.err = doRetrying(ctx, d, st)
				s.done = time.Now()
				mu.Lock()
				r.sent = append(r.sent, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortStableFunc(r.sent, func(a, b sent) int { return a.at.Compare(b.at) })
}

// trace writes the run as a trace: its steps in the order they were sent
// (steps that could not be sent — an owner never created — left out),
// then settle, expecting what the model does when it takes them one at a
// time. Concurrent runs are not replayed exactly by a sequential trace;
// the description says which clients sent what, and the history's
// visualization shows the real interleaving.
func (r *concurrentRun) trace(kind, summary string) string {
	m := &model.Model{Release: r.env.Release}
	s := model.NewState()
	var cmds []string
	var out []string
	for _, x := range r.sent {
		if x.err != nil {
			continue
		}
		n, res, err := m.Apply(s, x.step)
		if err != nil {
			continue
		}
		s = n
		cmds = append(cmds, x.line)
		if !res.OK() {
			out = append(out, "! "+x.line+" -> "+res.String())
		}
	}
	if n, _, err := m.Settle(s); err == nil {
		s = n
	}
	cmds = append(cmds, "settle")
	out = append(out, s.Dump()...)
	desc := []string{
		fmt.Sprintf("A concurrent run of `cascade fuzz --target %s` (%d clients) that failed (%s):", r.env.Target, r.cfg.Clients, kind),
		firstLine(summary),
		"The steps are in the order the clients sent them; the expected output is the model's, taking them one at a time.",
	}
	for c, steps := range r.program {
		desc = append(desc, fmt.Sprintf("client %d sent: %s", c, strings.Join(steps, "; ")))
	}
	if len(r.env.Inject) > 0 {
		desc = append(desc, "impl ran with injected bug(s) "+strings.Join(r.env.Inject, ","))
	}
	headers := []traces.Header{{Key: traces.HeaderFoundBy, Value: "cascade fuzz --target " + r.env.Target}}
	headers = append(headers, traces.ReleaseHeaders(r.env.Release)...)
	return traces.Format(desc, headers, []traces.Written{{Commands: cmds, Output: out}})
}
