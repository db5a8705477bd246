package driver

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestRealKey: trace keys map to the run's namespaces and names.
func TestRealKey(t *testing.T) {
	d := &Driver{prefix: "cascade-x", symbols: map[string]types.UID{}, nsMade: map[string]bool{}}
	for in, want := range map[string]string{
		"cm/a":                    "cm/cascade-x-default/a",
		"cm/ns1/a":                "cm/cascade-x-ns1/a",
		"pv/disk":                 "pv/cascade-x-disk",
		"pv/ns1/disk":             "pv/cascade-x-ns1/cascade-x-disk",
		"ns/team":                 "ns/cascade-x-team",
		"crd/widgets.cascade.dev": "crd/widgets.cascade.dev",
		"UnknownKind/thing":       "UnknownKind/cascade-x-thing",
		"Frob/default/d":          "Frob/cascade-x-default/cascade-x-d",
		"Frob//d":                 "Frob//cascade-x-d",
	} {
		got, err := d.RealKey(in)
		if err != nil || got != want {
			t.Errorf("RealKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	line, err := d.RealLine("controller adopt pod/p by=herd/h")
	if err != nil || line != "controller adopt pod/cascade-x-default/p by=herd/cascade-x-default/h" {
		t.Errorf("RealLine = %q, %v", line, err)
	}
	if line, err := d.RealLine("gc sync"); err != nil || line != "gc sync" {
		t.Errorf("RealLine(gc sync) = %q, %v", line, err)
	}
	if _, err := d.RealKey("nope"); err == nil {
		t.Error("a key without a slash must be an error")
	}
}
