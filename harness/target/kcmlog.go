package target

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/cascade-k8s/cascade/harness/history"
)

// logTail follows a log file that only grows (a restarted
// kube-controller-manager appends to its predecessor's): each call of
// lines hands on the complete lines written since the last call and
// keeps an unfinished last line for the next.
type logTail struct {
	path    string
	off     int64
	partial string
}

func (l *logTail) lines(fn func(string)) {
	f, err := os.Open(l.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		l.off += int64(len(line))
		if err != nil { // an unfinished last line: keep it for the next call
			l.partial += line
			return
		}
		fn(l.partial + strings.TrimSuffix(line, "\n"))
		l.partial = ""
	}
}

// kcmLog follows kube-controller-manager's log once for all that read
// it (the GC's discovery syncs, its graph builder's lines, its passes):
// each read hands the lines written since the last read, of whichever
// reader, to every parser, in log order. A parser guards its own state:
// it is called with the follower's lock held, so a reader calls read
// before it takes its own lock, never while holding it.
type kcmLog struct {
	mu      sync.Mutex
	tail    logTail
	parsers []func(string)
}

// newKCMLog follows the log at path.
func newKCMLog(path string) *kcmLog { return &kcmLog{tail: logTail{path: path}} }

// parse adds a parser; parsers added later see only the lines read
// after.
func (l *kcmLog) parse(fn func(string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parsers = append(l.parsers, fn)
}

// read hands the lines written since the last read to every parser.
func (l *kcmLog) read() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail.lines(func(s string) {
		for _, p := range l.parsers {
			p(s)
		}
	})
}

// kcmProcessed matches the line kube-controller-manager's graph builder
// logs as it begins to apply an event (processGraphChanges, at level 5:
// controlplane's --vmodule=graph_builder=5), the same in v1.31 through
// v1.37:
//
//	"GraphBuilder process object" apiVersion="v1" kind="ConfigMap" object="ns/a" uid="…" eventType="update" virtual=false
//
// eventType is graph_builder.go's eventType.String: add, update, delete.
var kcmProcessed = regexp.MustCompile(`"GraphBuilder process object" .*\buid="([^"]*)" eventType="(add|update|delete)" virtual=(true|false)`)

// kcmGraphLog follows the GC process's log for its graph builder's
// lines (history.Processed).
type kcmGraphLog struct {
	log *kcmLog
	mu  sync.Mutex
	seq int
	got []history.Processed
}

func newKCMGraphLog(log *kcmLog) *kcmGraphLog {
	g := &kcmGraphLog{log: log}
	log.parse(g.line)
	return g
}

// take returns the graph builder's lines since the last call, in log
// order, and forgets them.
func (g *kcmGraphLog) take() []history.Processed {
	g.log.read()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.got
	g.got = nil
	return out
}

func (g *kcmGraphLog) line(s string) {
	m := kcmProcessed.FindStringSubmatch(s)
	if m == nil {
		return
	}
	at, ok := klogStamp(s)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	g.got = append(g.got, history.Processed{UID: m[1], Deleted: m[2] == "delete", Virtual: m[3] == "true", Seq: g.seq, At: at.UnixNano()})
}

// TakeGraphLog returns the events the upstream target's graph builder
// began to apply since the last call, as kube-controller-manager's log
// shows them (history.Processed), and forgets them; nil on every other
// target.
func (t *Target) TakeGraphLog() []history.Processed {
	if t.kcmGraph == nil {
		return nil
	}
	return t.kcmGraph.take()
}

// kcmVirtualLine matches the graph builder's line for a virtual delete
// event (processGraphChanges; enqueueVirtualDeleteEvent queues one as a
// "delete" with virtual=true), with the event's apiVersion, kind,
// object (namespace/name, or name) and UID.
var kcmVirtualLine = regexp.MustCompile(`"GraphBuilder process object" .*\bapiVersion="([^"]*)" kind="([^"]*)" object="([^"]*)" uid="([^"]*)" eventType="delete" virtual=true`)

// virtualEvent is a virtual delete event kube-controller-manager's graph
// builder began to apply, as its log line names it.
type virtualEvent struct {
	apiVersion, kind, ns, name, uid string
}

// kcmVirtuals follows the GC process's log for the virtual delete events
// its graph builder takes: upstream-stepped's `gc deliver-virtual` waits
// for one, since no IO of the GC's carries it (an attemptToDelete worker
// hands it to the graph builder in memory).
type kcmVirtuals struct {
	log *kcmLog
	mu  sync.Mutex
	got []virtualEvent
}

func newKCMVirtuals(log *kcmLog) *kcmVirtuals {
	k := &kcmVirtuals{log: log}
	log.parse(k.line)
	return k
}

func (k *kcmVirtuals) line(s string) {
	m := kcmVirtualLine.FindStringSubmatch(s)
	if m == nil {
		return
	}
	ev := virtualEvent{apiVersion: m[1], kind: m[2], name: m[3], uid: m[4]}
	if ns, name, ok := strings.Cut(m[3], "/"); ok {
		ev.ns, ev.name = ns, name
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, ev)
}

// Reset forgets the events taken so far (a trace's hold begins).
func (k *kcmVirtuals) Reset() {
	k.log.read()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = nil
}

// take removes and returns the first event logged since the last Reset
// that match accepts (ok false: none yet).
func (k *kcmVirtuals) take(match func(virtualEvent) bool) (virtualEvent, bool) {
	k.log.read()
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, ev := range k.got {
		if match(ev) {
			k.got = append(k.got[:i:i], k.got[i+1:]...)
			return ev, true
		}
	}
	return virtualEvent{}, false
}
