package target

import (
	"strings"
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/impl/bugs"
)

// TestDefaultRaceFaults: an impl Spec injecting a race bug gets the fault
// its race needs, the largest of each over several bugs; a bug that shows
// without a fault, another target, or a fault already set leaves the Spec
// as it was.
func TestDefaultRaceFaults(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name               string
		spec               Spec
		lag, relist, delay time.Duration
		says               string
	}{
		{"lookup", Spec{Name: Impl, Inject: bugs.Of(bugs.LookupIgnoresScope)}, 200 * ms, 0, 0, "--informer-lag 200ms"},
		{"two races", Spec{Name: Impl, Inject: bugs.Of(bugs.ForgetUnobservedVirtual, bugs.DeleteWithoutRVPrecondition)}, 0, 300 * ms, 200 * ms,
			"--informer-relist 300ms --write-delay 200ms"},
		{"no fault needed", Spec{Name: Impl, Inject: bugs.Of(bugs.NoCycleUnblock)}, 0, 0, 0, ""},
		{"bug-free", Spec{Name: Impl}, 0, 0, 0, ""},
		{"stepped", Spec{Name: ImplStepped, Inject: bugs.Of(bugs.LookupIgnoresScope)}, 0, 0, 0, ""},
		{"chosen", Spec{Name: Impl, Inject: bugs.Of(bugs.LookupIgnoresScope), WriteDelay: 50 * ms}, 0, 0, 50 * ms, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			line := s.DefaultRaceFaults()
			if s.InformerLag != tc.lag || s.InformerRelist != tc.relist || s.WriteDelay != tc.delay {
				t.Errorf("faults lag %s relist %s delay %s, want %s %s %s", s.InformerLag, s.InformerRelist, s.WriteDelay, tc.lag, tc.relist, tc.delay)
			}
			if tc.says == "" && line != "" || tc.says != "" && !strings.Contains(line, tc.says) {
				t.Errorf("says %q, want it to name %q", line, tc.says)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("the Spec no longer validates: %v", err)
			}
		})
	}
}
