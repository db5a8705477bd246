// Package check is cascade's explicit-state model checker. It explores a
// bounded scope of the model breadth-first, so the first violation of a
// property it meets is at the smallest depth any violation has, and it
// writes that path out as a trace file that the datadriven test, `cascade
// replay` and the scenario suite can run again.
package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cascade-k8s/cascade/model"
)

// Scope bounds an exploration.
type Scope struct {
	Name string
	Doc  string
	// Setup commands build the initial state (trace syntax, `settle`
	// allowed). They are not explored: the checker starts after them.
	Setup []string
	// Roots, when set, are alternative initial states: the search starts
	// from all of them at once (level 0), each built by Setup followed by
	// the root's own Setup, and shares one visited set across them. A
	// universe (Universe.Scope) has one root per initial ownership graph.
	Roots []Root
	// Ops are client requests the environment may send, each at most once,
	// in any order and interleaved with every internal step.
	Ops []string
	// OpBudget, when positive, lets the environment send any of Ops any
	// number of times, OpBudget requests in all (a second DELETE of the
	// same kind included); the state remembers only how many it sent.
	OpBudget int
	// FoundBy, when set, is the found-by header of the scope's
	// counterexample traces (default: the `cascade check --preset`
	// command of the scope's name).
	FoundBy string
	// Ordered sends Ops in the order given (still interleaved with every
	// internal step): the scope of a recorded run whose client steps are
	// fixed and only the GC's and the controllers' schedule is free.
	Ordered bool
	Bugs    model.BugSet
	// Release is the Kubernetes release whose semantics the model follows
	// (model.Model.Release; the zero value: model.DefaultRelease).
	Release model.Release
	// Coalesce lets informer relists skip events.
	Coalesce bool
	// Expect lists reachability properties this scope must witness; one
	// never witnessed makes the result vacuous.
	Expect []string
	// MaxDepth and MaxStates bound the search; 0 means unbounded. A bound
	// that cuts the search makes the result incomplete, and the result
	// says so.
	MaxDepth  int
	MaxStates int
	// Symmetry merges states that differ only in UID assignment
	// (model.State.Canonical).
	Symmetry bool
	// Reduction searches with sleep sets (reduction.go): the same states
	// and violations, with fewer transitions. It is ignored in a scope
	// with Constraints.
	Reduction bool
	// Constraints prune states: a state violating one is checked but not
	// expanded (TLC's CONSTRAINT).
	Constraints []Constraint
}

// Root is one initial state of a scope with several.
type Root struct {
	Name  string   // shown in counterexample traces
	Setup []string // commands after the scope's Setup
	// Index is the root's position among the scope's roots before it was
	// split (Scope.Shard keeps it): a universe's initial graph number.
	Index int
}

// Constraint is `METRIC<=N` or `METRIC<N` over a state metric: one of
// Metrics, or objects.KIND for the live objects of one kind (short name,
// e.g. objects.pod<=3).
type Constraint struct {
	Metric string
	Max    int // inclusive
	Text   string
}

// Metrics a constraint may name.
var Metrics = map[string]func(s *model.State) int{
	"objects": func(s *model.State) int { return len(s.Objects) },
	"events": func(s *model.State) int {
		return len(s.GC.Watch.Events()) + len(s.Controller.Watch.Events())
	},
	"gcqueue": func(s *model.State) int {
		return len(s.GC.AttemptToDelete) + len(s.GC.AttemptToOrphan) + len(s.GC.VirtualEvents)
	},
	"inflight": func(s *model.State) int { return len(s.GC.InFlight) },
	"nodes":    func(s *model.State) int { return len(s.GC.Nodes) },
	"absent":   func(s *model.State) int { return len(s.GC.Absent) },
}

// ParseConstraint reads `METRIC<=N` or `METRIC<N`.
func ParseConstraint(text string) (Constraint, error) {
	op, strict := "<=", false
	i := strings.Index(text, "<=")
	if i < 0 {
		op, strict = "<", true
		i = strings.Index(text, "<")
	}
	if i < 0 {
		return Constraint{}, fmt.Errorf("constraint %q: expected METRIC<=N or METRIC<N", text)
	}
	metric := strings.TrimSpace(text[:i])
	if metricFunc(metric) == nil {
		return Constraint{}, fmt.Errorf("constraint %q: unknown metric %q (known: %s, objects.KIND)", text, metric, strings.Join(MetricNames(), ", "))
	}
	n, err := strconv.Atoi(strings.TrimSpace(text[i+len(op):]))
	if err != nil || n < 0 {
		return Constraint{}, fmt.Errorf("constraint %q: expected a non-negative bound", text)
	}
	if strict {
		n--
	}
	return Constraint{Metric: metric, Max: n, Text: text}, nil
}

// MetricNames lists the constraint metrics.
func MetricNames() []string {
	var out []string
	for k := range Metrics {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// metricFunc resolves a metric name, including objects.KIND.
func metricFunc(name string) func(*model.State) int {
	if f, ok := Metrics[name]; ok {
		return f
	}
	short, ok := strings.CutPrefix(name, "objects.")
	if !ok {
		return nil
	}
	k, ok := model.KindByShort(short)
	if !ok {
		return nil
	}
	return func(s *model.State) int {
		n := 0
		for i := range s.Objects {
			if s.Objects[i].Kind == k {
				n++
			}
		}
		return n
	}
}

// Presets are the named scopes; Run applies symmetry reduction to each
// unless told otherwise (see model.State.Canonical for why it is sound for
// every property). Each one stages a known interaction
// small enough to explore exhaustively; BugPreset says which preset shows
// each catalogued bug.
var Presets = []Scope{
	{
		Name: "orphan-adoption",
		Doc:  "A Deployment that controls a ReplicaSet is deleted with Orphan while the adopting controller runs (design proposal 'Orphan adoption').",
		Setup: []string{
			"create deploy/web selector=app=web",
			"create rs/web-1 labels=app=web owner=deploy/web,controller,block",
			"settle",
		},
		Ops:    []string{"delete deploy/web propagation=Orphan"},
		Expect: []string{model.PropOrphaningHappens},
	},
	{
		Name: "orphan-unseen",
		Doc:  "An owner is orphan-deleted before the GC has necessarily observed its dependent (kubernetes#26120).",
		Setup: []string{
			"create rc/owner replicas=1 selector=app=dep",
			"create pod/dep labels=app=dep owner=rc/owner,controller",
		},
		Ops:    []string{"delete rc/owner propagation=Orphan"},
		Expect: []string{model.PropOrphaningHappens},
	},
	{
		Name: "foreground-cycle",
		Doc:  "Two objects that block each other's deletion; one is deleted in the foreground.",
		Setup: []string{
			"create cm/a",
			"create cm/b owner=cm/a,block",
			"add-owner cm/a cm/b,block",
			"settle",
		},
		Ops:    []string{"delete cm/a propagation=Foreground"},
		Expect: []string{model.PropCycleBroken, model.PropForegroundCompletes},
	},
	{
		Name: "mixed-owners",
		Doc:  "A pod with two owners, one deleted in the foreground and one orphaned, in either order (proposal open question 1).",
		Setup: []string{
			"create rc/a",
			"create rc/b",
			"create pod/shared owner=rc/a,block owner=rc/b",
			"settle",
		},
		Ops:    []string{"delete rc/a propagation=Foreground", "delete rc/b propagation=Orphan"},
		Expect: []string{model.PropForegroundCompletes, model.PropOrphaningHappens},
	},
	{
		Name: "all-policies",
		Doc:  "An owner with a blocking dependent under every propagation policy, including second deletes that switch policy mid-deletion.",
		Setup: []string{
			"create rc/owner finalizers=cascade.dev/hold",
			"create pod/dep owner=rc/owner,block",
			"settle",
		},
		Ops: []string{
			"delete rc/owner propagation=Background",
			"delete rc/owner propagation=Foreground",
			"delete rc/owner propagation=Orphan",
			"remove-finalizer rc/owner cascade.dev/hold",
		},
		Expect: []string{model.PropForegroundCompletes, model.PropOrphaningHappens},
	},
	{
		Name:  "cross-namespace",
		Doc:   "A child in another namespace names an owner by UID, next to a valid child, observed in any order (kubernetes#65200).",
		Setup: []string{"create cm/ns2/parent"},
		Ops: []string{
			"create secret/ns1/bad owner=cm/ns2/parent",
			"create secret/ns2/good owner=cm/ns2/parent",
		},
	},
	{
		Name: "cluster-scoped",
		Doc:  "A namespaced dependent of a cluster-scoped owner, observed before its owner (kubernetes#54940).",
		Setup: []string{
			"create pv/disk",
			"create cm/ns1/claim owner=pv/disk",
		},
		Ops: []string{"delete pv/disk"},
	},
	{
		Name: "owner-swap",
		Doc:  "A dependent's ownerReference moves from an owner being deleted to a live one while the GC classifies it (kubernetes#114603).",
		Setup: []string{
			"create cm/v18",
			"create cm/v19",
			"create cm/proxy owner=cm/v18",
			"settle",
		},
		Ops: []string{"delete cm/v18", "add-owner cm/proxy cm/v19", "remove-owner cm/proxy cm/v18"},
	},
	{
		Name: "refinalize",
		Doc:  "An object held by a user finalizer is deleted in the foreground twice (kubernetes#77081).",
		Setup: []string{
			"create cm/x finalizers=cascade.dev/hold",
			"settle",
		},
		Ops: []string{
			"delete cm/x propagation=Foreground",
			"delete cm/x propagation=Foreground",
			"remove-finalizer cm/x cascade.dev/hold",
		},
		Expect: []string{model.PropForegroundCompletes},
	},
	{
		Name: "lost-update",
		Doc:  "An owner with a blocking dependent is deleted in the foreground and touched again (kubernetes#115570).",
		Setup: []string{
			"create rs/web replicas=1 selector=app=web",
			"create pod/web-a labels=app=web owner=rs/web,controller,block",
			"settle",
		},
		Ops:    []string{"delete rs/web propagation=Foreground", "label rs/web touched=yes"},
		Expect: []string{model.PropForegroundCompletes},
	},
	{
		Name: "deep-cascade",
		Doc:  "A background cascade through an intermediate ReplicationController, whose own default is to orphan (kubernetes#47843).",
		Setup: []string{
			"create cm/top",
			"create rc/middle replicas=1 selector=app=bottom owner=cm/top",
			"create pod/bottom labels=app=bottom owner=rc/middle,controller",
			"settle",
		},
		Ops: []string{"delete cm/top"},
	},
	{
		Name: "relist",
		Doc:  "An owner deleted while the GC's informer may skip its events, with a dependent the GC already knows (kubernetes#56121).",
		Setup: []string{
			"create secret/owner",
			"create cm/dep owner=secret/owner",
		},
		Ops:      []string{"delete secret/owner"},
		Coalesce: true,
	},
	{
		Name: "protection",
		Doc:  "Deletion protection on a scaled workload and a protected dependent, against user and GC deletes.",
		Setup: []string{
			"create deploy/web replicas=1 labels=policy.kruise.io/delete-protection=Cascading",
			"create cm/owner",
			"create cm/guarded labels=policy.kruise.io/delete-protection=Always owner=cm/owner",
			"settle",
		},
		Ops: []string{"delete deploy/web", "scale deploy/web 0", "delete cm/owner", "delete cm/guarded"},
	},
	{
		Name: "late-finalizer",
		Doc:  "Finalizer updates around a background deletion held by a user finalizer.",
		Setup: []string{
			"create cm/x finalizers=cascade.dev/hold",
			"settle",
		},
		Ops: []string{"delete cm/x", "add-finalizer cm/x orphan", "remove-finalizer cm/x cascade.dev/hold"},
	},
}

// BugPreset names the preset in which each catalogued bug yields a
// counterexample.
var BugPreset = map[model.Bug]string{
	model.BugAdoptWithoutRecheck:           "orphan-adoption",
	model.BugEdgeTriggeredTransitions:      "refinalize",
	model.BugLostFirstUpdate:               "lost-update",
	model.BugLookupIgnoresScope:            "cluster-scoped",
	model.BugUIDOnlyIdentity:               "cross-namespace",
	model.BugDeleteWithoutRVPrecondition:   "owner-swap",
	model.BugNoCycleUnblock:                "foreground-cycle",
	model.BugDeleteDependentsWithoutPolicy: "deep-cascade",
	model.BugForgetUnobservedVirtual:       "relist",
	model.BugProtectionDisabled:            "protection",
	model.BugFinalizerAfterDeletion:        "late-finalizer",
}

// Fanout is the benchmark scope `fanout-N`: one owner with n dependents
// deleted in the background, every interleaving of the GC's informer
// deliveries, work items and DELETEs explored. Its state count grows about
// fivefold per dependent; bench/spin models the same scope in Promela.
func Fanout(n int) Scope {
	s := Scope{Name: fmt.Sprintf("fanout-%d", n), Doc: fmt.Sprintf("One owner with %d dependents deleted in the background (the SPIN baseline's scope).", n),
		Setup: []string{"create secret/owner"}, Ops: []string{"delete secret/owner"}, Symmetry: true}
	for i := 1; i <= n; i++ {
		s.Setup = append(s.Setup, fmt.Sprintf("create cm/d%d owner=secret/owner", i))
	}
	s.Setup = append(s.Setup, "settle")
	return s
}

// Preset returns a named preset, or fanout-N.
func Preset(name string) (Scope, error) {
	for _, p := range Presets {
		if p.Name == name {
			return p, nil
		}
	}
	if rest, ok := strings.CutPrefix(name, "fanout-"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 1 && n <= 20 {
			return Fanout(n), nil
		}
		return Scope{}, fmt.Errorf("preset %q: fanout-N takes 1 <= N <= 20", name)
	}
	var names []string
	for _, p := range Presets {
		names = append(names, p.Name)
	}
	return Scope{}, fmt.Errorf("unknown preset %q (known: %s, fanout-N)", name, strings.Join(names, ", "))
}
