package fuzz

import (
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
	"github.com/cascade-k8s/cascade/traces"
)

// ownOrder is the model standing in for a system that settles by itself
// in an order of its own: it takes first before its settle, then settles;
// extra lines, if any, show in its dump as a state no order reaches.
type ownOrder struct {
	*modelSystem
	first string
	extra []string
}

func (ownOrder) settlesAlone() bool { return true }

func (o ownOrder) settle() error {
	st, err := model.ParseStep(o.first)
	if err != nil {
		return err
	}
	if o.s, _, err = o.m.Apply(o.s, st); err != nil {
		return err
	}
	return o.modelSystem.settle()
}

func (o ownOrder) dump() ([]string, error) {
	d, _ := o.modelSystem.dump()
	return append(d, o.extra...), nil
}

// raceAtSettle is a lockstep run at its final settle with two watch events
// of two resources pending, whose order decides an Event (cm/ns3/a's
// deletion and pod/d's creation in default naming cm/ns3/a's UID: the
// graph builder that takes pod/d first reports OwnerRefInvalidNamespace),
// the system taking first the delivery the model's canonical settle does
// not.
func raceAtSettle(t *testing.T, extra ...string) (*lockstep, *[]string) {
	t.Helper()
	m := &model.Model{}
	s := model.NewState()
	for _, line := range []string{"create cm/ns3/a", "gc deliver cm/ns3/a", "delete cm/ns3/a", "create pod/d owner=cm/ns3/a"} {
		st, err := model.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		if s, _, err = m.Apply(s, st); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	_, path, err := m.Settle(s)
	if err != nil {
		t.Fatal(err)
	}
	other := "gc deliver pod/d"
	if path[0].Step.String() == other {
		other = "gc deliver cm/ns3/a"
	}
	var failures []string
	sys := &modelSystem{m: m, s: s}
	l := &lockstep{m: m, s: s, sys: ownOrder{modelSystem: sys, first: other, extra: extra},
		fail: func(kind, summary string) { failures = append(failures, kind+": "+summary) }}
	return l, &failures
}

// A system that settles by itself passes where its own order ends
// elsewhere than the model's canonical settle but some interleaving of
// the model's internal steps ends there too; the trace names that
// interleaving's steps before the settle, and the run is counted.
func TestSettleInAnotherOrderTheModelTakes(t *testing.T) {
	l, failures := raceAtSettle(t)
	canonical, _, err := l.m.Settle(l.s)
	if err != nil {
		t.Fatal(err)
	}
	l.settle()
	if len(*failures) > 0 {
		t.Fatalf("the settle failed: %v", *failures)
	}
	if l.otherOrder == 0 {
		t.Error("the run is not counted as settled in another order")
	}
	if slices.Equal(l.s.Dump(), canonical.Dump()) {
		t.Fatalf("the model kept its canonical settle's end %v", canonical.Dump())
	}
	var lines []string
	for _, w := range l.done {
		lines = append(lines, w.Commands[0])
	}
	if len(lines) < 2 || lines[len(lines)-1] != "settle" || !strings.HasPrefix(lines[0], "gc deliver") {
		t.Errorf("the trace does not name the interleaving before the settle: %v", lines)
	}
}

// An end no interleaving of the model's reaches is a divergence.
func TestSettleNoOrderReachesIsADivergence(t *testing.T) {
	l, failures := raceAtSettle(t, "event Made up")
	l.settle()
	if len(*failures) == 0 || !strings.HasPrefix((*failures)[0], "divergence") {
		t.Fatalf("want a divergence, got %v", *failures)
	}
	if !strings.Contains((*failures)[0], "no order of the GC's pending deliveries ends there") {
		t.Errorf("the divergence does not say that no order of the model's ends there: %s", (*failures)[0])
	}
	if l.otherOrder > 0 {
		t.Error("a diverging run is counted as settled in another order")
	}
}

// The run that showed it (`cascade fuzz --target upstream-stepped
// --checks 200 --seed 11`, run 141, on v1.37.2): at the final settle
// rc/d's creation, secret/ns2/b's and cronjob/ns3/a's events were
// pending, and kube-controller-manager's graph builder took rc/d's first,
// reporting its reference to cronjob/ns3/a, observed in ns3, where the
// model's canonical settle delivers the Secrets first and reports only
// the reference to secret/ns2/b. The real end is one the model reaches
// with rc/d delivered first.
func TestSettlesToFindsSeed11Run141sOrder(t *testing.T) {
	m, s := beforeSettle(t, "testdata/upstream-stepped-settle-order.trace")
	canonical, _, err := m.Settle(s)
	if err != nil {
		t.Fatal(err)
	}
	const extra = `event OwnerRefInvalidNamespace rc/d: ownerRef cronjob/a does not exist in namespace "default"`
	if slices.Contains(canonical.Dump(), extra) {
		t.Fatalf("the model's canonical settle reports %q already", extra)
	}
	real := append(canonical.Dump(), extra)
	events := slices.IndexFunc(real, func(l string) bool { return strings.HasPrefix(l, "event ") })
	slices.Sort(real[events:])
	path, found, err := m.SettlesTo(s, real, reorders)
	if err != nil || !found {
		t.Fatalf("the real end is not found: found=%v err=%v", found, err)
	}
	if path[0].Step.String() != "gc deliver rc/d" {
		t.Errorf("the order found begins with %q, want rc/d's delivery", path[0].Step)
	}
}

// beforeSettle is the model and its state after a trace's steps but its
// settles: where a failing run's final settle began.
func beforeSettle(t *testing.T, path string) (*model.Model, *model.State) {
	t.Helper()
	tr, err := traces.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr.Model()
	if err != nil {
		t.Fatal(err)
	}
	s := model.NewState()
	for _, st := range tr.Stanzas {
		for _, c := range st.Commands {
			if c.Settle {
				continue
			}
			if s, _, err = m.Apply(s, c.Step); err != nil {
				t.Fatalf("%s: %v", c.Text, err)
			}
		}
	}
	return m, s
}
