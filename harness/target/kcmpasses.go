package target

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/model"
)

// kcmPasses tells, on upstream-stepped, which of the GC's held GETs of
// an object is the first GET of a pass of that object's work item and
// which is another worker's GET of it (an owner lookup, isDangling; a
// removeFinalizer or deleteObject GET): the requests are the same at
// the proxy. kube-controller-manager's log says when each pass began:
// attemptToDeleteItem logs, at --v=2 and before its first request,
//
//	"Processing item" logger="garbage-collector-controller" item="[v1/ConfigMap, namespace: ns, name: a, uid: …]" virtual=false
//
// and at level 5 (--vmodule=garbagecollector=5) a pass that sends no
// GET says so: "processing item returned at once, because its
// DeletionTimestamp is non-nil" (a node being deleted without
// foreground) or "error syncing item" (its kind has no REST mapping);
// one of a namespaced kind without a namespace ends without a line
// (namespacedOwnerOfClusterScopedObjectErr). A GET of an object is a
// pass's first GET when a pass of it began before the proxy received
// the GET and has had no GET yet; the GETs are matched with the passes
// in the order they came. The line is written before the pass's GET is
// sent, so reading the log when a GET is classified sees its pass. One
// ambiguity stays: another worker's GET of the object received between
// a pass's line and the pass's own GET (microseconds apart) is taken for
// the pass's, and the pass's for the other's.
type kcmPasses struct {
	log *kcmLog
	mu  sync.Mutex
	// since: lines from before are left out (Reset)
	since  time.Time
	passes map[object][]*pass
	// gets are the GC's GETs in scope not yet classified, by ID: in the
	// order the proxy received them (Arrived)
	gets []proxy.Request
	// first is, by GET ID, the pass the GET began (nil: another
	// worker's GET)
	first map[int64]*pass
}

// pass is one attemptToDeleteItem pass that sends a GET of its item.
type pass struct {
	uid string
	// ns is the namespace the item's identity names, as the log writes
	// it: for a cluster-scoped kind the one a virtual node borrowed from
	// its dependent, which the GET leaves out. A stale virtual node's
	// pass and its observed node's, of one UID, GET the same object and
	// differ only here (sameItem).
	ns      string
	began   time.Time
	ended   time.Time // the pass ended without a GET (zero: not seen to)
	matched bool
	// ambiguous: a pass of another item of the same key had begun too
	// when a GET matched with one of them came, so the GET may be
	// either's (Ambiguous)
	ambiguous bool
}

func newKCMPasses(log *kcmLog) *kcmPasses {
	k := &kcmPasses{log: log, passes: map[object][]*pass{}, first: map[int64]*pass{}}
	log.parse(k.line)
	return k
}

var (
	kcmProcessing = regexp.MustCompile(`"Processing item" .*\bitem="\[(\S+)/([^/,\s]+), namespace: ([^,]*), name: ([^,]*), uid: ([^\]]*)\]"`)
	kcmNoGET      = regexp.MustCompile(`"(?:processing item returned at once, because its DeletionTimestamp is non-nil|error syncing item)" .*\bitem="\[(\S+)/([^/,\s]+), namespace: ([^,]*), name: ([^,]*), uid: ([^\]]*)\]"`)
)

// Reset forgets every pass and GET: those of a settle, when nothing was
// held, have been answered.
func (k *kcmPasses) Reset() {
	k.log.read()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.since = time.Now()
	clear(k.passes)
	clear(k.first)
	k.gets = nil
}

// Arrived records a GC request the proxy received while holding, in
// scope (proxy.Stepper.SetArrivals); the GETs among them are classified
// in that order.
func (k *kcmPasses) Arrived(r proxy.Request) {
	if r.Verb != proxy.VerbGet {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// in the order the proxy received them: Admit runs for each in a
	// goroutine of its own
	i, _ := slices.BinarySearchFunc(k.gets, r.ID, func(g proxy.Request, id int64) int { return cmp.Compare(g.ID, id) })
	k.gets = slices.Insert(k.gets, i, r)
}

// First reports whether r, a GC GET, is the first GET of a pass of its
// object's work item.
func (k *kcmPasses) First(r proxy.Request) bool {
	return k.Item(r) != ""
}

// Item is the UID of the work item whose pass r, a GC GET, is the first
// GET of, as the log names it ("" when r is another worker's GET). Two
// items of one key (a virtual node of an object's coordinates with
// another UID, taken by an idle worker before the graph replaced it
// with the observed object elsewhere, and that object's own item) send
// the same GET; the UID tells their passes apart.
func (k *kcmPasses) Item(r proxy.Request) string {
	uid, _ := k.Identity(r)
	return uid
}

// Identity is the UID and the identity's namespace of the work item
// whose pass r is the first GET of (uid "" when r is another worker's
// GET). Two items of one UID send the same GET when a virtual node of a
// cluster-scoped kind, in a borrowed namespace, was taken by an idle
// worker before the graph replaced it with the observed object (the
// stale *node the worker holds), and the observed node is queued too:
// the namespace tells their passes apart.
func (k *kcmPasses) Identity(r proxy.Request) (uid, ns string) {
	if p := k.pass(r); p != nil {
		return cmp.Or(p.uid, "?"), p.ns
	}
	return "", ""
}

// Ambiguous reports whether r, the first GET of a pass, may be the
// first GET of a pass of another item of its key: the two passes had
// both begun when the first of their GETs came (their workers took two
// items of one key at once: two virtual owners of the same coordinates
// named by one dependent with different UIDs), and the log, written
// before each GET is sent, cannot say which worker sent which.
func (k *kcmPasses) Ambiguous(r proxy.Request) bool {
	p := k.pass(r)
	return p != nil && p.ambiguous
}

// pass is the pass whose first GET r is (nil: another worker's GET).
func (k *kcmPasses) pass(r proxy.Request) *pass {
	if r.Verb != proxy.VerbGet {
		return nil
	}
	k.log.read()
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.first[r.ID]; ok {
		return p
	}
	for len(k.gets) > 0 && k.gets[0].ID <= r.ID {
		g := k.gets[0]
		k.gets = k.gets[1:]
		k.first[g.ID] = k.match(g)
	}
	return k.first[r.ID]
}

// match pairs g with the earliest pass of its object that began before
// g came, has not ended without a GET before, and has no GET yet, and
// returns it (nil: none). When passes of other items of the object are
// such candidates too, all of them are ambiguous.
func (k *kcmPasses) match(g proxy.Request) *pass {
	o := object{group: g.Group, resource: g.Resource, ns: g.Namespace, name: g.Name}
	var candidates []*pass
	for _, p := range k.passes[o] {
		if p.matched || !p.began.Before(g.Received) || (!p.ended.IsZero() && p.ended.Before(g.Received)) {
			continue
		}
		candidates = append(candidates, p)
	}
	if len(candidates) == 0 {
		return nil
	}
	if slices.ContainsFunc(candidates, func(p *pass) bool { return !p.sameItem(candidates[0]) }) {
		for _, p := range candidates {
			p.ambiguous = true
		}
	}
	candidates[0].matched = true
	return candidates[0]
}

func (k *kcmPasses) line(s string) {
	at, ok := klogStamp(s)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if at.Before(k.since) {
		return
	}
	if m := kcmProcessing.FindStringSubmatch(s); m != nil {
		if o, ok := passObject(m[1], m[2], m[3], m[4]); ok {
			k.passes[o] = append(k.passes[o], &pass{uid: m[5], ns: strings.TrimSpace(m[3]), began: at})
		}
		return
	}
	if m := kcmNoGET.FindStringSubmatch(s); m != nil {
		o, ok := passObject(m[1], m[2], m[3], m[4])
		if !ok {
			return
		}
		// the pass of that item that began last before the line
		ps := k.passes[o]
		for i := len(ps) - 1; i >= 0; i-- {
			if ps[i].uid == m[5] && !ps[i].began.After(at) {
				if !ps[i].matched {
					ps[i].ended = at
				}
				break
			}
		}
	}
}

// sameItem reports whether p and q are passes of one work item: one UID
// and one identity.
func (p *pass) sameItem(q *pass) bool { return p.uid == q.uid && p.ns == q.ns }

// passObject is the object a pass of the item (apiVersion, kind,
// namespace, name) GETs first (getObject): a cluster-scoped kind's
// without the namespace a virtual node borrowed from its dependent. ok
// is false when the pass sends no GET: its kind is none the model
// serves (no REST mapping), or it is namespaced and the item has no
// namespace.
func passObject(apiVersion, kind, ns, name string) (object, bool) {
	k, ok := model.KindByName(kind)
	if !ok {
		return object{}, false
	}
	info := k.Info()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return object{}, false
	}
	if !info.Namespaced {
		ns = ""
	} else if ns == "" {
		return object{}, false
	}
	return object{group: gv.Group, resource: info.Resource, ns: strings.TrimSpace(ns), name: name}, true
}
