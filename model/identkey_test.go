package model

import (
	"strings"
	"testing"
)

// TestLastSegmentsDiffer: names differ after their last slash exactly when
// lastSegmentsDiffer says so, and identKeyIs and identKeysEqual, which
// return false on it, agree with comparing the keys for names with
// slashes at either end, in the middle, empty, and suffixes of one
// another.
func TestLastSegmentsDiffer(t *testing.T) {
	names := []string{"", "a", "b", "ab", "ba", "p-1", "p-2", "q-1", "x/a", "a/", "/a", "/", "a/b", "b/b", "ns1/a", "pod/p-1", "x//a"}
	last := func(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }
	for _, a := range names {
		for _, b := range names {
			if got, want := lastSegmentsDiffer(a, b), last(a) != last(b); got != want {
				t.Errorf("lastSegmentsDiffer(%q, %q) = %v, want %v", a, b, got, want)
			}
		}
	}
	for _, kind := range []string{"Pod", "Namespace", "Frob"} {
		for _, a := range names {
			id := Identity{Kind: kind, Namespace: "ns1", Name: a, UID: 1}
			for _, b := range names {
				other := Identity{Kind: kind, Namespace: "ns1", Name: b, UID: 2}
				if got, want := identKeysEqual(&id, &other), identKey(id) == identKey(other); got != want {
					t.Errorf("identKeysEqual(%+v, %+v) = %v, want %v", id, other, got, want)
				}
				for k := range Kinds {
					tg := Target{Kind: KindID(k), Namespace: "ns1", Name: b}
					if got, want := identKeyIs(heap{}, &id, &tg), identKey(id) == tg.String(); got != want {
						t.Errorf("identKeyIs(%+v, %+v) = %v, want %v", id, tg, got, want)
					}
				}
			}
		}
	}
}
