package check

import (
	"fmt"
	"testing"
)

// Fanout is the benchmark scope: one owner with n dependents deleted in
// the background, every GC interleaving explored. Its state count grows
// about fivefold per dependent.
func Fanout(n int) Scope {
	s := Scope{Name: fmt.Sprintf("fanout-%d", n), Setup: []string{"create secret/owner"}, Ops: []string{"delete secret/owner"}}
	for i := 1; i <= n; i++ {
		s.Setup = append(s.Setup, fmt.Sprintf("create cm/d%d owner=secret/owner", i))
	}
	s.Setup = append(s.Setup, "settle")
	return s
}

// BenchmarkFanout reports distinct states per second on Fanout(6).
func BenchmarkFanout(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res, err := Run(Fanout(6), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Distinct)/res.Elapsed.Seconds(), "distinct/s")
		b.ReportMetric(float64(res.Distinct), "distinct")
	}
}
