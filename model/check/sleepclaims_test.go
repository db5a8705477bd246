package check

import (
	"reflect"
	"testing"
)

// TestSleepingClaimsChangeNothing: an unreduced search that takes and
// checks a sleeping step's transition but neither encodes nor claims its
// successor (explorer.sleep) finds, on every scope of the reduction
// sample with one worker and with two, exactly what the search that
// claims every successor finds: the distinct states, the transitions,
// the depth, every violation and class with its counterexample steps and
// trace file, the reachability properties witnessed and the ops never
// reached. The sleeping steps' successors must be claimed elsewhere with
// a smaller ord (reduction.go), or the frontier, and so the traces,
// would differ. Some of the searches stop keeping sleep sets part of the
// way (sleepPays), which must change nothing either.
func TestSleepingClaimsChangeNothing(t *testing.T) {
	var unclaimed int64
	stopped := false
	for _, s := range reductionSample(t) {
		s.Reduction = false
		for _, workers := range []int{1, 2} {
			plain, err := Run(s, Options{Workers: workers, Plain: true})
			if err != nil {
				t.Fatal(err)
			}
			fast, err := Run(s, Options{Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			name := s.Name + "/" + s.Bugs.String()
			if plain.unclaimed != 0 || fast.Reduced || fast.Slept != 0 {
				t.Fatalf("%s: the plain search skipped %d claims; the other reports Reduced %v, %d skipped", name, plain.unclaimed, fast.Reduced, fast.Slept)
			}
			unclaimed += fast.unclaimed
			stopped = stopped || fast.sleepStopped > 0
			if fast.Distinct != plain.Distinct || fast.Generated != plain.Generated || fast.Depth != plain.Depth || fast.Complete != plain.Complete {
				t.Errorf("%s, %d workers: %d distinct, %d transitions, depth %d, complete %v; claiming every successor: %d, %d, %d, %v", name, workers,
					fast.Distinct, fast.Generated, fast.Depth, fast.Complete, plain.Distinct, plain.Generated, plain.Depth, plain.Complete)
			}
			for _, f := range []struct {
				what      string
				got, want any
			}{
				{"violations", fast.Violations, plain.Violations},
				{"classes", fast.Classes, plain.Classes},
				{"witnessed", fast.Witnessed, plain.Witnessed},
				{"never reached", fast.NeverReached, plain.NeverReached},
				{"vacuous", fast.Vacuous, plain.Vacuous},
			} {
				if !reflect.DeepEqual(f.got, f.want) {
					t.Errorf("%s, %d workers: %s differ:\n%+v\nclaiming every successor:\n%+v", name, workers, f.what, f.got, f.want)
				}
			}
		}
	}
	if unclaimed == 0 {
		t.Errorf("no transition of the sample went unclaimed: nothing was tested")
	}
	if !stopped {
		t.Errorf("no search of the sample stopped keeping sleep sets (sleepPays): that was not tested")
	}
	t.Logf("%d transitions unclaimed over the sample", unclaimed)
}
