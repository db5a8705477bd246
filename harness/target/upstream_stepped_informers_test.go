package target

import (
	"context"
	"testing"

	"github.com/cascade-k8s/cascade/harness/proxy"
	"github.com/cascade-k8s/cascade/harness/replay"
)

// `gc coalesce` on the real GC: the proxy ends the GC's watch of Secrets
// at the held delete of secret/owner with a 410 Expired, the informer
// lists again (a WatchList), and the listed new secret/owner reaches the
// graph builder as an update from the old one, so cm/dep is never
// collected (race/relist-uid-change). The same writes with each event
// handed on and no relist get cm/dep collected: the relist, not a GC
// that saw nothing, keeps it.
func TestCoalesceRelistsTheGCInformer(t *testing.T) {
	control := parseTrace(t, `create secret/owner
create cm/dep owner=secret/owner
settle
----
cm/dep live owners=[secret/owner]
secret/owner live

delete secret/owner
create secret/owner
gc deliver secret/owner
gc deliver secret/owner
settle
----
cm/dep gone
secret/owner live
`)
	race := embedded(t, "race/relist-uid-change")
	tg := startUpstreamStepped(t)
	ctx := context.Background()
	// the Relist step itself fails the replay unless the informer lists
	// again; the evidence shows the watch it ended
	relisted := func() bool {
		for _, d := range tg.Proxy.Take().Deliveries {
			if d.Informer == proxy.SharedInformersClient+"/secrets" && d.Type == "ERROR" && d.Fault == "relist" {
				return true
			}
		}
		return false
	}
	tg.Proxy.Take()
	for _, tr := range []struct {
		name   string
		relist bool
	}{{"control", false}, {"race/relist-uid-change", true}} {
		trace := control
		if tr.relist {
			trace = race
		}
		outs, skip, err := tg.ReplayTrace(ctx, trace)
		if skip != "" || err != nil {
			t.Fatalf("%s: skip %q, err %v", tr.name, skip, err)
		}
		if err := replay.Diff(trace, UpstreamStepped, outs); err != nil {
			t.Fatalf("%s: %v", tr.name, err)
		}
		if ended := relisted(); ended != tr.relist {
			t.Errorf("%s: the GC's Secrets watch ended for a relist: %v, want %v", tr.name, ended, tr.relist)
		}
	}
}

// `gc sync` on the real GC: its discovery requests wait at the proxy
// until the step, which lets them through and waits for the monitors the
// model's sync starts to list. The list holds what existed at the step
// (widget/d) and is handed on with it; a Widget created after the step
// comes as an event of its own, held for its `gc deliver`.
func TestGCSyncStartsMonitorsAtTheStep(t *testing.T) {
	tg := startUpstreamStepped(t)
	for _, name := range []string{"scenario/crd-sync-lists-before-next-create", "scenario/crd-initial-list-in-any-order"} {
		tr := embedded(t, name)
		outs, skip, err := tg.ReplayTrace(context.Background(), tr)
		if skip != "" || err != nil {
			t.Fatalf("%s: skip %q, err %v", name, skip, err)
		}
		if err := replay.Diff(tr, UpstreamStepped, outs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
