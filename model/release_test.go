package model

import "testing"

// TestReleaseTable: each change holds from its first release on and not
// in the patch before; releases parse only as v1.MINOR[.PATCH].
func TestReleaseTable(t *testing.T) {
	for c := Change(0); c < numChanges; c++ {
		since := ReleaseChanges[c].Since
		before := Release{since.Major, since.Minor - 1, 99}
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
	if r, err := ParseRelease("v1.33.13"); err != nil || r != (Release{1, 33, 13}) {
		t.Errorf("ParseRelease(v1.33.13) = %v, %v", r, err)
	}
	k, _ := KnownRaceByID(KnownOwnerChangeBeforeDelete)
	if !k.PresentIn(Release{1, 33, 13}) || k.PresentIn(Release{1, 34, 0}) {
		t.Errorf("%s releases %s", k.ID, k.Releases)
	}
}
