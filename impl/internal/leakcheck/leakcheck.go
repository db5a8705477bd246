// Package leakcheck finds goroutines that outlive the component that
// started them. It looks only at goroutines running code of impl, of
// client-go's informer, work-queue and event machinery, or of
// controller-runtime's webhook server: the goroutines impl starts. HTTP
// connection goroutines of client-go's shared transports are left alone,
// since client-go keeps them for the life of the process.
package leakcheck

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// suspicious are frames only impl's own goroutines run.
var suspicious = []string{
	"github.com/cascade-k8s/cascade/impl/",
	"k8s.io/client-go/tools/cache.",
	"k8s.io/client-go/util/workqueue.",
	"k8s.io/client-go/tools/record.",
	"k8s.io/apimachinery/pkg/watch.",
	"sigs.k8s.io/controller-runtime/pkg/webhook",
	"sigs.k8s.io/controller-runtime/pkg/certwatcher",
}

// ignored goroutines are the test framework's (which run test code).
var ignored = []string{
	"testing.(*M).",
	"testing.tRunner(",
	"testing.runTests",
	"github.com/cascade-k8s/cascade/impl/internal/leakcheck.",
}

// Leaked returns the stacks of goroutines that run impl's code.
func Leaked() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if containsAny(g, ignored) || !containsAny(g, suspicious) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Wait polls until no goroutine of impl runs, for up to timeout, and
// returns an error listing the survivors.
func Wait(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l := Leaked()
		if len(l) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines outlived their component:\n%s", len(l), strings.Join(l, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
