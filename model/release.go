package model

import (
	"fmt"
	"strconv"
	"strings"
)

// This file is the one table of release-dependent semantics: what the
// model (and harness/lin) do differently for the Kubernetes release whose
// kube-apiserver and kube-controller-manager are judged. Each entry is an
// upstream change, read in the sources of the releases on either side of
// it, with the first release that carries it.

// Release is a Kubernetes release, v1.MINOR.PATCH: that of the control
// plane judged, kube-apiserver's and kube-controller-manager's alike, or,
// when the two differ (version skew, as in the middle of an upgrade, when
// kube-controller-manager may be one minor older), kube-apiserver's with
// kube-controller-manager's beside it (WithKCM). The zero value stands
// for DefaultRelease (Model.Release, lin.Options.Release), so that a
// Model{} judges the newest release.
//
// Each entry of the release table belongs to one component (Component),
// and Has answers with that component's release: a skewed control plane
// is judged with its API server's answers and its garbage collector's
// behaviour, each of its own release. Nothing else needs to know about
// skew: the model and harness/lin carry the Release as they did.
type Release struct {
	Major, Minor, Patch int
	// kcm is kube-controller-manager's release when it is not the one
	// above; the zero value when it is.
	kcm version
}

// version is a release without skew.
type version struct{ Major, Minor, Patch int }

// Component is a control-plane component whose release decides some of
// the semantics (ReleaseChange.Component, KnownRace.Component).
type Component uint8

// Components.
const (
	// EveryComponent: a release range of a known race that says nothing
	// of a component holds for a skewed control plane only if it holds
	// for the release of each.
	EveryComponent Component = iota
	// APIServer is kube-apiserver (k8s.io/apiserver's registry and
	// storage).
	APIServer
	// ControllerManager is kube-controller-manager: its garbage
	// collector.
	ControllerManager
)

func (c Component) String() string {
	switch c {
	case APIServer:
		return "kube-apiserver"
	case ControllerManager:
		return "kube-controller-manager"
	}
	return "every component"
}

// WithKCM returns r (DefaultRelease for the zero value) with
// kube-controller-manager at release k: skewed when k differs from r,
// as r.APIServer() when it does not.
func (r Release) WithKCM(k Release) Release {
	r = r.Or().APIServer()
	if k = k.Or().APIServer(); k != r {
		r.kcm = version{k.Major, k.Minor, k.Patch}
	}
	return r
}

// Skewed reports whether kube-controller-manager's release differs from
// kube-apiserver's.
func (r Release) Skewed() bool { return r.kcm != version{} }

// APIServer is kube-apiserver's release, without skew.
func (r Release) APIServer() Release {
	r.kcm = version{}
	return r
}

// KCM is kube-controller-manager's release, without skew.
func (r Release) KCM() Release {
	if !r.Skewed() {
		return r
	}
	return Release{Major: r.kcm.Major, Minor: r.kcm.Minor, Patch: r.kcm.Patch}
}

// Of is the release of component c, without skew; r itself for
// EveryComponent.
func (r Release) Of(c Component) Release {
	switch c {
	case APIServer:
		return r.APIServer()
	case ControllerManager:
		return r.KCM()
	}
	return r
}

// DefaultRelease is the release the control plane is built at by default
// (hack/kube/build.sh, the Makefile's KUBE_VERSION) and the model follows
// when no release is named.
var DefaultRelease = Release{Major: 1, Minor: 37, Patch: 2}

// OldestRelease is the oldest release the model's release table was
// read against: the oldest minor hack/kube builds (hack/kube/v1.30). An
// older release is judged with the semantics the table gives releases
// before its first change, and a newer one than DefaultRelease with
// DefaultRelease's until the table says otherwise (how a new release is
// added); cascade says so when it names the release it judges.
var OldestRelease = Release{Major: 1, Minor: 30}

// ParseRelease reads "v1.33.13" (the leading v may be left out; "v1.33"
// stands for v1.33.0).
func ParseRelease(s string) (Release, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Release{}, fmt.Errorf("%q is not a Kubernetes release of the form v1.MINOR.PATCH (for example %s)", s, DefaultRelease)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || p == "" || p[0] == '+' {
			return Release{}, fmt.Errorf("%q is not a Kubernetes release of the form v1.MINOR.PATCH (for example %s)", s, DefaultRelease)
		}
		n[i] = v
	}
	if n[0] != 1 {
		return Release{}, fmt.Errorf("%q: cascade models Kubernetes v1 releases only", s)
	}
	return Release{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// Or returns r, or DefaultRelease for the zero value.
func (r Release) Or() Release {
	if r == (Release{}) {
		return DefaultRelease
	}
	return r
}

// String is "v1.37.2", or for a skewed control plane "v1.34.4
// (kube-controller-manager v1.33.13)".
func (r Release) String() string {
	r = r.Or()
	s := fmt.Sprintf("v%d.%d.%d", r.Major, r.Minor, r.Patch)
	if r.Skewed() {
		s += fmt.Sprintf(" (kube-controller-manager v%d.%d.%d)", r.kcm.Major, r.kcm.Minor, r.kcm.Patch)
	}
	return s
}

// Less orders releases by kube-apiserver's, then by
// kube-controller-manager's.
func (r Release) Less(o Release) bool {
	r, o = r.Or(), o.Or()
	if a, b := r.triple(), o.triple(); a != b {
		return a.less(b)
	}
	return r.KCM().triple().less(o.KCM().triple())
}

// triple is kube-apiserver's release.
func (r Release) triple() version { return version{r.Major, r.Minor, r.Patch} }

func (a version) less(b version) bool {
	if a.Major != b.Major {
		return a.Major < b.Major
	}
	if a.Minor != b.Minor {
		return a.Minor < b.Minor
	}
	return a.Patch < b.Patch
}

// Change is a release-dependent behaviour (ReleaseChanges).
type Change uint8

// The release-dependent behaviours.
const (
	// ChangeGCDeleteRV: the GC's DELETE carries the resourceVersion its
	// GET read as a precondition, and deleteObject retries without it
	// when the ownerReferences are unchanged. Before it a client write
	// between the GC's GET and its DELETE went unnoticed
	// (KnownOwnerChangeBeforeDelete, kubernetes#114603).
	ChangeGCDeleteRV Change = iota
	// ChangeUpdateRemovedNotFound: an update whose object is gone
	// answers 404 NotFound even when it carries a UID precondition
	// (metadata.uid of a PUT); before it, 409 Conflict.
	ChangeUpdateRemovedNotFound
	// ChangeGCInitialSyncTimeout: the GC's workers start after a bounded
	// wait for its monitors to sync and resyncs no longer pause them.
	ChangeGCInitialSyncTimeout
	// ChangeGCDeleteNotFoundVirtual: a NotFound from the GC's DELETE
	// (deleteObject) queues a virtual delete event for the item and
	// forgets it. Before it the NotFound was an error to retry (the item
	// requeued, rate-limited: its next attemptToDelete GETs 404 and
	// queues the virtual event then). The same change made deleteObject
	// report an object found gone after a 409 as NotFound, where it was
	// a success; the model takes the DELETE and that GET in one step, so
	// only the first difference shows in it.
	ChangeGCDeleteNotFoundVirtual
	numChanges
)

// ReleaseChange documents a Change: where upstream it was made and the
// first release carrying it.
type ReleaseChange struct {
	Name string
	// PR is the upstream pull request; Where the code it changed.
	PR, Where string
	Since     Release
	// Component is the component whose release carries it.
	Component Component
	// ReadBy names the code that reads it ("" if nothing does: documented
	// only).
	ReadBy string
	Doc    string
}

// ReleaseChanges is the table, indexed by Change.
var ReleaseChanges = [numChanges]ReleaseChange{
	ChangeGCDeleteRV: {"gc-delete-rv-precondition", "kubernetes#132632", "pkg/controller/garbagecollector/operations.go deleteObject", Release{Major: 1, Minor: 34}, ControllerManager,
		"model deleteWrite, model checkSolidOwner, lin gcDelete",
		"attemptToDeleteItem passes latest.ResourceVersion and latest.OwnerReferences to deleteObject, which sends them as a precondition and retries without it on 409 when the ownerReferences are unchanged; v1.33.13's deleteObject sends the UID precondition only."},
	ChangeUpdateRemovedNotFound: {"update-removed-not-found", "kubernetes#132470", "k8s.io/apiserver v0.34.0 pkg/registry/generic/registry/store.go Store.Update", Release{Major: 1, Minor: 34}, APIServer,
		"model PreconditionAnswers (Semantics.UpdateRemovedConflict), read by lin update (the model sends merge patches, which answer 404 on every release)",
		"Store.Update passes ignoreNotFound only for kinds that allow create on update; k8s.io/apiserver v0.33.13 passes true, so etcd3 GuaranteedUpdate checks the UID precondition against an empty object and answers 409 Conflict."},
	ChangeGCInitialSyncTimeout: {"gc-initial-sync-timeout", "kubernetes#125796", "pkg/controller/garbagecollector/garbagecollector.go Run, Sync", Release{Major: 1, Minor: 32}, ControllerManager,
		"",
		"Run waits at most initialSyncTimeout for the monitors and Sync no longer takes workerLock; before it a resync paused every worker until all monitors synced. The model's `gc sync` is one atomic step, before and after, so nothing reads it; a trace whose outcome depends on it would add the reader."},
	ChangeGCDeleteNotFoundVirtual: {"gc-delete-notfound-virtual-event", "kubernetes#136817", "pkg/controller/garbagecollector/garbagecollector.go attemptToDeleteItem, operations.go deleteObject", Release{Major: 1, Minor: 36}, ControllerManager,
		"model sendWrite",
		"attemptToDeleteItem turns deleteObject's NotFound into enqueueVirtualDeleteEvent and enqueuedVirtualDeleteEventErr (the item is forgotten), and deleteObject returns the GET's NotFound after a 409 (`return liveErr`); v1.35.0 returns the NotFound to attemptToDeleteWorker, which requeues the item rate-limited, and deleteObject returns nil (\"object we wanted to delete is gone, success!\")."},
}

// Has reports whether release r carries change c: whether the release of
// the component c belongs to does (for a skewed control plane, one of
// the two).
func (r Release) Has(c Change) bool {
	return !r.Or().Of(ReleaseChanges[c].Component).Less(ReleaseChanges[c].Since)
}

func (c Change) String() string { return ReleaseChanges[c].Name }

// ReleaseRange is a set of releases: From (inclusive) up to Until
// (exclusive); a zero bound is open.
type ReleaseRange struct {
	From, Until Release
}

// Contains reports whether r is in the range: for a skewed control
// plane, both of its releases.
func (rr ReleaseRange) Contains(r Release) bool {
	r = r.Or()
	if r.Skewed() {
		return rr.Contains(r.APIServer()) && rr.Contains(r.KCM())
	}
	if rr.From != (Release{}) && r.Less(rr.From) {
		return false
	}
	return rr.Until == (Release{}) || r.Less(rr.Until)
}

// All reports whether the range is every release.
func (rr ReleaseRange) All() bool { return rr == ReleaseRange{} }

func (rr ReleaseRange) String() string {
	switch {
	case rr.All():
		return "every release"
	case rr.From == (Release{}):
		return "before " + rr.Until.String()
	case rr.Until == (Release{}):
		return rr.From.String() + " and later"
	}
	return rr.From.String() + " to before " + rr.Until.String()
}

// kubeRelease is the release the model follows: Model.Release, or
// DefaultRelease.
func (m *Model) kubeRelease() Release { return m.Release.Or() }

// ParseReleaseRange reads a trace's `# releases:` value: `<=v1.33`
// (every v1.33 patch and before), `>=v1.34` (v1.34.0 and later), or
// `v1.30..v1.33` (both minors included); a bound with a patch
// (`<=v1.33.5`) ends at that patch.
func ParseReleaseRange(s string) (ReleaseRange, error) {
	s = strings.TrimSpace(s)
	after := func(b string) (Release, error) { // the first release after bound b
		r, err := ParseRelease(b)
		if err != nil {
			return r, err
		}
		if strings.Count(strings.TrimPrefix(b, "v"), ".") == 1 {
			return Release{Major: r.Major, Minor: r.Minor + 1}, nil
		}
		return Release{Major: r.Major, Minor: r.Minor, Patch: r.Patch + 1}, nil
	}
	var rr ReleaseRange
	var err error
	switch lo, hi, isRange := strings.Cut(s, ".."); {
	case strings.HasPrefix(s, "<="):
		rr.Until, err = after(strings.TrimSpace(s[2:]))
	case strings.HasPrefix(s, ">="):
		rr.From, err = ParseRelease(s[2:])
	case isRange:
		if rr.From, err = ParseRelease(lo); err == nil {
			rr.Until, err = after(strings.TrimSpace(hi))
		}
		if err == nil && !rr.From.Less(rr.Until) {
			err = fmt.Errorf("%q is an empty range of releases", s)
		}
	default:
		err = fmt.Errorf("%q is not a range of releases (<=v1.33, >=v1.34 or v1.30..v1.33)", s)
	}
	return rr, err
}

// Last is the newest release of a range bounded above: its last minor
// at patch 0 when Until is a minor's first release (Until itself minus
// one patch otherwise); the zero Release when it has no upper bound.
func (rr ReleaseRange) Last() Release {
	u := rr.Until
	switch {
	case u == (Release{}):
		return Release{}
	case u.Patch > 0:
		return Release{Major: u.Major, Minor: u.Minor, Patch: u.Patch - 1}
	}
	return Release{Major: u.Major, Minor: u.Minor - 1}
}

// MinorRange is r's minor as a `# releases:` header value
// (ParseReleaseRange): "v1.33..v1.33". Traces found on a release other
// than the default carry it, since they may hold on that release only.
// It is kube-apiserver's minor; traces.ReleaseHeaders names a skewed
// control plane's two.
func (r Release) MinorRange() string {
	r = r.Or()
	return fmt.Sprintf("v%d.%d..v%d.%d", r.Major, r.Minor, r.Major, r.Minor)
}
