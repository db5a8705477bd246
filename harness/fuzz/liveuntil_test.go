package fuzz

import (
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/replay"
)

// TestLiveUntil: a run with neither a restart nor a CRD settles once; a
// run that created a CRD checks its state for liveness again until
// CRDRewatch after the create, since the GC may take in the custom
// resources of a CRD created again only after its kept informer's
// back-off; a restart's longer bound wins. CRDRewatch covers the
// discovery sync the settle waits for and a reflector back-off at its
// jittered cap (60 s).
func TestLiveUntil(t *testing.T) {
	crd := time.Unix(1000, 0)
	if got := liveUntil(nil, time.Time{}); !got.IsZero() {
		t.Errorf("no restart, no CRD: want one settle (zero), got %v", got)
	}
	if got := liveUntil(nil, crd); !got.Equal(crd.Add(CRDRewatch)) {
		t.Errorf("a CRD created at %v: want liveness checked until %v, got %v", crd, crd.Add(CRDRewatch), got)
	}
	later := crd.Add(CRDRewatch + time.Minute)
	if got := liveUntil([]restartDone{{until: later}}, crd); !got.Equal(later) {
		t.Errorf("a restart bounding until %v: want %v, got %v", later, later, got)
	}
	earlier := crd.Add(time.Second)
	if got := liveUntil([]restartDone{{until: earlier}}, crd); !got.Equal(crd.Add(CRDRewatch)) {
		t.Errorf("a restart bounding until %v: want the CRD's %v, got %v", earlier, crd.Add(CRDRewatch), got)
	}
	if least := replay.DefaultQuiet.GCSync + 60*time.Second; CRDRewatch < least {
		t.Errorf("CRDRewatch %v is shorter than the discovery sync and a capped reflector back-off, %v", CRDRewatch, least)
	}
}
