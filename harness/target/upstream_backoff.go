package target

import (
	"time"

	"github.com/cascade-k8s/cascade/harness/replay"
)

// The real GC's work queues retry a failed item after a back-off
// (attemptToDeleteWorker's and attemptToOrphanWorker's AddRateLimited on
// workqueue.DefaultTypedControllerRateLimiter: per item 5 ms·2^(n-1)
// after its n-th failure in a row, up to 1000 s, reset by Forget when a
// pass succeeds). A settle that ends after a quiet window shorter than an
// item's back-off misses that item's next pass: found by lockstep
// fuzzing (`cascade fuzz --target upstream-stepped --checks 30 --seed
// 2`, run 30), where a StatefulSet's DELETE had been denied by deletion
// protection ten times in a row; its owners then changed, and the model's
// settle removed its dangling reference while the real GC's next pass
// came 2.6 s later, after the settle's 1 s window had ended. Nothing
// new happens in the cluster until that pass, so only the back-off can
// tell the settle to wait.

const (
	// backoffBase and backoffMax are DefaultTypedControllerRateLimiter's
	// per-item exponential limiter's.
	backoffBase = 5 * time.Millisecond
	backoffMax  = 1000 * time.Second
	// backoffWaitMax bounds how long a settle waits for a back-off: an
	// item that failed more than 13 times in a row (back-off over 20 s)
	// is, in the runs here, one deletion protection keeps denying, whose
	// next pass fails again.
	backoffWaitMax = 20 * time.Second
)

// workqueueBackoff is the back-off after n failures in a row.
func workqueueBackoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	if n > 40 {
		return backoffMax
	}
	return min(backoffBase<<(n-1), backoffMax)
}

// stretch is q with its quiet window stretched to outlast backoff (up
// to backoffWaitMax), and its timeout with it.
func stretch(q replay.Quiet, backoff time.Duration) replay.Quiet {
	if w := min(backoff, backoffWaitMax) + q.Window; w > q.Window {
		q.Timeout += w - q.Window
		q.Window = w
	}
	return q
}
