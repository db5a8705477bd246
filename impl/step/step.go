// Package step holds what impl's steppable components share: the
// scheduling Mode, the trace spelling of object keys (Key, ParseKey and
// the short kind names of model/kinds.go), and ErrNotEnabled, which a
// stepped call returns when the step it names cannot be taken now.
//
// A trace names objects as kind/name or kind/namespace/name with short
// kinds (pod, cm, secret, rc, deploy, rs, sts, job, cronjob, event, ns, pv,
// crd, herd, widget, gizmo). A key written without a namespace means the
// namespace "default" for namespaced kinds and no namespace for
// cluster-scoped ones. A GC work item of a cluster-scoped kind may carry a
// namespace (a virtual owner node inherits its dependent's), which the key
// then spells out; a kind the table does not know is written with its API
// kind name, as ownerReferences carry it (UnknownKind/thing).
package step

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Mode chooses how a component schedules its work.
type Mode int

const (
	// Auto runs informers, the graph builder and the workers concurrently,
	// as kube-controller-manager does.
	Auto Mode = iota
	// Stepped holds every informer event and work item until the caller
	// names it, so that a model trace replays one step per call.
	Stepped
)

// String returns "auto" or "stepped".
func (m Mode) String() string {
	if m == Stepped {
		return "stepped"
	}
	return "auto"
}

// DefaultNamespace is the namespace of a namespaced key written without one.
const DefaultNamespace = "default"

// Kind is one row of the short-name table (model/kinds.go).
type Kind struct {
	Short      string
	Kind       string
	Group      string
	Version    string
	Resource   string
	Namespaced bool
}

// GVR returns the kind's resource.
func (k Kind) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Resource}
}

// Kinds is the table of kinds traces name by short spelling.
var Kinds = []Kind{
	{"pod", "Pod", "", "v1", "pods", true},
	{"cm", "ConfigMap", "", "v1", "configmaps", true},
	{"secret", "Secret", "", "v1", "secrets", true},
	{"rc", "ReplicationController", "", "v1", "replicationcontrollers", true},
	{"deploy", "Deployment", "apps", "v1", "deployments", true},
	{"rs", "ReplicaSet", "apps", "v1", "replicasets", true},
	{"sts", "StatefulSet", "apps", "v1", "statefulsets", true},
	{"job", "Job", "batch", "v1", "jobs", true},
	{"cronjob", "CronJob", "batch", "v1", "cronjobs", true},
	{"event", "Event", "", "v1", "events", true},
	{"ns", "Namespace", "", "v1", "namespaces", false},
	{"pv", "PersistentVolume", "", "v1", "persistentvolumes", false},
	{"crd", "CustomResourceDefinition", "apiextensions.k8s.io", "v1", "customresourcedefinitions", false},
	{"herd", "Herd", "cascade.dev", "v1", "herds", true},
	{"widget", "Widget", "cascade.dev", "v1", "widgets", true},
	{"gizmo", "Gizmo", "cascade.dev", "v1", "gizmos", false},
}

// KindByShort finds a kind by its trace spelling.
func KindByShort(short string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Short == short {
			return k, true
		}
	}
	return Kind{}, false
}

// KindByName finds a kind by its API kind name.
func KindByName(kind string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// Key names an object or a GC item the way a trace does.
type Key struct {
	// Kind is the API kind name ("ReplicaSet"), or the kind as an
	// ownerReference wrote it when the table does not know it.
	Kind      string
	Namespace string
	Name      string
	// UID, when set, narrows the key to one incarnation (a trace's uid=
	// label, resolved by the caller).
	UID types.UID
}

// ParseKey reads kind/name or kind/namespace/name.
func ParseKey(s string) (Key, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return Key{}, fmt.Errorf("expected kind/name or kind/namespace/name, got %q", s)
	}
	for i, p := range parts {
		if p == "" && !(i == 1 && len(parts) == 3) { // kind//name: a namespaced kind at cluster scope
			return Key{}, fmt.Errorf("expected kind/name or kind/namespace/name, got %q", s)
		}
	}
	k := Key{Kind: parts[0], Name: parts[len(parts)-1]}
	kind, known := KindByShort(parts[0])
	if !known {
		kind, known = KindByName(parts[0])
	}
	if known {
		k.Kind = kind.Kind
	}
	switch {
	case len(parts) == 3:
		k.Namespace = parts[1]
	case known && kind.Namespaced:
		k.Namespace = DefaultNamespace
	}
	return k, nil
}

// String renders the key in its canonical trace spelling; two keys name
// the same thing exactly when their strings are equal (UIDs aside).
func (k Key) String() string {
	kind, known := KindByName(k.Kind)
	prefix := k.Kind
	if known {
		prefix = kind.Short
	}
	switch {
	case k.Namespace == "" && known && kind.Namespaced:
		// a namespaced kind at cluster scope: the virtual node of a
		// cluster-scoped dependent's reference (model.ObjKey)
		return prefix + "//" + k.Name
	case k.Namespace == "":
		return prefix + "/" + k.Name
	case known && !kind.Namespaced:
		// a cluster-scoped identity with a namespace: a virtual node's
		return prefix + "/" + k.Namespace + "/" + k.Name
	case k.Namespace == DefaultNamespace:
		return prefix + "/" + k.Name
	}
	return prefix + "/" + k.Namespace + "/" + k.Name
}

// Matches reports whether the key names an object with these coordinates.
func (k Key) Matches(kind, namespace, name string, uid types.UID) bool {
	if k.UID != "" && k.UID != uid {
		return false
	}
	return k.String() == (Key{Kind: kind, Namespace: namespace, Name: name}).String()
}

// ErrNotEnabled is wrapped by every stepped call that cannot take the step
// it names in the current state (the model's ErrNotEnabled): nothing
// happened, and the caller may try another step.
var ErrNotEnabled = errors.New("step not enabled")

// NotEnabled returns an error wrapping ErrNotEnabled.
func NotEnabled(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotEnabled}, args...)...)
}
