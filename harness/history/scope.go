package history

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cascade-k8s/cascade/model"
)

// Scope says which objects belong to one run. harness/driver maps a trace
// namespace X to the real namespace Prefix+"-"+X, a Namespace object ns/X
// to that same real namespace, and any other cluster-scoped object to the
// name Prefix+"-"+name. CustomResourceDefinitions keep their fixed names;
// they are the run's setup, not part of its history, and never in scope.
type Scope struct {
	// Prefix is the driver's prefix (driver.Prefix). Empty means every
	// object of a model kind is in scope, CRDs excepted.
	Prefix string
}

// Contains reports whether an object of kind k with this real namespace
// and name belongs to the run.
func (s Scope) Contains(k model.KindID, namespace, name string) bool {
	if k == model.NoKind || k.Info().Kind == "CustomResourceDefinition" {
		return false
	}
	if s.Prefix == "" {
		return true
	}
	p := s.Prefix + "-"
	if k.Info().Namespaced {
		return strings.HasPrefix(namespace, p)
	}
	return strings.HasPrefix(name, p)
}

// KindOf maps an API group and plural resource name (as audit records and
// request URLs spell them) to a model kind.
func KindOf(group, resource string) (model.KindID, bool) {
	for i := range model.Kinds {
		info := &model.Kinds[i]
		if info.Resource == resource && apiGroup(info.APIVersion) == group {
			return model.KindID(i), true
		}
	}
	return model.NoKind, false
}

// apiGroup returns the group of an apiVersion ("apps/v1" -> "apps",
// "v1" -> "").
func apiGroup(apiVersion string) string {
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		return g
	}
	return ""
}

// Actor names used by the recorders (see Op.Actor).
const (
	ActorGC      = "gc"
	ActorCluster = "cluster"
	// ActorAdopter is impl's adopting controller.
	ActorAdopter = "controller/adopter"
)

// ClientActor is the actor name of the driver's client n.
func ClientActor(n int) string { return "client-" + strconv.Itoa(n) }

// laneRank orders actors into porcupine lanes: the driver's clients by
// number, then the GC, then controllers, then anything else, then writes
// observed by watch.
func laneRank(actor string) (rank, n int) {
	switch {
	case strings.HasPrefix(actor, "client-"):
		if n, err := strconv.Atoi(strings.TrimPrefix(actor, "client-")); err == nil {
			return 0, n
		}
		return 4, 0
	case actor == ActorGC:
		return 1, 0
	case strings.HasPrefix(actor, "controller/"):
		return 2, 0
	case actor == ActorCluster:
		return 5, 0
	}
	return 4, 0
}

// AssignLanes sets every op's ClientID to a stable lane per actor: the
// driver's clients first by number, then "gc", then the controllers
// sorted by name, then other actors sorted, then "cluster". It returns
// the actors in lane order.
func AssignLanes(ops []Op) []string {
	var actors []string
	for i := range ops {
		if !slices.Contains(actors, ops[i].Actor) {
			actors = append(actors, ops[i].Actor)
		}
	}
	slices.SortFunc(actors, func(a, b string) int {
		ra, na := laneRank(a)
		rb, nb := laneRank(b)
		switch {
		case ra != rb:
			return ra - rb
		case na != nb:
			return na - nb
		}
		return strings.Compare(a, b)
	})
	for i := range ops {
		ops[i].ClientID = slices.Index(actors, ops[i].Actor)
	}
	return actors
}

// Merge joins histories recorded separately (say a client-side Recorder's
// and an Observer's), orders the ops by Call and assigns lanes.
func Merge(parts ...[]Op) []Op {
	var out []Op
	for _, p := range parts {
		out = append(out, p...)
	}
	slices.SortStableFunc(out, func(a, b Op) int {
		switch {
		case a.Call < b.Call:
			return -1
		case a.Call > b.Call:
			return 1
		}
		return 0
	})
	AssignLanes(out)
	return out
}

// Key is the store key of an object: kind, real namespace and real name.
type Key struct {
	Kind      model.KindID
	Namespace string
	Name      string
}

// String renders the key as kind/namespace/name (kind/name for
// cluster-scoped kinds), kinds by their trace spelling.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind.Info().Short + "/" + k.Name
	}
	return k.Kind.Info().Short + "/" + k.Namespace + "/" + k.Name
}

// Key returns the key the op writes.
func (op *Op) Key() Key { return Key{op.Kind, op.Namespace, op.Name} }

// Key returns the object's store key.
func (o *Object) Key() Key { return Key{o.Kind, o.Namespace, o.Name} }

// HasFinalizer reports whether the object lists f.
func (o *Object) HasFinalizer(f string) bool { return slices.Contains(o.Finalizers, f) }

// String renders the op on one line for summaries and logs.
func (op *Op) String() string {
	target := op.Key().String()
	if op.Subresource != "" {
		target += "/" + op.Subresource
	}
	out := fmt.Sprintf("%s %s %s", op.Actor, op.Verb, target)
	if op.Verb == Delete && op.Delete != nil {
		if p := op.Delete.Propagation; p != "" {
			out += " propagation=" + p
		}
		if op.Delete.Orphan != nil {
			out += " orphanDependents=" + strconv.FormatBool(*op.Delete.Orphan)
		}
	}
	switch {
	case op.Verb == Observed && op.Removed:
		return out + " (deleted)"
	case op.Verb == Observed:
		return out
	case op.Code == 0:
		return out + " -> no response"
	}
	out += " -> " + strconv.Itoa(op.Code)
	if op.Reason != "" {
		out += " " + op.Reason
	}
	if op.Removed {
		out += " (removed)"
	}
	return out
}
