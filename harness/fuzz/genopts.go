package fuzz

import (
	"slices"
	"strconv"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/model"
)

// The options of random client steps: how an owner reference is written
// (controller and blockOwnerDeletion true, false or left out; a UID other
// than the live owner's), the preconditions and dry run of a delete, the
// resourceVersion precondition of an update, and the principal. Each is
// drawn in a minority of steps, so that the plain request stays the
// common case and every option still turns up in every campaign.

// refFlags draws the flags of a reference: controller and
// blockOwnerDeletion each true in three draws of six, false in two and
// left out in one.
func (g *gen) refFlags(t *rapid.T) string {
	var out string
	switch rapid.IntRange(0, 5).Draw(t, "controller") {
	case 0, 1, 2:
		out += ",controller"
	case 5:
		out += ",controller=unset"
	}
	switch rapid.IntRange(0, 5).Draw(t, "block") {
	case 0, 1, 2:
		out += ",block"
	case 5:
		out += ",block=unset"
	}
	return out
}

// uidOf draws a UID for a reference to or a precondition on key other
// than what the name resolves to: a stepped run names an earlier
// incarnation of key when there was one (a stale UID whose name exists
// again, which the GC must not take for the live object), else a UID no
// object has; a concurrent run, which has no state, names key's first
// incarnation (stale once it was recreated) or a UID no object has.
func (g *gen) uidOf(t *rapid.T, key string) string {
	ghost := "ghost-" + rapid.SampledFrom(g.u.Names).Draw(t, "ghost")
	if g.state == nil {
		if rapid.Bool().Draw(t, "uid-first") {
			return key
		}
		return ghost
	}
	s := g.state()
	var labels []string
	live := lookupKey(s, key)
	for i, in := range s.UIDs {
		u := model.UID(i + 1)
		if in.Kind == model.NoKind || (live != nil && live.UID == u) {
			continue
		}
		if o := s.Get(u); o == nil && model.ObjKey(in.Kind, in.Namespace, in.Name) == canonicalKey(key) {
			labels = append(labels, s.UIDLabel(u))
		}
	}
	if len(labels) == 0 || rapid.IntRange(0, 3).Draw(t, "uid-ghost") == 0 {
		return ghost
	}
	return rapid.SampledFrom(labels).Draw(t, "uid-stale")
}

// canonicalKey writes key as model.ObjKey does (the default namespace
// left out).
func canonicalKey(key string) string {
	k, ns, name := split(key)
	kind, ok := model.KindByShort(k)
	if !ok {
		return key
	}
	if ns == "" && kind.Info().Namespaced {
		ns = model.DefaultNamespace
	}
	return model.ObjKey(kind, ns, name)
}

// deleteOptions draws a delete's preconditions and dry run: a UID
// precondition in one delete of six (the live UID, a stale one or none
// that exists), a resourceVersion precondition in one of six (the live
// one or a stale one), dry run in one of ten.
func (g *gen) deleteOptions(t *rapid.T, key string) string {
	var out string
	if rapid.IntRange(0, 5).Draw(t, "if-uid") == 0 {
		sym := g.uidOf(t, key)
		if g.state != nil && rapid.Bool().Draw(t, "if-uid-live") {
			if o := lookupKey(g.state(), key); o != nil {
				sym = g.state().UIDLabel(o.UID)
			}
		}
		out += " if-uid=" + sym
	}
	if rv := g.rv(t, key, "delete-if-rv"); rv > 0 {
		out += " if-rv=" + strconv.Itoa(rv)
	}
	if rapid.IntRange(0, 9).Draw(t, "dry-run") == 0 {
		out += " dry-run"
	}
	return out
}

// updateOptions draws the resourceVersion precondition of an update step
// and its principal.
func (g *gen) updateOptions(t *rapid.T, key string) string {
	var out string
	if rv := g.rv(t, key, "update-if-rv"); rv > 0 {
		out += " if-rv=" + strconv.Itoa(rv)
	}
	return out + g.principal(t)
}

// rv draws, in one step of six, a resourceVersion precondition on key: in
// a stepped run the object's current one (the model's per-object count,
// which the driver maps to the live resourceVersion) or the one before;
// in a concurrent run a small count, which the driver sends as a stale
// resourceVersion. 0: none.
func (g *gen) rv(t *rapid.T, key, label string) int {
	if rapid.IntRange(0, 5).Draw(t, label) != 0 {
		return 0
	}
	if g.state != nil {
		if o := lookupKey(g.state(), key); o != nil {
			if o.RV > 1 && rapid.Bool().Draw(t, label+"-stale") {
				return o.RV - 1
			}
			return max(o.RV, 1)
		}
	}
	return rapid.IntRange(1, 3).Draw(t, label+"-n")
}

// principal draws as=limited, a principal without update on
// */finalizers, in one step of ten when the target has one.
func (g *gen) principal(t *rapid.T) string {
	if g.limited && rapid.IntRange(0, 9).Draw(t, "limited") == 0 {
		return " as=limited"
	}
	return ""
}

// served reports whether a run may create objects of the kind short now:
// a custom kind only once its CRD was created (and, in a stepped run,
// still exists).
func (g *gen) served(short string) bool {
	kind, ok := model.KindByShort(short)
	if !ok || !kind.Info().Custom {
		return ok
	}
	crd := "crd/" + kind.Info().CRDName
	if g.state != nil {
		return lookupKey(g.state(), crd) != nil
	}
	return false // a concurrent run creates custom resources in crdFamily only
}

// servedKinds are the universe's kinds the run may create now.
func (g *gen) servedKinds() []string {
	return slices.DeleteFunc(slices.Clone(g.u.Kinds), func(k string) bool { return !g.served(k) })
}

// crd draws the step that brings custom resources into a run: the create
// of the CRD of one of the run's custom kinds when it does not exist,
// else a create of a custom resource of it or, in one draw of three in a
// stepped run, the delete of a live one.
func (g *gen) crd(t *rapid.T) string {
	var custom []string
	for _, k := range g.u.customKinds() {
		if g.kinds == nil || slices.Contains(g.kinds, k) {
			custom = append(custom, k)
		}
	}
	if len(custom) == 0 {
		return g.create(t)
	}
	short := rapid.SampledFrom(custom).Draw(t, "crd-kind")
	kind, _ := model.KindByShort(short)
	if !g.served(short) {
		key := "crd/" + kind.Info().CRDName
		g.remember(key)
		return "create " + key
	}
	if g.state != nil && rapid.IntRange(0, 2).Draw(t, "crd-delete") == 0 {
		// a custom resource's delete: few of the run's objects are
		// custom, so that a delete of any object seldom meets one
		var live []string
		for _, k := range liveKeys(g.state()) {
			if kk, _, _ := split(k); kk == short {
				live = append(live, k)
			}
		}
		if len(live) > 0 {
			return g.deleteOf(t, rapid.SampledFrom(live).Draw(t, "crd-delete-target"))
		}
	}
	return g.createKey(t, g.keyOf(t, short, "target"))
}

// crdFamily is the crd action of a concurrent run, for one client: the
// create of a CRD, two custom resources of its kind, the second owned
// by the first, and in half the draws the first's delete. One client
// sends them in order, so no request meets a resource that is not served
// yet; the keys are not remembered, so that no other client's step does
// either. The CRD is not deleted: apiextensions would remove its
// resources without an audit record, which no history can span
// (history.FromAudit refuses it); stepped runs delete CRDs.
func (g *gen) crdFamily(t *rapid.T) []string {
	custom := g.u.customKinds()
	if len(custom) == 0 {
		return nil
	}
	short := rapid.SampledFrom(custom).Draw(t, "crd-kind")
	kind, _ := model.KindByShort(short)
	crd := "crd/" + kind.Info().CRDName
	a, b := g.keyOf(t, short, "crd-a"), g.keyOf(t, short, "crd-b")
	lines := []string{"create " + crd, "create " + a}
	if b != a {
		lines = append(lines, "create "+b+" owner="+g.refTo(t, a, b))
	}
	if rapid.Bool().Draw(t, "crd-end") {
		lines = append(lines, g.deleteOf(t, a))
	}
	return lines
}
