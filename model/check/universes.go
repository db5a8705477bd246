package check

// Universes are the named universes (`cascade check --universe NAME`).
// Each is small enough to explore exhaustively; README's "Universes"
// section reports what each costs.
var Universes = []Universe{
	{
		Name:       "pair",
		Doc:        "Two ConfigMaps, every ownerReference between them (plain or blocking, self-references and cycles included), each maybe held by a user finalizer; any two requests among every propagation policy, second deletes and the finalizer's removal.",
		Objects:    []string{"cm/a", "cm/b"},
		Shapes:     []string{"", "block"},
		Self:       true,
		Finalizers: []string{"cascade.dev/hold"},
		Ops: []string{
			"delete $X",
			"delete $X propagation=Foreground",
			"delete $X propagation=Orphan",
			"remove-finalizer $X cascade.dev/hold",
		},
		OpBudget: 2,
	},
	{
		Name:      "scopes",
		Doc:       "A ConfigMap in the default namespace, one in ns2 and a cluster-scoped PersistentVolume, with up to two plain references among them (cross-namespace and namespaced-owner-of-cluster-scoped ones included), observed by the GC in any order; any one DELETE.",
		Objects:   []string{"cm/a", "cm/ns2/b", "pv/p"},
		Shapes:    []string{""},
		MaxRefs:   2,
		Ops:       []string{"delete $X"},
		OpBudget:  1,
		Unsettled: true,
	},
	{
		Name:    "adoption",
		Doc:     "A ReplicaSet and two Pods its selector matches, adopted or referencing each other in any controller/blocking shape; any two requests among every propagation policy on any object and the release of a reference (which the ReplicaSet controller may answer by adopting again).",
		Objects: []string{"rs/web selector=app=web", "pod/p labels=app=web", "pod/q labels=app=web"},
		Shapes:  []string{"controller,block", "block"},
		MaxRefs: 2,
		Ops: []string{
			"delete $X propagation=Background",
			"delete $X propagation=Foreground",
			"delete $X propagation=Orphan",
			"remove-owner $X $Y",
		},
		OpBudget: 2,
	},
	{
		Name:       "trio",
		Doc:        "Three ConfigMaps, up to three plain or blocking references among them (chains, fans, cycles, self-references), each maybe held by a user finalizer; any two requests among every client op: DELETE under each propagation policy (and again), DELETE with a resourceVersion precondition, finalizer and ownerReference updates.",
		Objects:    []string{"cm/a", "cm/b", "cm/c"},
		Shapes:     []string{"", "block"},
		Self:       true,
		MaxRefs:    3,
		Finalizers: []string{"cascade.dev/hold"},
		Ops: []string{
			"delete $X",
			"delete $X propagation=Foreground",
			"delete $X propagation=Orphan",
			"delete $X propagation=Background if-rv=1",
			"remove-finalizer $X cascade.dev/hold",
			"add-finalizer $X cascade.dev/hold",
			"add-owner $X $Y,block",
			"remove-owner $X $Y",
		},
		OpBudget: 2,
	},
}
