package target

import (
	"testing"
	"time"

	"github.com/cascade-k8s/cascade/harness/replay"
)

// The back-off is client-go's DefaultTypedControllerRateLimiter's per
// item: 5 ms after the first failure, doubling, up to 1000 s.
func TestWorkqueueBackoff(t *testing.T) {
	// 19: 5 ms·2^18 = 1310.72 s, capped
	for n, want := range map[int]time.Duration{0: 0, 1: 5 * time.Millisecond, 2: 10 * time.Millisecond, 10: 2560 * time.Millisecond, 19: 1000 * time.Second, 60: 1000 * time.Second} {
		if got := workqueueBackoff(n); got != want {
			t.Errorf("after %d failures: %s, want %s", n, got, want)
		}
	}
}

// stretch lengthens the quiet window by the back-off, up to
// backoffWaitMax, and the timeout with it; no back-off leaves it.
func TestStretchOutlastsTheBackoff(t *testing.T) {
	q := replay.DefaultQuiet
	if got := stretch(q, 0); got.Window != q.Window || got.Timeout != q.Timeout {
		t.Fatalf("no back-off changed the window: %+v", got)
	}
	got := stretch(q, 2560*time.Millisecond)
	if got.Window != q.Window+2560*time.Millisecond || got.Timeout != q.Timeout+2560*time.Millisecond {
		t.Fatalf("window %s timeout %s", got.Window, got.Timeout)
	}
	if got := stretch(q, time.Hour); got.Window != q.Window+backoffWaitMax {
		t.Fatalf("window %s, want capped at %s", got.Window, q.Window+backoffWaitMax)
	}
}
