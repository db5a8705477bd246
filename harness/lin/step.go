package lin

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// input is a porcupine Operation's Input: one op of the history with what
// the step needs precomputed. The Output is unused (nil): the op carries
// its own outcome.
type input struct {
	id      int
	op      *history.Op
	key     history.Key
	kh      uint64
	gotHash uint64
	ret     int64 // Return, unbounded for ambiguous ops
	// rev is the revision the op certainly wrote (writtenRevision), 0
	// when unknown; prevRev the largest revision below it that another op
	// of its partition certainly wrote (chainRevisions).
	rev, prevRev uint64
}

// checker holds one check's history and mode.
type checker struct {
	ops    []history.Op
	ins    []*input
	window int64
	// protection: the deletion-protection webhook runs (Options.Protection).
	protection bool
	// sem is the API server's semantics the answers are judged by
	// (Options.Semantics).
	sem model.Semantics
	// lenient: a rule broken in a way a documented upstream race explains
	// is a Known finding, not an illegal step. Entries then carry
	// provenance, which strict mode leaves out so that more states merge.
	lenient bool
	// collect: attach Known findings to the states (replays only).
	collect bool
	// reads are the controllers' GETs by key; readsRecorded says they are
	// all of them (Options.ReadsRecorded).
	reads         map[history.Key][]history.Read
	readsRecorded bool
	// graph are the GC's applied graph events by UID, in order
	// (Options.GraphChanges); resets are the instants a GC started with
	// an empty graph (GraphChange.Reset), in order.
	graph  map[string][]history.GraphChange
	resets []int64
	// delivered are the watch events handed to the GC's informers by
	// UID, in order (Options.Deliveries); deliveries says the proxy
	// recorded them, so that the race window is not consulted where they
	// decide.
	delivered  map[string][]history.Delivery
	deliveries bool
	// applied are the events kube-controller-manager's graph builder
	// began to apply, by UID, paired with their deliveries
	// (Options.GraphLog, appliedByUID).
	applied map[string][]applied
	// requests are the GC's requests the proxy recorded, by key
	// (Options.GCRequests).
	requests map[history.Key][]history.GCRequest
	// release is Options.Release.
	release model.Release
}

// outcome is one possible effect of an op on its key.
type outcome struct {
	e       *entry // the key's entry afterwards; nil: absent
	changed bool   // false: the state stays as it was
	applied bool   // the op took effect, so the GC and controller rules judge it
	// v is a rule the answer breaks, which only a known race (v.known,
	// lenient mode) lets stand.
	v *violation
}

var unchanged = outcome{}

// step returns the states s may move to by op in, or none and why not.
func (c *checker) step(s *store, in *input) ([]*store, string) {
	cur := s.get(in.key, in.kh)
	outs, why := c.api(s, cur, in)
	if len(outs) == 0 {
		return nil, why
	}
	var next []*store
outcomes:
	for _, o := range outs {
		t := s
		switch {
		case o.changed && o.e == nil && cur != nil:
			var rv uint64
			if g := in.op.Got; g != nil && g.UID == cur.obj.UID {
				rv = g.RV
			}
			t = s.with(in.key, in.kh, newTombstone(cur, in.kh, rv, in.ret))
		case o.changed:
			t = s.with(in.key, in.kh, o.e)
		}
		var vs []*violation
		if o.v != nil {
			vs = append(vs, o.v)
		}
		if o.applied {
			if v := c.rules(s, cur, o.e, in); v != nil {
				vs = append(vs, v)
			}
		}
		for _, v := range vs {
			c.admit(v)
			if !(c.lenient && v.known != "") {
				why = v.String()
				continue outcomes
			}
		}
		for _, v := range vs {
			if c.collect {
				if t == s {
					cp := *s
					t = &cp
				}
				t.found = &finding{k: Known{Issue: v.known, Property: v.property, Op: in.id, Message: v.message, Basis: v.basis}, next: t.found}
			}
		}
		next = append(next, t)
	}
	if len(next) == 0 {
		return nil, why
	}
	if in.rev != 0 {
		// etcd numbers its writes in the order it applies them
		switch {
		case s.lastRev > in.prevRev:
			return nil, fmt.Sprintf("it wrote rv %d after rv %d was written (etcd numbers writes in order)", in.rev, s.lastRev)
		case s.lastRev < in.prevRev:
			return nil, fmt.Sprintf("it wrote rv %d before rv %d was written (etcd numbers writes in order)", in.rev, in.prevRev)
		}
		for i, t := range next {
			if t == s {
				cp := *s
				t = &cp
			}
			t.lastRev = in.rev
			next[i] = t
		}
	}
	return next, ""
}

// chainRevisions links the ops of each partition that certainly wrote a
// revision (input.rev) in revision order: each must be linearized right
// after the one before it in that order (input.prevRev), for every op is
// linearized and etcd applied them in that order. The search then never
// goes down an order that leaves a write of a smaller revision behind,
// which it would otherwise find hopeless only once that write's Return
// came, after trying every subset of the writes in between. A revision
// two ops claim is no evidence of order, and neither op keeps it.
func (c *checker) chainRevisions(parts [][]int) {
	claims := map[uint64]int{}
	for _, in := range c.ins {
		if in.rev != 0 {
			claims[in.rev]++
		}
	}
	for _, part := range parts {
		var chain []*input
		for _, id := range part {
			if in := c.ins[id]; in.rev != 0 && claims[in.rev] == 1 {
				chain = append(chain, in)
			} else {
				in.rev = 0
			}
		}
		slices.SortFunc(chain, func(a, b *input) int { return cmp.Compare(a.rev, b.rev) })
		for i, in := range chain {
			if i > 0 {
				in.prevRev = chain[i-1].rev
			}
		}
	}
}

// writtenRevision is the revision op certainly wrote, 0 when unknown:
// an Observed op's (a watch event shows the revision its write made,
// a DELETED event the deletion's), a successful create's, or that of a
// successful write checked against a resourceVersion precondition that
// answered a later one (had it changed nothing, it would have answered
// the version it was checked against). Other answers may be no-ops that
// show a revision another actor wrote earlier.
func writtenRevision(op *history.Op) uint64 {
	if !op.OK() || op.Got == nil || op.Got.RV == 0 {
		return 0
	}
	switch {
	case op.Verb == history.Observed, op.Verb == history.Create:
		return op.Got.RV
	case op.Removed:
		return 0
	}
	if p := preconditionsOf(op); p.rvSet && op.Got.RV > p.rv {
		return op.Got.RV
	}
	return 0
}

// entryFor builds the entry a write leaves: obj (hash h) with provenance
// carried over from cur where the facts did not change.
func (c *checker) entryFor(s *store, cur *entry, in *input, obj *history.Object, h uint64, flags uint8) *entry {
	var p *prov
	if c.lenient {
		p = c.provFor(s, cur, in, obj)
	}
	return newEntry(in.key, in.kh, obj, h, flags, p)
}

func (c *checker) provFor(s *store, cur *entry, in *input, obj *history.Object) *prov {
	now := mark(in.id)
	var old *history.Object
	var op *prov
	if cur != nil && cur.known() && cur.obj.UID == obj.UID && cur.prov != nil {
		old, op = cur.obj, cur.prov
	}
	p := &prov{delStart: noMark, orphan: noMark, orphanGone: noMark, fg: noMark, fgGone: noMark, dressed: noMark}
	p.refs = make([]refProv, len(obj.Owners))
	for i := range obj.Owners {
		r := &obj.Owners[i]
		p.refs[i] = refProv{by: now, late: lateness(s, obj, r)}
		if old != nil {
			for j, q := range old.Owners {
				if q == *r {
					p.refs[i] = op.refs[j]
				}
			}
		}
	}
	if obj.Deleting {
		p.delStart = now
		if old != nil && old.Deleting {
			p.delStart, p.fgSeen = op.delStart, op.fgSeen
		}
	}
	carry := func(f string, m mark) mark {
		if !obj.HasFinalizer(f) {
			return noMark
		}
		if old != nil && old.HasFinalizer(f) && old.Deleting == obj.Deleting {
			return m
		}
		return now
	}
	// gone: the write that took f off a deletion still going on, this one
	// when the previous version had f, else the one that version carried
	gone := func(f string, m mark) mark {
		switch {
		case !obj.Deleting || obj.HasFinalizer(f) || old == nil || !old.Deleting:
			return noMark
		case old.HasFinalizer(f):
			return now
		}
		return m
	}
	was := op
	if was == nil {
		was = &prov{orphan: noMark, orphanGone: noMark, fg: noMark, fgGone: noMark}
	}
	p.orphan, p.fg = carry(model.FinalizerOrphan, was.orphan), carry(model.FinalizerForeground, was.fg)
	p.orphanGone, p.fgGone = gone(model.FinalizerOrphan, was.orphanGone), gone(model.FinalizerForeground, was.fgGone)
	if waiting(obj) {
		p.fgSeen = true
	}
	switch {
	case bare(obj):
	case old != nil && !bare(old):
		p.dressed = op.dressed
	case old != nil:
		p.dressed = now
	}
	return p
}

// bare reports an object a DELETE removes at once unless its options
// call for a GC finalizer: no finalizers, not being deleted.
func bare(o *history.Object) bool { return len(o.Finalizers) == 0 && !o.Deleting }

// lateness says what the owner reference r of obj names was doing in s,
// the state the write of r takes effect on (see refProv.late).
func lateness(s *store, obj *history.Object, r *history.Ref) uint8 {
	st, o := resolve(s, obj, r)
	if (st != refSolid && st != refWaiting) || !o.obj.Deleting {
		return 0
	}
	var late uint8
	if o.obj.HasFinalizer(model.FinalizerOrphan) {
		late |= lateOrphan
	}
	if o.obj.HasFinalizer(model.FinalizerForeground) {
		late |= lateForeground
	}
	return late
}

// vague builds an entry for an ambiguous write's applied branch: the
// object as far as it is known, with the uncertain facts flagged.
func (c *checker) vague(s *store, cur *entry, in *input, obj *history.Object, flags uint8) *entry {
	cp := *obj
	if cur != nil && flags&rvUnknown != 0 {
		cp.RV = cur.obj.RV // lower bound
	}
	return c.entryFor(s, cur, in, &cp, objHash(&cp), flags)
}

// rvAfter reports whether rv may follow the entry's resourceVersion.
func rvAfter(cur *entry, rv uint64) bool { return rv > cur.obj.RV }

// effectiveReturn is the op's Return for the checker: an ambiguous op may
// take effect any time after its Call.
func effectiveReturn(op *history.Op) int64 {
	if op.Ambiguous() {
		return math.MaxInt64
	}
	return op.Return
}

func (c *checker) api(s *store, cur *entry, in *input) ([]outcome, string) {
	switch in.op.Verb {
	case history.Create:
		return c.create(s, cur, in)
	case history.Update, history.Patch:
		return c.update(s, cur, in)
	case history.Delete:
		return c.delete(s, cur, in)
	case history.Observed:
		return c.observed(s, cur, in)
	}
	return nil, fmt.Sprintf("unknown verb %q", in.op.Verb)
}

func liveDesc(e *entry) string {
	if e.flags&uidUnknown != 0 {
		return "an object of unknown uid was live"
	}
	return "uid " + short(e.obj.UID) + " was live at rv " + strconv.FormatUint(e.obj.RV, 10)
}

func (c *checker) create(s *store, cur *entry, in *input) ([]outcome, string) {
	op := in.op
	switch {
	case op.Ambiguous():
		outs := []outcome{unchanged}
		if cur == nil {
			obj := &history.Object{Kind: in.key.Kind, Namespace: in.key.Namespace, Name: in.key.Name, Replicas: -1}
			flags := uidUnknown | rvUnknown
			if op.Sent != nil {
				cp := *op.Sent
				cp.UID, cp.RV, cp.Deleting = "", 0, false
				obj = &cp
			} else {
				flags |= contentUnknown
			}
			outs = append(outs, outcome{e: c.vague(s, nil, in, obj, flags), changed: true, applied: true})
		}
		return outs, ""
	case op.OK():
		if !model.CreateAnswers(cur != nil).Has(model.AnswerOK) {
			return nil, fmt.Sprintf("the create succeeded while %s (%s)", in.key, liveDesc(cur))
		}
		if op.Got == nil {
			obj := &history.Object{Kind: in.key.Kind, Namespace: in.key.Namespace, Name: in.key.Name, Replicas: -1}
			return []outcome{{e: c.vague(s, nil, in, obj, uidUnknown|rvUnknown|contentUnknown), changed: true, applied: true}}, ""
		}
		if op.Got.Deleting {
			return nil, "the create returned an object being deleted"
		}
		return []outcome{{e: c.entryFor(s, nil, in, op.Got, in.gotHash, 0), changed: true, applied: true}}, ""
	case op.Code == 409 && op.Reason == "AlreadyExists":
		if !model.CreateAnswers(cur != nil).Has(model.AnswerConflict) {
			return nil, fmt.Sprintf("the create answered AlreadyExists while no %s was live", in.key)
		}
	}
	return []outcome{unchanged}, ""
}

// preconditions are a write's uid and resourceVersion preconditions.
type preconditions struct {
	uid   string
	rv    uint64
	rvSet bool
	rvRaw string
}

func preconditionsOf(op *history.Op) preconditions {
	var p preconditions
	switch {
	case op.Verb == history.Delete && op.Delete != nil:
		p.uid, p.rvRaw = op.Delete.PreconditionUID, op.Delete.PreconditionRV
		if p.rvRaw != "" {
			p.rvSet = true
			p.rv, _ = strconv.ParseUint(p.rvRaw, 10, 64)
		}
	case op.Sent != nil:
		p.uid, p.rv, p.rvSet = op.Sent.UID, op.Sent.RV, op.Sent.RV != 0
	}
	return p
}

// checks is how cur meets p, as the model's predicates read it
// (model.Preconditions): Unknown where the entry's uid or
// resourceVersion is; a set precondition fails on no object (cur nil),
// as storage.Preconditions.Check does on the empty object GuaranteedUpdate
// reads.
func (p preconditions) checks(cur *entry) model.Preconditions {
	var c model.Preconditions
	if p.uid != "" {
		switch {
		case cur == nil || cur.flags&uidUnknown == 0 && cur.obj.UID != p.uid:
			c.UID = model.Fails
		case cur.flags&uidUnknown != 0:
			c.UID = model.Unknown
		default:
			c.UID = model.Holds
		}
	}
	if p.rvSet {
		switch {
		case cur == nil || cur.flags&rvUnknown == 0 && (cur.obj.RV != p.rv || strconv.FormatUint(cur.obj.RV, 10) != p.rvRaw && p.rvRaw != ""):
			c.RV = model.Fails
		case cur.flags&rvUnknown != 0:
			c.RV = model.Unknown
		default:
			c.RV = model.Holds
		}
	}
	return c
}

// failed names a precondition pre says fails, for a message.
func failed(pre model.Preconditions) string {
	if pre.UID == model.Fails {
		return "uid"
	}
	return "rv"
}
