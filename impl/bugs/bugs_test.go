package bugs_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/impl/bugs"
)

// TestNamesMatchModel reads the model's catalogue as text (impl must not
// import the model) and checks that both list the same names in the same
// order.
func TestNamesMatchModel(t *testing.T) {
	src, err := os.ReadFile("../../model/bugs.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*Bug\w+:\s*\{"([a-z-]+)"`)
	var model []string
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		model = append(model, m[1])
	}
	var impl []string
	for _, b := range bugs.All {
		impl = append(impl, string(b))
	}
	if !slices.Equal(model, impl) {
		t.Fatalf("catalogues differ:\nmodel: %v\nimpl:  %v", model, impl)
	}
}

func TestParse(t *testing.T) {
	s, err := bugs.Parse([]string{"no-cycle-unblock", "adopt-without-recheck,lost-first-update"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "adopt-without-recheck,lost-first-update,no-cycle-unblock" {
		t.Fatalf("String() = %q", got)
	}
	if !s.Has(bugs.NoCycleUnblock) || s.Has(bugs.UIDOnlyIdentity) {
		t.Fatalf("Has disagrees with %v", s)
	}
	if got := (bugs.Set(nil)).String(); got != "upstream" {
		t.Fatalf("empty set renders %q", got)
	}
	_, err = bugs.Parse([]string{"no-such-bug"})
	if err == nil || !strings.Contains(err.Error(), "known: adopt-without-recheck") {
		t.Fatalf("unknown name: err = %v", err)
	}
	_, err = bugs.Parse([]string{"finalizer-after-deletion"})
	if err == nil || !strings.Contains(err.Error(), "only the model can inject it") {
		t.Fatalf("finalizer-after-deletion: err = %v", err)
	}
	if slices.Contains(bugs.InjectableNames(), string(bugs.FinalizerAfterDeletion)) {
		t.Fatal("InjectableNames lists finalizer-after-deletion")
	}
}
