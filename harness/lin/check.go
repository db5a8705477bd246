// Package lin checks a recorded history (harness/history) for
// linearizability against the API server's semantics, and every write of
// the garbage collector and the controllers for legality at the instant
// it took effect.
//
// The model is a store of objects keyed by (kind, namespace, name). A
// step checks only what the API promises (a successful create yields a
// fresh UID, a write a larger resourceVersion, a precondition compares
// against the live values, a DELETE leaves the finalizers the API
// server's deletion rules choose) and then adopts the object the server
// answered. On top of that, a GC write must be one the GC may make on the
// state it lands on (an object is deleted only when no owner is solid, a
// finalizer is removed only when no dependent still needs it, ...), and a
// controller adopts only to an owner not being deleted.
//
// Some rules can be broken by documented upstream races rather than bugs.
// Check first requires every rule; only if no linearization satisfies
// them all does it look for one in which each broken rule is explained
// by such a race, and reports those as Known findings.
package lin

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// Options tunes Check.
type Options struct {
	// Timeout bounds the search; 0 means none. A search that runs out
	// of time answers Unknown.
	Timeout time.Duration
	// RaceWindow is how long after a write another component may still
	// act as if it had not happened: a watch of another resource lagging
	// behind, a controller between its recheck and its write. It bounds
	// the Known classifications. 0 means DefaultRaceWindow.
	RaceWindow time.Duration
	// NoPartition checks the history as one piece (for comparison; the
	// result is the same, see partition).
	NoPartition bool
	// Protection says the cluster runs the deletion-protection webhook
	// (model/protection.go): a DELETE may then not succeed on a live
	// object labelled policy.kruise.io/delete-protection=Always. Without
	// it a denial is only permitted, never required, as on a cluster
	// whose webhook is unknown.
	Protection bool
	// Reads are the controllers' GETs (history.ReadsFromAudit): evidence
	// of their rechecks, not operations to linearize.
	Reads []history.Read
	// ReadsRecorded says Reads holds every GET the controllers made (the
	// audit log of an envtest target records them all). An adoption to
	// an owner being deleted is then kubernetes#42938's residual race
	// only if the adopting controller's recheck GET of that owner
	// (RecheckDeletionTimestamp, pkg/controller/controller_ref_manager.go)
	// answered it live and returned within the race window before the
	// write. Without it (a kubeconfig target records only the driver's
	// requests and a watch), the deletion's start within the race window
	// is enough, since a history cannot show whether the controller
	// rechecked.
	ReadsRecorded bool
	// GraphChanges are the events an in-process GC applied to its graph
	// (history.GraphChange; impl only). With them and the GC's GETs in
	// Reads, a GC decision that reads the graph is no longer excused as
	// made on a graph behind the store (model.KnownStaleGraph) when they show
	// the graph had the writes in question before the deciding worker
	// could have read it.
	GraphChanges []history.GraphChange
	// Deliveries are the watch events the API proxy handed to the real
	// GC's informers (history.Delivery; upstream behind the proxy,
	// proxy.Evidence.GCDeliveries). With them a GC decision is excused
	// as made before the GC saw a write (kubernetes#26120,
	// kubernetes#124378, model.KnownStaleGraph) only when no event
	// carrying that write had been handed to its informers by the
	// latest moment the GC can have decided; the race window is not
	// consulted there. Empty: the target has no proxy (kubeconfig,
	// --no-proxy) or its GC is in-process (GraphChanges).
	Deliveries []history.Delivery
	// GraphLog is the real GC's graph builder's log of the events it
	// began to apply (history.Processed; upstream, from
	// kube-controller-manager's log), paired with Deliveries by object.
	// It orders the events of different informers as the graph took
	// them in, which Deliveries cannot (graph_log.go): with it an owner's
	// orphan deletion that missed a dependent whose reference reached
	// another informer first is excused as kubernetes#26120 only if the
	// graph builder took the reference in after the owner's event.
	GraphLog []history.Processed
	// GCRequests are the real GC's GETs and writes as the API proxy
	// recorded them (proxy.Evidence.GCRequests), on the clock of
	// Deliveries: the moment the GC decided a write is bounded by when
	// the proxy got its GET of the object (gcDecidedBy), not by the
	// audit log's later stamp of it. Empty: the audit log's times bound
	// it.
	GCRequests []history.GCRequest
	// Semantics is the API server behaviour answers are judged by
	// (model.Semantics) apart from what Release decides: the bug switches
	// that change an answer. Check adds Release's switches (Semantics.For).
	Semantics model.Semantics
	// Release is the Kubernetes release of the API server and GC that
	// made the history (the zero value: model.DefaultRelease). It picks
	// the release-dependent answers (model.ReleaseChanges) and the known
	// races present in that release (model.KnownRace.Releases). A skewed
	// Release (model.Release.WithKCM) judges the API's answers by
	// kube-apiserver's release and the GC's writes and races by
	// kube-controller-manager's.
	Release model.Release
}

// DefaultRaceWindow is Options.RaceWindow's default.
const DefaultRaceWindow = time.Second

// Known is a broken rule a documented upstream race explains.
type Known struct {
	Issue    string // the registry entry's ID (model.KnownRaces), e.g. "kubernetes#26120"
	Property string
	Op       int // index of the op in the history
	Message  string
	// Basis is what admitted the excuse (a model.Evidence name):
	// "delivery-record" (the proxy's record of the GC's informers),
	// "graph-changes", "recorded-reads", "audit-order", or "window"
	// when it rested on the race window alone.
	Basis string
}

// String renders the finding on one line.
func (k Known) String() string {
	return fmt.Sprintf("op %d: %s [%s] (%s)", k.Op, k.Message, k.Property, k.Issue)
}

// Result is Check's verdict.
type Result struct {
	// Verdict is porcupine.Ok, Illegal or Unknown: the search ran out of
	// time (Options.Timeout), an inconclusive check that says nothing of
	// the system whose history it is.
	Verdict porcupine.CheckResult
	// Info and Model are porcupine's, for Visualize.
	Info  porcupine.LinearizationInfo
	Model porcupine.Model
	// Known lists the upstream races the linearization went through;
	// empty unless no linearization avoids them.
	Known []Known
	// Summary is one paragraph: the verdict and, when not Ok, the op that
	// cannot be linearized and the rule or answer that forbids it.
	Summary string
	// Culprit is the index of the op Summary names, -1 if none.
	Culprit int
	// Ops is the history checked.
	Ops []history.Op
	// Actors names the lanes (Op.ClientID) in order.
	Actors []string
}

// Check checks a history. Ops need lanes (history.AssignLanes).
func Check(ops []history.Op, opts Options) Result {
	window := opts.RaceWindow
	if window <= 0 {
		window = DefaultRaceWindow
	}
	c := &checker{ops: ops, window: int64(window), protection: opts.Protection, sem: opts.Semantics.For(opts.Release), reads: readsByKey(opts.Reads), readsRecorded: opts.ReadsRecorded,
		graph: graphByUID(opts.GraphChanges), resets: graphResets(opts.GraphChanges), delivered: deliveriesByUID(opts.Deliveries), deliveries: len(opts.Deliveries) > 0, requests: gcRequestsByKey(opts.GCRequests), release: opts.Release.Or()}
	c.applied = appliedByUID(opts.GraphLog, c.delivered)
	c.ins = make([]*input, len(ops))
	for i := range ops {
		op := &ops[i]
		k := op.Key()
		c.ins[i] = &input{id: i, op: op, key: k, kh: keyHash(k), gotHash: objHash(op.Got), ret: effectiveReturn(op), rev: writtenRevision(op)}
	}
	res := Result{Culprit: -1, Ops: ops, Actors: actors(ops)}
	parts := [][]int{allOps(len(ops))}
	if !opts.NoPartition {
		parts = partition(ops)
	}
	c.chainRevisions(parts)
	deadline := time.Time{}
	if opts.Timeout > 0 {
		deadline = time.Now().Add(opts.Timeout)
	}

	strict := c.porcupineModel(parts)
	res.Verdict, res.Info = porcupine.CheckOperationsVerbose(strict, c.operations(), remaining(deadline))
	res.Model = strict
	if res.Verdict == porcupine.Unknown {
		res.Summary = fmt.Sprintf("Inconclusive: the checker could not decide within %s whether the %d operations are linearizable; this is no verdict on the system under test.", opts.Timeout, len(ops))
		return res
	}
	if res.Verdict == porcupine.Ok {
		return c.static(res)
	}
	failed := failedParts(parts, res.Info)

	lc := *c
	lc.lenient = true
	lenient := lc.porcupineModel(parts)
	verdict, info := porcupine.CheckOperationsVerbose(lenient, c.operations(), remaining(deadline))
	if verdict == porcupine.Unknown {
		res.Verdict = porcupine.Unknown
		res.Summary = fmt.Sprintf("Inconclusive: no linearization of the %d operations keeps every rule, and the checker could not decide within %s whether known upstream races explain the broken ones; this is no verdict on the system under test.", len(ops), opts.Timeout)
		return res
	}
	res.Verdict, res.Info, res.Model = verdict, info, lenient
	if verdict == porcupine.Illegal {
		return lc.explain(res, parts, failedParts(parts, info))
	}
	// Ok only thanks to known races: collect them from the partitions
	// that failed strictly.
	rc := lc
	rc.collect = true
	lins := info.PartialLinearizations()
	for _, p := range failed {
		res.Known = append(res.Known, rc.replayKnown(parts[p], longest(lins[p]))...)
	}
	slices.SortFunc(res.Known, func(a, b Known) int { return a.Op - b.Op })
	return c.static(res)
}

func remaining(deadline time.Time) time.Duration {
	if deadline.IsZero() {
		return 0
	}
	if d := time.Until(deadline); d > time.Millisecond {
		return d
	}
	return time.Millisecond
}

func allOps(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func actors(ops []history.Op) []string {
	var out []string
	for i := range ops {
		for len(out) <= ops[i].ClientID {
			out = append(out, "")
		}
		out[ops[i].ClientID] = ops[i].Actor
	}
	return out
}

// operations turns the history into porcupine operations. An ambiguous
// op's Return is unbounded: it may have taken effect any time after its
// Call.
func (c *checker) operations() []porcupine.Operation {
	out := make([]porcupine.Operation, len(c.ops))
	for i, in := range c.ins {
		out[i] = porcupine.Operation{ClientId: in.op.ClientID, Input: in, Call: in.op.Call, Return: in.ret, Metadata: in}
	}
	return out
}

// porcupineModel is the checker as a porcupine model.
//
// It is a NondeterministicModel: an ambiguous op (no answer, or a server
// error) forks the store into "applied" and "not applied", as etcd's
// robustness model does, and later answers filter the branches. Every
// other op is deterministic, so the state set almost always has one
// member and the power-set construction costs a slice per step.
func (c *checker) porcupineModel(parts [][]int) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{newStore()} },
		Step: func(state, in, _ any) []any {
			next, _ := c.step(state.(*store), in.(*input))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal:                     func(a, b any) bool { return storeEqual(a.(*store), b.(*store)) },
		Hash:                      func(s any) uint64 { return s.(*store).hash },
		DescribeOperation:         func(in, _ any) string { return describeOp(in.(*input)) },
		DescribeState:             func(s any) string { return describeStore(s.(*store)) },
		DescribeOperationMetadata: func(m any) string { return describeMeta(m.(*input)) },
	}
	if len(parts) > 1 {
		nm.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
			out := make([][]porcupine.Operation, len(parts))
			for p, ids := range parts {
				for _, id := range ids {
					out[p] = append(out[p], h[id])
				}
			}
			return out
		}
	}
	return nm.ToModel()
}

// failedParts lists the partitions without a complete linearization.
func failedParts(parts [][]int, info porcupine.LinearizationInfo) []int {
	var out []int
	lins := info.PartialLinearizations()
	for p := range parts {
		if p >= len(lins) || len(longest(lins[p])) < len(parts[p]) {
			out = append(out, p)
		}
	}
	return out
}

func longest(lins [][]int) []int {
	var best []int
	for _, l := range lins {
		if len(l) > len(best) {
			best = l
		}
	}
	return best
}

// replay steps the states through a partition's linearization (indices
// into part) and returns the surviving states.
func (c *checker) replay(part, lin []int) []*store {
	states := []*store{newStore()}
	for _, local := range lin {
		var next []*store
		for _, s := range states {
			n, _ := c.step(s, c.ins[part[local]])
			next = append(next, n...)
		}
		states = next
	}
	return states
}

// replayKnown returns the Known findings of a complete linearization: those
// of the surviving branch with the fewest.
func (c *checker) replayKnown(part, lin []int) []Known {
	var best []Known
	for i, s := range c.replay(part, lin) {
		var ks []Known
		for f := s.found; f != nil; f = f.next {
			ks = append(ks, f.k)
		}
		if i == 0 || len(ks) < len(best) {
			best = ks
		}
	}
	return best
}

// explain names the op an illegal partition cannot linearize: of the ops
// left out of its longest legal prefix, the first to return whose step
// fails on every state the prefix can reach. When other prefixes as long
// fail at another op (two writes that cannot both be placed, as a
// DELETE and a write it should have seen), the summary names those too:
// which of them is at fault is the reader's call.
func (c *checker) explain(res Result, parts [][]int, failed []int) Result {
	lins := res.Info.PartialLinearizations()
	for _, p := range failed {
		prefix := longest(lins[p])
		if len(prefix) == len(parts[p]) {
			continue
		}
		culprit, why := c.culprit(parts[p], prefix)
		res.Culprit = culprit
		res.Summary = fmt.Sprintf("Illegal: op %d (%s, %s) cannot be linearized after the %d operations of its partition that can: %s.",
			culprit, c.ops[culprit].String(), interval(&c.ops[culprit]), len(prefix), withProperty(why))
		named := []int{culprit}
		for _, other := range lins[p] {
			if len(other) != len(prefix) || len(named) > 2 {
				continue
			}
			alt, altWhy := c.culprit(parts[p], other)
			if slices.Contains(named, alt) {
				continue
			}
			named = append(named, alt)
			res.Summary += fmt.Sprintf(" Another order of as many operations fails at op %d (%s, %s): %s.",
				alt, c.ops[alt].String(), interval(&c.ops[alt]), withProperty(altWhy))
		}
		if len(failed) > 1 {
			res.Summary += fmt.Sprintf(" %d other partitions of the history are illegal too.", len(failed)-1)
		}
		return res
	}
	res.Summary = "Illegal."
	return res
}

// culprit returns the op of part left out of prefix (indices into part)
// that cannot follow it, and why: the first to return whose step fails
// on every state the prefix reaches.
func (c *checker) culprit(part, prefix []int) (int, string) {
	states := c.replay(part, prefix)
	var rest []int
	for local, id := range part {
		if !slices.Contains(prefix, local) {
			rest = append(rest, id)
		}
	}
	slices.SortFunc(rest, func(a, b int) int {
		ra, rb := c.ins[a].ret, c.ins[b].ret
		switch {
		case ra != rb && ra < rb:
			return -1
		case ra != rb:
			return 1
		}
		return a - b
	})
candidates:
	for _, id := range rest {
		reason := ""
		for _, s := range states {
			next, w := c.step(s, c.ins[id])
			if len(next) > 0 {
				continue candidates
			}
			reason = w
		}
		return id, reason
	}
	return rest[0], "real-time order leaves it no legal place"
}

// withProperty tags an answer's failure with PropAPISemantics; rule
// violations name their property already.
func withProperty(why string) string {
	if strings.HasSuffix(why, "]") || strings.HasSuffix(why, ")") && strings.Contains(why, "] (") {
		return why
	}
	return why + " [" + PropAPISemantics + "]"
}

// interval renders an op's interval in UTC wall-clock time, to the
// microsecond (the audit log's precision).
func interval(op *history.Op) string {
	at := func(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000000") }
	if op.Ambiguous() {
		return "called at " + at(op.Call) + ", maybe applied"
	}
	return "[" + at(op.Call) + ", " + at(op.Return) + "]"
}

// static adds the checks no state carries: every successful create
// yields a UID no other create yielded and no op returned before the
// create was sent. A violation turns an Ok verdict Illegal.
func (c *checker) static(res Result) Result {
	firstSeen := map[string]int{} // uid -> op that returned it first
	createdBy := map[string]int{}
	for i := range c.ops {
		op := &c.ops[i]
		if op.Got == nil || op.Got.UID == "" {
			continue
		}
		u := op.Got.UID
		if f, ok := firstSeen[u]; !ok || c.ins[i].ret < c.ins[f].ret {
			firstSeen[u] = i
		}
		if op.Verb == history.Create && op.OK() {
			if prev, dup := createdBy[u]; dup {
				res.Verdict, res.Culprit = porcupine.Illegal, i
				res.Summary = fmt.Sprintf("Illegal: op %d (%s) and op %d (%s) both created uid %s [%s].",
					prev, c.ops[prev].String(), i, op.String(), u, PropAPISemantics)
				return res
			}
			createdBy[u] = i
		}
	}
	for u, i := range createdBy {
		if f := firstSeen[u]; f != i && c.ins[f].ret < c.ops[i].Call {
			res.Verdict, res.Culprit = porcupine.Illegal, i
			res.Summary = fmt.Sprintf("Illegal: op %d (%s) created uid %s, which op %d (%s) had returned before the create was sent: a create yields a fresh UID [%s].",
				i, c.ops[i].String(), u, f, c.ops[f].String(), PropAPISemantics)
			return res
		}
	}
	switch {
	case len(res.Known) > 0:
		var issues []string
		for _, k := range res.Known {
			issues = append(issues, k.Issue)
		}
		slices.Sort(issues)
		res.Summary = fmt.Sprintf("Ok: %d operations are linearizable, but only through %d known upstream race(s) (%s); the first: %s.",
			len(c.ops), len(res.Known), strings.Join(slices.Compact(issues), ", "), res.Known[0])
	default:
		res.Summary = fmt.Sprintf("Ok: %d operations are linearizable and every GC and controller write was legal where it took effect.", len(c.ops))
	}
	return res
}
