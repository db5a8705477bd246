package target

import (
	"fmt"
	"strings"
	"time"

	"github.com/cascade-k8s/cascade/impl/bugs"
)

// raceFault is the fault under which an injected bug's race shows on the
// impl target, whose GC runs by itself: without it the GC's informers
// keep up and its writes go out at once, and the windows these bugs need
// almost never open (measured with cascade fuzz --target impl, README
// "Measured"). The other injectable bugs show without a fault.
type raceFault struct {
	lag, relist, delay time.Duration
	why                string
}

var raceFaults = map[bugs.Bug]raceFault{
	// a dependent seen before its cluster-scoped owner
	bugs.LookupIgnoresScope: {lag: 200 * time.Millisecond, why: "a dependent's event must reach the GC before its cluster-scoped owner's"},
	// the adopter's cache behind the owner's deletion
	bugs.AdoptWithoutRecheck: {lag: 200 * time.Millisecond, why: "the adopter's cache must lag behind an owner's deletion"},
	// an owner created and deleted unseen
	bugs.ForgetUnobservedVirtual: {relist: 300 * time.Millisecond, why: "an owner must come and go while the GC's watch relists"},
	// a client write between the GC's GET and its DELETE
	bugs.DeleteWithoutRVPrecondition: {delay: 200 * time.Millisecond, why: "a client write must land between the GC's GET and its DELETE"},
}

// DefaultRaceFaults switches on, for an impl Spec with injected bugs and
// no fault set, the faults those bugs' races need (the largest of each
// over the bugs), and returns a line saying what it switched on and why,
// "" when nothing. A caller honours an explicit fault setting, 0
// included, by not calling it.
func (s *Spec) DefaultRaceFaults() string {
	if s.Name != Impl || s.InformerLag != 0 || s.InformerRelist != 0 || s.WriteDelay != 0 {
		return ""
	}
	var whys []string
	for _, b := range bugs.All {
		f, ok := raceFaults[b]
		if !ok || !s.Inject.Has(b) {
			continue
		}
		s.InformerLag, s.InformerRelist, s.WriteDelay = max(s.InformerLag, f.lag), max(s.InformerRelist, f.relist), max(s.WriteDelay, f.delay)
		whys = append(whys, fmt.Sprintf("%s (%s)", b, f.why))
	}
	if len(whys) == 0 {
		return ""
	}
	var flags []string
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"--informer-lag", s.InformerLag}, {"--informer-relist", s.InformerRelist}, {"--write-delay", s.WriteDelay}} {
		if f.d > 0 {
			flags = append(flags, f.name+" "+f.d.String())
		}
	}
	return fmt.Sprintf("impl: the injected race needs a fault on a GC that runs by itself: %s. Using %s; give any fault flag, 0 included, to choose yourself",
		strings.Join(whys, "; "), strings.Join(flags, " "))
}
