package fuzz

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/model"
)

// Universe is what random client steps range over: a few names of a few
// kinds in two namespaces, so that random steps keep meeting the same
// objects (owners, dependents, recreations under the same name) instead of
// scattering over fresh ones.
type Universe struct {
	Kinds      []string // short kind names, e.g. cm, pod, rc, pv
	Names      []string // object names
	Namespaces []string // trace namespaces ("default" is the key without a namespace)
	// Protection adds the policy.kruise.io/delete-protection label to
	// some creates and label steps (it needs the webhook).
	Protection bool
}

// customKinds are the kinds of Kinds served by a CRD: a run creates them
// only after the crd action created their CRD.
func (u Universe) customKinds() []string {
	var out []string
	for _, k := range u.Kinds {
		if kind, _ := model.KindByShort(k); kind.Info().Custom {
			out = append(out, k)
		}
	}
	return out
}

// DefaultUniverse is the universe of `cascade fuzz` when none is given:
// every kind of the trace language. Namespaced kinds without and with a
// workload controller, kinds that orphan by default (rc, job), Events
// (never owners), cluster-scoped kinds (pv, ns, and the custom gizmo),
// custom resources (created after their CRD, by the crd action), and
// three namespaces for cross-namespace references. Each run keeps a
// random part of the kinds (gen.swarm).
var DefaultUniverse = Universe{
	Kinds:      []string{"cm", "secret", "pod", "rc", "rs", "deploy", "sts", "job", "cronjob", "event", "pv", "ns", "herd", "widget", "gizmo"},
	Names:      []string{"a", "b", "c", "d"},
	Namespaces: []string{"default", "ns2", "ns3"},
	Protection: true,
}

// Validate checks that the universe names kinds random steps can create.
func (u Universe) Validate() error {
	if len(u.Kinds) == 0 || len(u.Names) == 0 || len(u.Namespaces) == 0 {
		return errors.New("fuzz: the universe needs kinds, names and namespaces")
	}
	for _, k := range u.Kinds {
		_, ok := model.KindByShort(k)
		switch {
		case !ok:
			return fmt.Errorf("fuzz: unknown kind %q (short names as in traces: cm, secret, pod, rc, rs, deploy, pv, ...)", k)
		case k == "crd":
			return fmt.Errorf("fuzz: kind %q is not fuzzed by itself: name a custom kind (herd, widget, gizmo) and runs create its CRD", k)
		}
	}
	if len(u.customKinds()) == len(u.Kinds) {
		return errors.New("fuzz: the universe needs a kind that is not custom (custom resources come after their CRD)")
	}
	return nil
}

// Finalizer is the user finalizer random steps add and remove.
const Finalizer = "cascade.dev/hold"

// selectorLabel is the label workloads select and pods may carry, so that
// workload controllers have something to adopt.
const selectorLabel = "app"

// gen draws client steps. It remembers the keys it has created so far so
// that later steps mostly name objects that may exist; it never looks at
// the cluster, so the same draw gives the same step on every target.
type gen struct {
	u       Universe
	created []string // keys, in the order first created
	// state, when set, is a stepped run's model state now. Steps then
	// name objects that exist, aim at the objects the GC is working on,
	// and draw owner references by relationship (stepstate.go).
	state func() *model.State
	// hot, with state, lists the objects inside a GC or controller
	// decision window (hotKeys).
	hot func() []string
	// kinds and namespaces are those this run creates in: the
	// universe's, or a swarm subset of them.
	kinds, namespaces []string
	// limited: the target has a limited principal, so steps may be
	// sent as=limited.
	limited bool
	// crds: the run offers the crd action (in few runs: on a real GC a
	// new resource waits for the 30-second discovery sync).
	crds bool
}

// swarm draws the run's configuration as swarm testing does (Groce et
// al., "Swarm Testing", ISSTA 2012): each run leaves out a random part of
// the universe's kinds and of the client verbs, so that the remaining
// ones meet each other often enough to build the deep shapes bugs need —
// a cluster-scoped owner of a namespaced dependent, an rc in the middle
// of a chain, a two-object cycle — instead of every run being an even
// mix in which each shape is rare. It returns the verbs the run keeps.
func (g *gen) swarm(t *rapid.T, verbs map[string]func(*rapid.T) string) map[string]func(*rapid.T) string {
	g.kinds = nil
	custom := g.u.customKinds()
	// custom resources in one stepped run of four: the GC's discovery
	// sync is a step here (concurrent runs, which wait out the real
	// one's 30 seconds, draw them in one run of eight)
	g.crds = len(custom) > 0 && rapid.IntRange(0, 3).Draw(t, "swarm-crds") == 0
	for _, k := range g.u.Kinds {
		if slices.Contains(custom, k) && !g.crds {
			continue
		}
		if rapid.Bool().Draw(t, "swarm-kind-"+k) {
			g.kinds = append(g.kinds, k)
		}
	}
	if len(g.kinds) == 0 {
		var plain []string
		for _, k := range g.u.Kinds {
			if !slices.Contains(custom, k) {
				plain = append(plain, k)
			}
		}
		if len(plain) == 0 {
			plain = g.u.Kinds
		}
		g.kinds = []string{rapid.SampledFrom(plain).Draw(t, "swarm-only-kind")}
	}
	// one namespace in half the runs: objects then meet as owners,
	// dependents and adoption candidates more often; both in the others,
	// for references across namespaces
	g.namespaces = g.u.Namespaces
	if len(g.u.Namespaces) > 1 && rapid.Bool().Draw(t, "swarm-one-namespace") {
		g.namespaces = []string{rapid.SampledFrom(g.u.Namespaces).Draw(t, "swarm-namespace")}
	}
	kept := map[string]func(*rapid.T) string{"create": verbs["create"], "delete": verbs["delete"]}
	if g.crds {
		kept["crd"] = verbs["crd"]
	}
	for _, v := range []string{"finalizer", "owner", "label", "scale"} {
		if rapid.Bool().Draw(t, "swarm-verb-"+v) {
			kept[v] = verbs[v]
		}
	}
	return kept
}

// key draws a key of the universe: kind, namespace (namespaced kinds) and
// name.
func (g *gen) key(t *rapid.T, label string) string {
	kinds := g.kinds
	if len(kinds) == 0 {
		kinds = g.u.Kinds
	}
	kinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return !g.served(k) })
	if len(kinds) == 0 {
		kinds = []string{g.u.Kinds[0]}
	}
	k := rapid.SampledFrom(kinds).Draw(t, label+"-kind")
	return g.keyOf(t, k, label)
}

func (g *gen) keyOf(t *rapid.T, short, label string) string {
	kind, _ := model.KindByShort(short)
	name := rapid.SampledFrom(g.u.Names).Draw(t, label+"-name")
	if !kind.Info().Namespaced {
		return short + "/" + name
	}
	namespaces := g.namespaces
	if len(namespaces) == 0 {
		namespaces = g.u.Namespaces
	}
	ns := rapid.SampledFrom(namespaces).Draw(t, label+"-ns")
	if ns == model.DefaultNamespace {
		return short + "/" + name
	}
	return short + "/" + ns + "/" + name
}

// existing draws a key created before, or any key when none was (a
// request on an absent object is a step worth taking too).
func (g *gen) existing(t *rapid.T, label string) string {
	pool := g.created
	if g.state != nil {
		s := g.state()
		pool = liveKeys(s)
		if hot := g.hot(); len(hot) > 0 && rapid.IntRange(0, 2).Draw(t, label+"-hot") == 0 {
			pool = hot
		}
	}
	if len(pool) == 0 || rapid.IntRange(0, 9).Draw(t, label+"-fresh") == 0 {
		return g.key(t, label)
	}
	return rapid.SampledFrom(pool).Draw(t, label)
}

// ownerRef draws an owner= value naming a created object, with the
// dependent's namespace for namespaced owners in its own namespace; in
// one reference of six with an explicit UID (uidOf).
func (g *gen) ownerRef(t *rapid.T, dep string) string {
	owner := ""
	if g.state != nil {
		owner = g.related(t, dep)
	}
	if owner == "" {
		owner = g.existing(t, "owner")
	}
	ref := g.refTo(t, owner, dep)
	if rapid.IntRange(0, 5).Draw(t, "explicit-uid") == 0 {
		ref += ",uid=" + g.uidOf(t, owner)
	}
	return ref
}

// refTo draws an owner= value naming owner from dep: controller and
// blockOwnerDeletion at random (refFlags).
func (g *gen) refTo(t *rapid.T, owner, dep string) string {
	ok, ons, oname := split(owner)
	_, dns, _ := split(dep)
	ref := ok + "/" + oname
	if ons != "" && ons != dns {
		ref = ok + "/" + ons + "/" + oname // a cross-namespace reference, on purpose
	}
	return ref + g.refFlags(t)
}

// fleeting draws an owner that lives only while a dependent naming it is
// created: its create, the dependent's create and its Background delete,
// for one client to send one after the other, within milliseconds. When
// both the owner's events fall within a relist gap of its resource while
// the dependent's arrives, the GC makes the owner a virtual node, finds
// it live, and never sees it come or go (kubernetes#56121): concurrent
// runs draw it under impl's informer-relist fault.
func (g *gen) fleeting(t *rapid.T) []string {
	owner := g.key(t, "fleeting-owner")
	dep := g.key(t, "fleeting-dep")
	for _, k := range []string{owner, dep} {
		if !slices.Contains(g.created, k) {
			g.created = append(g.created, k)
		}
	}
	if dep == owner {
		return []string{"create " + owner}
	}
	return []string{"create " + owner, "create " + dep + " owner=" + g.refTo(t, owner, dep), "delete " + owner}
}

// scoped draws a cluster-scoped owner and a namespaced dependent naming
// it, created one after the other by one client. When the dependent's
// event reaches the GC before the owner's, the GC makes the owner a
// virtual node carrying the dependent's namespace and looks it up
// (kubernetes#54940, lookup-ignores-scope; #124378): concurrent runs
// draw it under impl's informer-lag fault, which makes that order
// likely. Without a cluster-scoped kind in the universe it draws a
// plain create.
func (g *gen) scoped(t *rapid.T) []string {
	var cluster, ns []string
	for _, k := range g.servedKinds() {
		if namespaced(k + "/x") {
			ns = append(ns, k)
		} else {
			cluster = append(cluster, k)
		}
	}
	if len(cluster) == 0 || len(ns) == 0 {
		return []string{"create " + g.key(t, "scoped")}
	}
	owner := g.keyOf(t, rapid.SampledFrom(cluster).Draw(t, "scoped-owner-kind"), "scoped-owner")
	dep := g.keyOf(t, rapid.SampledFrom(ns).Draw(t, "scoped-dep-kind"), "scoped-dep")
	for _, k := range []string{owner, dep} {
		if !slices.Contains(g.created, k) {
			g.created = append(g.created, k)
		}
	}
	return []string{"create " + owner, "create " + dep + " owner=" + g.refTo(t, owner, dep)}
}

// ring draws two objects of one scope that own each other — a create,
// a create naming it as owner, and an add-owner closing the circle, each
// reference blocking in three draws of four — and, in half of the
// draws, a Foreground delete of the first: the foreground cycle the
// GC's cycle-breaking unblock exists for (synchronous GC design,
// "Handling circular dependencies"; no-cycle-unblock). Concurrent runs
// draw it as one client's steps; stepped runs close circles among live
// objects instead (gen.cycle).
func (g *gen) ring(t *rapid.T) []string {
	a := g.key(t, "ring-a")
	_, ans, _ := split(a)
	var peers []string
	for _, k := range g.servedKinds() {
		if namespaced(k+"/x") == namespaced(a) {
			peers = append(peers, k)
		}
	}
	b := rapid.SampledFrom(peers).Draw(t, "ring-b-kind") + "/"
	if ans != "" {
		b += ans + "/"
	}
	b += rapid.SampledFrom(g.u.Names).Draw(t, "ring-b-name")
	if a == b {
		return []string{"create " + a}
	}
	for _, k := range []string{a, b} {
		if !slices.Contains(g.created, k) {
			g.created = append(g.created, k)
		}
	}
	ref := func(owner string) string {
		k, _, name := split(owner)
		r := k + "/" + name
		if rapid.IntRange(0, 3).Draw(t, "ring-block") > 0 {
			r += ",block"
		}
		return r
	}
	lines := []string{"create " + a, "create " + b + " owner=" + ref(a), "add-owner " + a + " " + ref(b)}
	if rapid.Bool().Draw(t, "ring-delete") {
		lines = append(lines, "delete "+a+" propagation=Foreground")
	}
	return lines
}

// split returns a key's kind, namespace ("" for the default namespace or
// cluster-scoped) and name.
func split(key string) (kind, ns, name string) {
	parts := strings.Split(key, "/")
	if len(parts) == 3 {
		return parts[0], parts[1], parts[2]
	}
	return parts[0], "", parts[1]
}

func workload(short string) bool {
	k, _ := model.KindByShort(short)
	return k.Info().Workload
}

// verbs are the client commands of random runs, as rapid action keys:
// each draws one step of its verb as trace text.
func (g *gen) verbs() map[string]func(*rapid.T) string {
	return map[string]func(*rapid.T) string{
		"create":    g.create,
		"delete":    func(t *rapid.T) string { return g.deleteOf(t, g.existing(t, "target")) },
		"finalizer": func(t *rapid.T) string { return g.finalizerOf(t, g.existing(t, "target")) },
		"owner":     func(t *rapid.T) string { return g.ownerOf(t, g.existing(t, "target")) },
		"label":     func(t *rapid.T) string { return g.label(t, g.existing(t, "target")) },
		"scale": func(t *rapid.T) string {
			var workloads []string
			for _, k := range g.created {
				if kind, _, _ := split(k); workload(kind) {
					workloads = append(workloads, k)
				}
			}
			if len(workloads) == 0 {
				return g.create(t) // nothing to scale yet
			}
			key := rapid.SampledFrom(workloads).Draw(t, "target")
			return fmt.Sprintf("scale %s %d", key, rapid.IntRange(0, 2).Draw(t, "replicas")) + g.updateOptions(t, key)
		},
		"crd": g.crd,
	}
}

// onKey draws a step of one of the verbs that change an existing object,
// on key.
func (g *gen) onKey(t *rapid.T, key string) string {
	switch rapid.SampledFrom([]string{"delete", "finalizer", "owner", "label"}).Draw(t, "verb-on-key") {
	case "delete":
		return g.deleteOf(t, key)
	case "finalizer":
		return g.finalizerOf(t, key)
	case "owner":
		return g.ownerOf(t, key)
	}
	return g.label(t, key)
}

func (g *gen) deleteOf(t *rapid.T, key string) string {
	line := "delete " + key
	// the legacy orphanDependents in one delete of eight
	switch p := rapid.IntRange(0, 7).Draw(t, "policy"); {
	case p == 0:
	case p <= 6:
		line += " propagation=" + [...]string{"Background", "Foreground", "Orphan"}[(p-1)%3]
	default:
		line += " orphan=" + strconv.FormatBool(rapid.Bool().Draw(t, "orphan"))
	}
	return line + g.deleteOptions(t, key) + g.principal(t)
}

func (g *gen) finalizerOf(t *rapid.T, key string) string {
	verb := rapid.SampledFrom([]string{"add-finalizer", "remove-finalizer"}).Draw(t, "finalizer-verb")
	return verb + " " + key + " " + Finalizer + g.updateOptions(t, key)
}

// ownerOf draws an add-owner or remove-owner step on key; a stepped run
// removes one of the references the object has.
func (g *gen) ownerOf(t *rapid.T, key string) string {
	if rapid.Bool().Draw(t, "add") {
		return "add-owner " + key + " " + g.ownerRef(t, key) + g.updateOptions(t, key)
	}
	if g.state != nil {
		if o := lookupKey(g.state(), key); o != nil && len(o.Owners) > 0 {
			r := rapid.SampledFrom(o.Owners).Draw(t, "owner-ref")
			return "remove-owner " + key + " " + r.Kind + "/" + r.Name + g.updateOptions(t, key)
		}
	}
	ok, _, oname := split(g.existing(t, "owner"))
	kind, _ := model.KindByShort(ok)
	return "remove-owner " + key + " " + kind.Info().Kind + "/" + oname + g.updateOptions(t, key)
}

// create draws a create step: labels, a finalizer, owners, and for
// workloads a selector and replicas.
func (g *gen) create(t *rapid.T) string { return g.createKey(t, g.key(t, "target")) }

// createKey draws a create step of key.
func (g *gen) createKey(t *rapid.T, key string) string {
	k, _, _ := split(key)
	var b strings.Builder
	b.WriteString("create " + key)
	var labels []string
	if rapid.IntRange(0, 2).Draw(t, "app-label") == 0 {
		labels = append(labels, selectorLabel+"=web")
	}
	if g.u.Protection && rapid.IntRange(0, 5).Draw(t, "protect") == 0 {
		labels = append(labels, model.ProtectionLabel+"="+rapid.SampledFrom([]string{"Always", "Cascading"}).Draw(t, "protection"))
	}
	if len(labels) > 0 {
		slices.Sort(labels)
		b.WriteString(" labels=" + strings.Join(labels, ","))
	}
	if workload(k) {
		// the model keeps no pods for its workloads: kube-controller-
		// manager's ReplicaSet and ReplicationController controllers
		// create theirs, which the histories judge as controller writes;
		// protection's Cascading judgement reads the count
		b.WriteString(" selector=" + selectorLabel + "=web")
		if n := rapid.IntRange(0, 2).Draw(t, "replicas"); n > 0 {
			b.WriteString(" replicas=" + strconv.Itoa(n))
		}
	}
	if rapid.IntRange(0, 3).Draw(t, "hold") == 0 {
		b.WriteString(" finalizers=" + Finalizer)
	}
	for n := rapid.IntRange(0, 2).Draw(t, "owners"); n > 0 && len(g.created) > 0; n-- {
		b.WriteString(" owner=" + g.ownerRef(t, key))
	}
	if rapid.IntRange(0, 19).Draw(t, "unserved-owner") == 0 {
		// an owner of a kind nobody serves: the GC's lookup fails with
		// no such resource, and it deletes the dependent
		b.WriteString(" owner=Frob/" + rapid.SampledFrom(g.u.Names).Draw(t, "unserved-name") + ",uid=frob")
	}
	if !slices.Contains(g.created, key) {
		g.created = append(g.created, key)
	}
	return b.String() + g.principal(t)
}

// label draws a label or unlabel step: protection on and off, or the
// selector label that makes an object adoptable.
func (g *gen) label(t *rapid.T, key string) string {
	opts := g.updateOptions(t, key)
	if g.u.Protection && rapid.Bool().Draw(t, "protection-label") {
		if rapid.Bool().Draw(t, "unlabel") {
			return "unlabel " + key + " " + model.ProtectionLabel + opts
		}
		return "label " + key + " " + model.ProtectionLabel + "=" + rapid.SampledFrom([]string{"Always", "Cascading"}).Draw(t, "protection") + opts
	}
	if rapid.Bool().Draw(t, "unlabel") {
		return "unlabel " + key + " " + selectorLabel + opts
	}
	return "label " + key + " " + selectorLabel + "=web" + opts
}
