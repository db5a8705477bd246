package lin

import (
	"fmt"
	"math"
	"slices"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// The GC's own races on its graph: rules.go's GC rules hold a write to
// the state it lands on; these classify the writes upstream's GC makes
// from a graph that is behind the store or that holds a node under
// coordinates a dependent gave it.

// model.KnownVirtualNamespace names a GC write through a cluster-scoped
// object's reference to a namespaced owner kind, made while the GC held
// the object as a virtual node that carries the namespace of the
// dependent it was made from (GraphBuilder.addDependentToOwners gives
// every virtual node its dependent's namespace, kubernetes#124378).
// attemptToDeleteItem runs a virtual node's item with those coordinates:
// its GET finds the cluster-scoped object, and isDangling looks the
// object's own owners up in the borrowed namespace instead of failing
// with namespacedOwnerOfClusterScopedObjectErr. Once the object's own
// event arrives the node takes its observed identity, so the window is
// the GC's informer lag after the object was created.

// borrowedNamespace marks v, a GC write through reference i of cur's
// object that is unresolvable from it, as model.KnownVirtualNamespace when the
// object is cluster-scoped and was created within the race window before
// the write (its reference may have come later: the worker's GET answers
// the object as it is), and a live object in a namespace N
// references it, where the reference's owner is not solid: a GC that
// had not yet observed the object held it as a virtual node in N, and
// in N the reference is dangling or waiting, as attemptToDeleteItem
// needs to delete or unreference. With the proxy's delivery record
// (Options.Deliveries) the window is not consulted: the GC held a
// virtual node only if no event of the object had been handed to its
// informers by the time it decided (gcDecidedBy: its GET of the object);
// with an in-process GC's recorded graph changes, only if its graph had
// applied no event of the object by then.
func (c *checker) borrowedNamespace(s *store, cur *entry, i int, in *input, v *violation) {
	d := cur.obj
	if !c.lenient || d.Namespace != "" {
		return
	}
	basis := basisWindow
	switch {
	case c.graphEvidence():
		if c.hadVersion(d.UID, 0, c.gcDecidedBy(in.key, d.UID, in)) {
			v.message += c.byEvidence("; the proxy's delivery record shows the object's event had been handed to the GC's informers before it decided, so it held no virtual node",
				"; the GC's recorded graph changes show its graph had the object before it decided, so it held no virtual node")
			return
		}
		basis = c.graphEvidenceBasis()
	case !c.racy(c.createOf(d.UID), in):
		return
	}
	r := &d.Owners[i]
	s.each(func(e *entry) bool {
		if !e.known() || e.obj.Namespace == "" {
			return true
		}
		if _, refers := findRef(e.obj.Owners, d.UID); !refers {
			return true
		}
		virtual := *d
		virtual.Namespace = e.obj.Namespace
		if st, _ := resolve(s, &virtual, r); st == refSolid || st == refUnresolvable {
			return true
		}
		v.known, v.basis = model.Excuse(model.KnownVirtualNamespace), basis
		v.message += fmt.Sprintf("; the GC held it as a virtual node in namespace %s, made from %s, and looked the owner up there", e.obj.Namespace, e.key)
		return false
	})
}

// unblockedFromGraph marks v, a GC write that added reference r to d, as
// model.KnownStaleGraph when r is non-blocking and d carried a reference to
// r's UID, otherwise the same, within the race window before: the
// cycle-breaking unblock patch (unblockOwnerReferencesStrategicMergePatch)
// lists the graph's references to blocking owners, made non-blocking, and
// a strategic merge by UID adds back one that a write removed after the
// graph's version (found by a bug-free cascade fuzz --target impl
// --informer-lag run: attemptToOrphan removed the reference, and the
// unblock patch 5 ms later put it back). With the proxy's delivery
// record (Options.Deliveries) the window is not consulted: the graph
// listed the reference only if no event of a version without it had
// been handed to the GC's informers before the patch was sent; with an
// in-process GC's recorded graph changes, only if its graph had not
// applied such a version by then.
func (c *checker) unblockedFromGraph(d *history.Object, r history.Ref, in *input, v *violation) {
	if !c.lenient || r.Block {
		return
	}
	carries := func(o *history.Object) bool {
		return slices.ContainsFunc(o.Owners, func(old history.Ref) bool {
			return old.UID == r.UID && old.Kind == r.Kind && old.Name == r.Name && old.APIVersion == r.APIVersion && old.Controller == r.Controller
		})
	}
	if c.graphEvidence() {
		m := c.lastVersion(d.UID, in, carries)
		if m < 0 {
			return
		}
		// the first version after m's without the reference: the
		// removal the graph had to see
		need := d.RV
		for i := range c.ops {
			if got := c.ops[i].Got; got != nil && got.UID == d.UID && got.RV > c.ops[m].Got.RV && got.RV < need && !carries(got) {
				need = got.RV
			}
		}
		if need == 0 || c.hadVersion(d.UID, need, c.gcSent(in)) {
			v.message += c.byEvidence("; the proxy's delivery record shows the version without it had been handed to the GC's informers before the patch",
				"; the GC's recorded graph changes show its graph had the version without it before the patch")
			return
		}
		v.known, v.basis = model.Excuse(model.KnownStaleGraph), c.graphEvidenceBasis()
		v.message += fmt.Sprintf(c.byEvidence(
			"; op %d answered the object with it, and no event of a later version without it had been handed to the GC's informers before the unblock patch, which lists the graph's references (the proxy's delivery record)",
			"; op %d answered the object with it, and the GC's graph had applied no later version without it before the unblock patch, which lists the graph's references (its recorded graph changes)"), m)
		return
	}
	if m := c.recentVersion(d.UID, in, carries); m >= 0 {
		v.known, v.basis = model.Excuse(model.KnownStaleGraph), basisWindow
		v.message += fmt.Sprintf("; op %d answered the object with it within the race window before, and the unblock patch lists the graph's references", m)
	}
}

// createOf is the create that made the object uid, noMark if the history
// does not hold it.
func (c *checker) createOf(uid string) mark {
	for i := range c.ops {
		if op := &c.ops[i]; op.Verb == history.Create && op.Got != nil && op.Got.UID == uid {
			return mark(i)
		}
	}
	return noMark
}

// model.KnownStaleGraph names a GC decision made on a graph behind the store:
// attemptToDeleteItem reads an item's dependents, and whether they are
// deleting their dependents, from the graph, which learns of a write only
// when the informer's event arrives.

// cycleUnblocked: a GC DELETE with Foreground of an object not yet being
// deleted (attemptToDeleteItem's waiting arm) while the object still
// has a blocking ownerReference and a dependent of it (an object with a
// reference to its UID, which the graph links whatever the namespace) is
// deleting with foregroundDeletion. attemptToDeleteItem sends the
// unblock patch first in that case, so the reference would be
// non-blocking. Known as model.KnownStaleGraph when the dependent's
// foregroundDeletion or its reference, or the object's blocking
// reference, was written within the race window before the DELETE: the
// graph may not have had it. Not known, though, when the GC's recorded
// graph changes (Options.GraphChanges, an in-process GC) show the graph
// had all three before the worker read it (graphReadAfter): on impl the
// worker that deletes into a cycle is the one the dependent's own
// foreground transition queued, so a stale graph can almost never excuse
// it, and only this evidence lets a fuzz run tell the bug from the race.
func (c *checker) cycleUnblocked(s *store, cur *entry, in *input) *violation {
	d := cur.obj
	if d.Deleting || in.op.Delete == nil || in.op.Delete.Propagation != "Foreground" {
		return nil
	}
	block := -1
	for i := range d.Owners {
		if d.Owners[i].Block {
			block = i
			break
		}
	}
	if block < 0 {
		return nil
	}
	var v *violation
	read := int64(-1) // graphReadAfter, once needed
	s.each(func(e *entry) bool {
		if e == cur || !e.known() || !waiting(e.obj) {
			return true
		}
		j := slices.IndexFunc(e.obj.Owners, func(r history.Ref) bool { return r.UID == d.UID })
		if j < 0 {
			return true
		}
		w := &violation{PropCycleUnblocked, fmt.Sprintf("gc deleted %s in the foreground with its reference to %s still blocking, while its dependent %s was deleting its dependents",
			in.key, d.Owners[block].Name, e.key), "", ""}
		switch {
		case !c.lenient || e.prov == nil || cur.prov == nil || block >= len(cur.prov.refs) || j >= len(e.prov.refs):
		case c.deliveries:
			// the worker reads the graph after its GETs and before the
			// DELETE: excused only if, when the DELETE was sent, no
			// event carrying one of the three had been handed on yet
			if sent := c.gcSent(in); c.deliveredAll(e.obj.UID, sent, e.prov.fg, e.prov.refs[j].by) && c.deliveredAll(d.UID, sent, cur.prov.refs[block].by) {
				w.message += "; the proxy's delivery record shows the GC's informers had been handed all three before the DELETE"
			} else {
				w.known, w.basis = model.Excuse(model.KnownStaleGraph), basisDeliveries
				w.message += "; the GC's informers had not been handed every one of them when it sent the DELETE (the proxy's delivery record)"
			}
		case c.racy(e.prov.fg, in) || c.racy(e.prov.refs[j].by, in) || c.racy(cur.prov.refs[block].by, in):
			if read < 0 {
				read = c.graphReadAfter(s, cur, in)
			}
			if read != 0 &&
				c.graphHad(e.obj.UID, read, e.prov.fg, e.prov.refs[j].by) && c.graphHad(d.UID, read, cur.prov.refs[block].by) {
				w.message += "; the GC's graph had both before the worker read it (its recorded graph changes)"
			} else {
				w.known, w.basis = model.Excuse(model.KnownStaleGraph), basisWindow
				if read != 0 {
					w.basis = basisGraph
				}
				w.message += "; the GC's graph may not have had it yet"
			}
		}
		if v == nil || v.known != "" && w.known == "" {
			v = w
		}
		return v.known != ""
	})
	return v
}

// graphReadAfter bounds from below when the GC worker whose write is in
// read its graph, for attemptToDeleteItem's waiting arm on cur's object:
// the worker reads the item's dependents from the graph after
// classifyReferences' GET of each owner (isDangling), and the arm needs an
// owner that answered deleting with foregroundDeletion. So the read came
// after the earliest GC GET, sent before in, that answered one of the
// object's owners (by UID) so; the bound is that GET's Call. 0 when the
// GC's GETs do not show one (not recorded, or none).
func (c *checker) graphReadAfter(s *store, cur *entry, in *input) int64 {
	if len(c.graph) == 0 {
		return 0
	}
	var bound int64
	for i := range cur.obj.Owners {
		r := &cur.obj.Owners[i]
		k, ok := ownerKey(cur.obj, r)
		if !ok {
			continue
		}
		for j := range c.reads[k] {
			g := &c.reads[k][j]
			if g.Actor != history.ActorGC || g.Return >= in.op.Call || g.Got == nil || g.Got.UID != r.UID ||
				!waiting(g.Got) {
				continue
			}
			if bound == 0 || g.Call < bound {
				bound = g.Call
			}
		}
	}
	return bound
}

// graphHad reports whether the GC's recorded graph changes show it had
// applied, before the instant read, a version of the object uid at least
// as new as each of the writes ms (history.GraphChange): a worker reading
// the graph then saw what those writes wrote, since every version
// between them and the state the judged write lands on carries it. A
// write whose answer is unknown proves nothing; a fact without a write in
// the history (noMark) is taken as in the graph, as the race window
// takes it.
func (c *checker) graphHad(uid string, read int64, ms ...mark) bool {
	var need uint64
	for _, m := range ms {
		if m < 0 {
			continue
		}
		got := c.ops[m].Got
		if got == nil || got.UID != uid || got.RV == 0 {
			return false
		}
		need = max(need, got.RV)
	}
	return c.graphApplied(uid, need, read)
}

// graphApplied reports whether the GC's recorded graph changes show its
// graph held a version of the object uid at least need before the
// instant read: applied before read, and after the last reset before
// read (a restarted GC's graph begins empty).
func (c *checker) graphApplied(uid string, need uint64, read int64) bool {
	since := c.resetBefore(read)
	for _, g := range c.graph[uid] {
		if g.At >= read {
			break
		}
		if g.At >= since && !g.Deleted && g.RV >= need {
			return true
		}
	}
	return false
}

// deliveredAll reports whether the delivery record shows events of the
// object uid carrying each of the writes ms handed to the GC's informers
// before t. A write whose version the history does not show counts as
// not delivered (it proves nothing); a fact without a write in the
// history (noMark) as delivered, as graphHad takes it.
func (c *checker) deliveredAll(uid string, t int64, ms ...mark) bool {
	for _, m := range ms {
		if m < 0 {
			continue
		}
		if seen, known := c.seenWrite(uid, m, t); !known || !seen {
			return false
		}
	}
	return true
}

// lastVersion is the last op, returned before in was sent, that answered
// the object uid in a version for which is holds; noMark if none
// (recentVersion without the window).
func (c *checker) lastVersion(uid string, in *input, is func(*history.Object) bool) mark {
	m := noMark
	for i := range c.ops {
		got := c.ops[i].Got
		if got == nil || got.UID != uid || got.RV == 0 || c.ins[i].ret >= in.op.Call || !is(got) {
			continue
		}
		if m < 0 || c.ins[i].ret > c.ins[m].ret {
			m = mark(i)
		}
	}
	return m
}

// graphByUID indexes graph changes by UID, each UID's in order; resets
// are left out (graphResets).
func graphByUID(changes []history.GraphChange) map[string][]history.GraphChange {
	m := byUID(changes, func(g history.GraphChange) (string, int64) { return g.UID, g.At })
	delete(m, "")
	return m
}

// resetBefore is the last reset of the GC's graph before the instant t
// (the minimum instant when none): the graph a worker read at t holds
// only the changes since.
func (c *checker) resetBefore(t int64) int64 {
	since := int64(math.MinInt64)
	for _, r := range c.resets {
		if r < t {
			since = r
		}
	}
	return since
}

// graphResets are the instants of the resets among changes, in order.
func graphResets(changes []history.GraphChange) []int64 {
	var out []int64
	for _, g := range changes {
		if g.Reset {
			out = append(out, g.At)
		}
	}
	slices.Sort(out)
	return out
}
