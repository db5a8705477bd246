package model

import "testing"

// TestReleaseTable: each change holds from its first release on and not
// in the patch before; releases parse only as v1.MINOR[.PATCH].
func TestReleaseTable(t *testing.T) {
	for c := Change(0); c < numChanges; c++ {
		since := ReleaseChanges[c].Since
		before := Release{Major: since.Major, Minor: since.Minor - 1, Patch: 99}
		if !since.Has(c) || before.Has(c) {
			t.Errorf("%s: %s has it %v, %s has it %v", c, since, since.Has(c), before, before.Has(c))
		}
		if ReleaseChanges[c].PR == "" || ReleaseChanges[c].Where == "" {
			t.Errorf("%s cites no upstream change", c)
		}
	}
	if !(Release{}).Has(ChangeGCDeleteRV) {
		t.Error("the zero Release is not the default release")
	}
	for _, bad := range []string{"", "garbage", "v2.1.0", "v1", "v1.x.3", "v1.33.-1", "v1.33.4.5"} {
		if _, err := ParseRelease(bad); err == nil {
			t.Errorf("ParseRelease(%q) accepted it", bad)
		}
	}
	if r, err := ParseRelease("v1.33.13"); err != nil || r != (Release{Major: 1, Minor: 33, Patch: 13}) {
		t.Errorf("ParseRelease(v1.33.13) = %v, %v", r, err)
	}
	k, _ := KnownRaceByID(KnownOwnerChangeBeforeDelete)
	if !k.PresentIn(Release{Major: 1, Minor: 33, Patch: 13}) || k.PresentIn(Release{Major: 1, Minor: 34}) {
		t.Errorf("%s releases %s", k.ID, k.Releases)
	}
}

// TestSkewJudgesEachComponentByItsRelease: a control plane mid-upgrade,
// kube-apiserver v1.34.4 with kube-controller-manager v1.33.13, answers
// as the v1.34 API server does (a PUT of a removed object with a uid
// precondition: 404) and collects garbage as the v1.33 GC does (no
// resourceVersion precondition on its DELETE), so kubernetes#114603 is
// that control plane's known race; the other way round, neither.
func TestSkewJudgesEachComponentByItsRelease(t *testing.T) {
	v133, v134 := Release{Major: 1, Minor: 33, Patch: 13}, Release{Major: 1, Minor: 34, Patch: 4}
	up := v134.WithKCM(v133)
	if !up.Skewed() || up.APIServer() != v134 || up.KCM() != v133 {
		t.Fatalf("%v: apiserver %v, kcm %v", up, up.APIServer(), up.KCM())
	}
	if got := up.String(); got != "v1.34.4 (kube-controller-manager v1.33.13)" {
		t.Errorf("String() = %q", got)
	}
	if !up.Has(ChangeUpdateRemovedNotFound) || up.Has(ChangeGCDeleteRV) {
		t.Errorf("%v: update-removed-not-found %v (want true), gc-delete-rv %v (want false)", up, up.Has(ChangeUpdateRemovedNotFound), up.Has(ChangeGCDeleteRV))
	}
	if k, why := KnownIn(KnownOwnerChangeBeforeDelete, up); k == "" {
		t.Errorf("%v does not carry %s: %s", up, KnownOwnerChangeBeforeDelete, why)
	}
	if k, _ := KnownIn(KnownRetryWithoutRV, up); k != "" {
		t.Errorf("%v carries %s, whose retry its v1.33 GC cannot send", up, KnownRetryWithoutRV)
	}
	down := v133.WithKCM(v134)
	if down.Has(ChangeUpdateRemovedNotFound) || !down.Has(ChangeGCDeleteRV) {
		t.Errorf("%v: update-removed-not-found %v (want false), gc-delete-rv %v (want true)", down, down.Has(ChangeUpdateRemovedNotFound), down.Has(ChangeGCDeleteRV))
	}
	if k, _ := KnownIn(KnownOwnerChangeBeforeDelete, down); k != "" {
		t.Errorf("%v carries %s", down, KnownOwnerChangeBeforeDelete)
	}
	// no skew is no skew, and the zero Release stays the default
	if same := v134.WithKCM(v134); same.Skewed() || same != v134 {
		t.Errorf("v1.34.4 with kube-controller-manager v1.34.4 = %#v", same)
	}
	if d := (Release{}).WithKCM(Release{}); d != DefaultRelease {
		t.Errorf("the default with the default kcm = %v", d)
	}
	// a trace's range holds a skewed control plane when it holds both
	for _, c := range []struct {
		rr   string
		want bool
	}{{"v1.33..v1.34", true}, {">=v1.34", false}, {"<=v1.33", false}, {">=v1.33", true}} {
		rr, err := ParseReleaseRange(c.rr)
		if err != nil {
			t.Fatal(err)
		}
		if got := rr.Contains(up); got != c.want {
			t.Errorf("%s contains %v: %v, want %v", c.rr, up, got, c.want)
		}
	}
	if !v133.Less(up) || !up.Less(Release{Major: 1, Minor: 34, Patch: 5}) || !v134.Less(v134.WithKCM(Release{Major: 1, Minor: 35})) || !up.Less(v134) {
		t.Error("Less does not order by kube-apiserver's release, then kube-controller-manager's")
	}
	for c := Change(0); c < numChanges; c++ {
		if comp := ReleaseChanges[c].Component; comp != APIServer && comp != ControllerManager {
			t.Errorf("%s names no component", c)
		}
	}
	for _, k := range KnownRaces {
		if !k.Releases.All() && k.Component == EveryComponent {
			t.Errorf("%s has releases %s but names no component", k.ID, k.Releases)
		}
	}
}
