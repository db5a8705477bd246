package model

// KindInfo describes one resource kind the model knows. The table mirrors
// what the API server's RESTMapper and registry strategies say about each
// kind; only the facts that deletion semantics depend on are kept.
type KindInfo struct {
	Short      string // trace spelling, e.g. "rs"
	Kind       string // API kind, e.g. "ReplicaSet"; what ownerReferences carry
	APIVersion string // preferred group/version
	Resource   string // plural resource name
	Namespaced bool
	// DefaultPolicy is the registry strategy's DefaultGarbageCollectionPolicy
	// for requests at the preferred version (rest.GarbageCollectionPolicy):
	// "" and Background both mean "do not orphan".
	DefaultPolicy Policy
	// Workload kinds have spec.replicas, which deletion protection reads.
	Workload bool
	// Custom kinds are served only while their CRD exists.
	Custom bool
	// CRDName is the name of the CRD that serves a custom kind.
	CRDName string
	// Adopts is the Short name of the kind this kind's controller adopts
	// (ReplicaSet adopts Pods, Deployment adopts ReplicaSets, ...).
	Adopts string
}

// Kinds is the kind table. Its order is the canonical order of watch
// queues; it never changes at run time.
var Kinds = []KindInfo{
	{Short: "pod", Kind: "Pod", APIVersion: "v1", Resource: "pods", Namespaced: true},
	{Short: "cm", Kind: "ConfigMap", APIVersion: "v1", Resource: "configmaps", Namespaced: true},
	{Short: "secret", Kind: "Secret", APIVersion: "v1", Resource: "secrets", Namespaced: true},
	// ReplicationController and Job default to orphaning at their legacy
	// group versions (core/v1, batch/v1): replicationcontroller/strategy.go
	// and job/strategy.go DefaultGarbageCollectionPolicy.
	{Short: "rc", Kind: "ReplicationController", APIVersion: "v1", Resource: "replicationcontrollers", Namespaced: true, DefaultPolicy: Orphan, Workload: true, Adopts: "pod"},
	{Short: "deploy", Kind: "Deployment", APIVersion: "apps/v1", Resource: "deployments", Namespaced: true, Workload: true, Adopts: "rs"},
	{Short: "rs", Kind: "ReplicaSet", APIVersion: "apps/v1", Resource: "replicasets", Namespaced: true, Workload: true, Adopts: "pod"},
	{Short: "sts", Kind: "StatefulSet", APIVersion: "apps/v1", Resource: "statefulsets", Namespaced: true, Workload: true},
	{Short: "job", Kind: "Job", APIVersion: "batch/v1", Resource: "jobs", Namespaced: true, DefaultPolicy: Orphan},
	{Short: "cronjob", Kind: "CronJob", APIVersion: "batch/v1", Resource: "cronjobs", Namespaced: true},
	// Events are never owners (BannedOwners) and their strategy returns
	// Unsupported, so deleting one never sets GC finalizers. The GC ignores
	// them (DefaultIgnoredResources).
	{Short: "event", Kind: "Event", APIVersion: "v1", Resource: "events", Namespaced: true, DefaultPolicy: Unsupported},
	{Short: "ns", Kind: "Namespace", APIVersion: "v1", Resource: "namespaces"},
	{Short: "pv", Kind: "PersistentVolume", APIVersion: "v1", Resource: "persistentvolumes"},
	{Short: "crd", Kind: "CustomResourceDefinition", APIVersion: "apiextensions.k8s.io/v1", Resource: "customresourcedefinitions"},
	// cascade's own custom kinds: a namespaced workload that adopts Pods
	// (impl's adopting controller manages it) and a cluster-scoped kind.
	{Short: "herd", Kind: "Herd", APIVersion: "cascade.dev/v1", Resource: "herds", Namespaced: true, Workload: true, Custom: true, CRDName: "herds.cascade.dev", Adopts: "pod"},
	{Short: "widget", Kind: "Widget", APIVersion: "cascade.dev/v1", Resource: "widgets", Namespaced: true, Custom: true, CRDName: "widgets.cascade.dev"},
	{Short: "gizmo", Kind: "Gizmo", APIVersion: "cascade.dev/v1", Resource: "gizmos", Custom: true, CRDName: "gizmos.cascade.dev"},
}

// NumKinds is len(Kinds); watch queues are a fixed array of this size.
const NumKinds = 16

func init() {
	if len(Kinds) != NumKinds {
		panic("model: NumKinds must equal len(Kinds)")
	}
	// KindByName, and identKeyIs, rely on one entry per kind name.
	for i := range Kinds {
		if k, _ := KindByName(Kinds[i].Kind); k != KindID(i) {
			panic("model: kind " + Kinds[i].Kind + " is in Kinds twice")
		}
	}
}

// KindID indexes Kinds.
type KindID uint8

// NoKind is the KindID of a kind the model does not serve.
const NoKind KindID = 255

// Info returns the kind's table entry.
func (k KindID) Info() *KindInfo { return &Kinds[k] }

// KindByShort finds a kind by its trace spelling.
func KindByShort(short string) (KindID, bool) {
	for i := range Kinds {
		if Kinds[i].Short == short {
			return KindID(i), true
		}
	}
	return NoKind, false
}

// KindByName finds a kind by its API kind name, as ownerReferences carry it.
func KindByName(kind string) (KindID, bool) {
	for i := range Kinds {
		if Kinds[i].Kind == kind {
			return KindID(i), true
		}
	}
	return NoKind, false
}

// kindForCRD returns the custom kind a CRD of this name serves.
func kindForCRD(name string) (KindID, bool) {
	for i := range Kinds {
		if Kinds[i].Custom && Kinds[i].CRDName == name {
			return KindID(i), true
		}
	}
	return NoKind, false
}

// Finalizer names with meaning to the API server and the GC
// (metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents).
const (
	FinalizerOrphan     = "orphan"
	FinalizerForeground = "foregroundDeletion"
	// FinalizerNamespace stands for spec.finalizers=["kubernetes"] of a
	// Namespace; only the namespace controller removes it, and it is not
	// among the controllers cascade runs, so a deleted namespace stays
	// Terminating.
	FinalizerNamespace = "kubernetes"
	// FinalizerCRDCleanup is the apiextensions-apiserver finalizer that
	// deletes a CRD's custom resources before the CRD goes away.
	FinalizerCRDCleanup = "customresourcecleanup.apiextensions.k8s.io"
)

// NamespaceNameLabel is the label the API server sets on every Namespace
// to its name.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// DefaultSelectorLabel is the selector label of an adopting workload
// whose trace gives no selector= (harness/driver uses the same).
const DefaultSelectorLabel = "cascade.dev/selected-by"

// ProtectionLabel is OpenKruise's deletion-protection label; its values are
// ProtectAlways and ProtectCascading.
const (
	ProtectionLabel  = "policy.kruise.io/delete-protection"
	ProtectAlways    = "Always"
	ProtectCascading = "Cascading"
)
