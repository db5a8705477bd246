package zzdbg

import (
	"fmt"
	"testing"

	"github.com/cascade-k8s/cascade/traces"
)

func TestDbg(t *testing.T) {
	tr, err := traces.ParseFile("/tmp/gizmo/t/f.trace")
	if err != nil {
		t.Fatal(err)
	}
	_, s, err := traces.Replay(tr)
	fmt.Println("err", err)
	if s == nil {
		return
	}
	fmt.Printf("queue %+v\n", s.GC.AttemptToDelete)
	fmt.Printf("nodes %+v\n", s.GC)
}
