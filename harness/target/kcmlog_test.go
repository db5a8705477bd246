package target

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
)

// The graph builder's lines are read as they are written, half lines
// kept for the next read, other lines left out, in log order.
func TestKCMGraphLogReadsTheGraphBuildersLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	stamp := at.Format("I0102 15:04:05.000000") + "   4242 graph_builder.go:716] "
	line := func(uid, typ, virtual string) string {
		return stamp + `"GraphBuilder process object" logger="garbage-collector-controller" apiVersion="v1" kind="ConfigMap" object="ns/a" uid="` + uid + `" eventType="` + typ + `" virtual=` + virtual + "\n"
	}
	g := newKCMGraphLog(newKCMLog(path))
	full := line("u2", "delete", "false")
	appendLog(t, path, line("u1", "add", "false"), stamp+`"synced garbage collector"`+"\n", line("u1", "delete", "true"), full[:40])
	got := g.take()
	want := []history.Processed{{UID: "u1", Seq: 1, At: at.UnixNano()}, {UID: "u1", Deleted: true, Virtual: true, Seq: 2, At: at.UnixNano()}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	appendLog(t, path, full[40:])
	got = g.take()
	want = []history.Processed{{UID: "u2", Deleted: true, Seq: 3, At: at.UnixNano()}}
	if !slices.Equal(got, want) {
		t.Fatalf("after the rest of the line: got %+v, want %+v", got, want)
	}
}

// One follower reads the log for every parser: the lines one reader's
// read takes in reach the others too, each once, so a reader that reads
// later still sees lines another reader's read consumed.
func TestKCMLogFeedsEveryParserOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	stamp := at.Format("I0102 15:04:05.000000") + "   4242 graph_builder.go:716] "
	log := newKCMLog(path)
	g := newKCMGraphLog(log)
	l := newKCMSyncLog(log)
	appendLog(t, path,
		stamp+`"syncing garbage collector with updated resources from discovery" logger="garbage-collector-controller" attempt=1 diff="added: [cascade.dev/v1, Resource=widgets], removed: []"`+"\n",
		stamp+`"GraphBuilder process object" logger="garbage-collector-controller" apiVersion="v1" kind="ConfigMap" object="ns/a" uid="u1" eventType="add" virtual=false`+"\n",
		stamp+`"synced garbage collector" logger="garbage-collector-controller"`+"\n")
	if !l.Synced("widgets.cascade.dev", at.Add(-time.Second)) {
		t.Fatal("the sync was not seen")
	}
	// the sync log's read took the graph builder's line in: it waits for
	// take, and is handed on once
	if got := g.take(); len(got) != 1 || got[0].UID != "u1" {
		t.Fatalf("graph builder lines after another reader's read: %+v, want u1's", got)
	}
	if got := g.take(); len(got) != 0 {
		t.Fatalf("a line handed on twice: %+v", got)
	}
}

// On the real kube-controller-manager, every watch event the proxy
// hands to the GC's informers becomes one graph builder line, in order,
// a DELETED event a delete line: the pairing lin's GraphLog evidence
// rests on (lin appliedByUID). The run below creates, adopts, orphans
// and deletes across two informers (ConfigMaps, Pods).
func TestGraphBuilderLinesPairWithDeliveries(t *testing.T) {
	tg := startTarget(t, Upstream)
	trace := parseTrace(t, `create cm/owner
create pod/dep owner=cm/owner
create pod/other
add-owner pod/other cm/owner
settle
----
cm/owner live
pod/dep live owners=[cm/owner]
pod/other live owners=[cm/owner]

delete cm/owner propagation=Orphan
settle
----
cm/owner gone
pod/dep live
pod/other live

delete pod/dep
settle
----
cm/owner gone
pod/dep gone
pod/other live
`)
	tg.Proxy.Take()
	tg.TakeGraphLog()
	outs, skip, err := tg.ReplayTrace(context.Background(), trace)
	if skip != "" || err != nil {
		t.Fatalf("skip %q, err %v", skip, err)
	}
	if err := replay.Diff(trace, Upstream, outs); err != nil {
		t.Fatal(err)
	}
	ev := tg.Proxy.Take()
	lines := tg.TakeGraphLog()
	delivered := map[string][]bool{} // deleted, per event
	for _, d := range ev.Deliveries {
		if d.Client != proxy.SharedInformersClient && d.Client != proxy.MetadataInformersClient || d.Delivered.IsZero() || d.UID == "" {
			continue
		}
		if d.Name != "owner" && d.Name != "dep" && d.Name != "other" {
			continue
		}
		delivered[d.UID] = append(delivered[d.UID], d.Type == "DELETED")
	}
	if len(delivered) != 3 {
		t.Fatalf("want the deliveries of 3 objects, got %d: %v", len(delivered), delivered)
	}
	for uid, want := range delivered {
		var got []bool
		for _, l := range lines {
			if l.UID == uid && !l.Virtual {
				got = append(got, l.Deleted)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("object %s: graph builder lines (deleted?) %v, deliveries %v", uid, got, want)
		}
	}
}

// The graph builder's lines for virtual delete events are read with the
// event's kind, namespace, name and UID; a taken event is not taken
// again, and Reset forgets those logged before it.
func TestKCMVirtualsReadsVirtualDeleteEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	stamp := time.Now().Format("I0102 15:04:05.000000") + "   4242 graph_builder.go:716] "
	line := func(kind, object, uid, typ, virtual string) string {
		return stamp + `"GraphBuilder process object" logger="garbage-collector-controller" apiVersion="v1" kind="` + kind + `" object="` + object + `" uid="` + uid + `" eventType="` + typ + `" virtual=` + virtual + "\n"
	}
	v := newKCMVirtuals(newKCMLog(path))
	appendLog(t, path, line("ConfigMap", "ns/a", "u1", "delete", "false"), line("ConfigMap", "ns/b", "u2", "delete", "true"), line("PersistentVolume", "p", "u3", "delete", "true"))
	is := func(kind, ns, name string) func(virtualEvent) bool {
		return func(ev virtualEvent) bool { return ev.kind == kind && ev.ns == ns && ev.name == name }
	}
	if _, ok := v.take(is("ConfigMap", "ns", "a")); ok {
		t.Error("took an observed object's delete event for a virtual one")
	}
	if ev, ok := v.take(is("ConfigMap", "ns", "b")); !ok || ev.uid != "u2" || ev.apiVersion != "v1" {
		t.Errorf("ConfigMap ns/b: got %+v, %v", ev, ok)
	}
	if _, ok := v.take(is("ConfigMap", "ns", "b")); ok {
		t.Error("took ConfigMap ns/b's event twice")
	}
	if ev, ok := v.take(is("PersistentVolume", "", "p")); !ok || ev.uid != "u3" {
		t.Errorf("cluster-scoped PersistentVolume p: got %+v, %v", ev, ok)
	}
	appendLog(t, path, line("Secret", "ns/c", "u4", "delete", "true"))
	v.Reset()
	if _, ok := v.take(is("Secret", "ns", "c")); ok {
		t.Error("took an event logged before Reset")
	}
}
