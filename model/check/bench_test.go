package check

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkFanout reports distinct states per second on fanout-N (N from
// $CASCADE_FANOUT, default 6), the checker's throughput anchor (make
// bench-check compares fanout-N with SPIN on the same scope), with one
// worker and with GOMAXPROCS workers. distinct/cpu-s divides by the
// process's CPU time instead of the wall clock: on a shared machine it is
// the steadier measure of per-core speed.
func BenchmarkFanout(b *testing.B) {
	n := 6
	if v := os.Getenv("CASCADE_FANOUT"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("CASCADE_FANOUT=%q: %v", v, err)
		}
	}
	for _, w := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("fanout-%d/workers=%d", n, w), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cpu := cpuTime()
				res, err := Run(Fanout(n), Options{Workers: w})
				if err != nil {
					b.Fatal(err)
				}
				cpu = cpuTime() - cpu
				b.ReportMetric(float64(res.Distinct)/res.Elapsed.Seconds(), "distinct/s")
				if cpu > 0 {
					b.ReportMetric(float64(res.Distinct)/cpu.Seconds(), "distinct/cpu-s")
				}
				b.ReportMetric(float64(res.Distinct), "distinct")
			}
		})
	}
}

// TestFanoutCounts pins fanout-N's state count to its closed form: before
// the owner's delete is delivered there are 2 states; after it, each
// dependent is queued, in flight, delivered, or has its delete event
// pending in the FIFO of ConfigMap events, so the count is
// 2 + sum_j C(n,j) j! 3^(n-j). bench/spin's Promela model must agree.
func TestFanoutCounts(t *testing.T) {
	for n, want := range map[int]int64{1: 6, 2: 19, 3: 80, 4: 395, 5: 2210} {
		res, err := Run(Fanout(n), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Distinct != want {
			t.Errorf("fanout-%d: %d distinct states, closed form says %d", n, res.Distinct, want)
		}
	}
}

// BenchmarkUniverseReduction searches a universe or a preset
// ($CASCADE_SCOPE, default the universe adoption; fanout-N is a preset)
// on one worker with sleep sets and without, reporting the CPU seconds
// per search beside the transitions taken and skipped: what the
// reduction saves, or costs, per core.
func BenchmarkUniverseReduction(b *testing.B) {
	name := "adoption"
	if v := os.Getenv("CASCADE_SCOPE"); v != "" {
		name = v
	}
	var scope Scope
	if u, err := UniverseByName(name); err == nil {
		scope = u.Scope()
	} else if scope, err = Preset(name); err != nil {
		b.Fatal(err)
	}
	for _, reduce := range []bool{true, false} {
		b.Run(fmt.Sprintf("%s/reduction=%v", name, reduce), func(b *testing.B) {
			s := scope
			s.Reduction = reduce
			for i := 0; i < b.N; i++ {
				cpu := cpuTime()
				res, err := Run(s, Options{Workers: 1})
				if err != nil {
					b.Fatal(err)
				}
				cpu = cpuTime() - cpu
				b.ReportMetric(cpu.Seconds(), "cpu-s")
				b.ReportMetric(float64(res.Generated), "transitions")
				b.ReportMetric(float64(res.Slept), "skipped")
			}
		})
	}
}
