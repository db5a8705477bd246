package testenv_test

import (
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/cascade-k8s/cascade/impl/internal/testenv"
)

// A client-go delaying queue runs a goroutine until ShutDown: Leaked must
// see it while it runs and Wait must pass once it stops.
func TestSeesWorkqueueGoroutine(t *testing.T) {
	if err := testenv.WaitNoLeaks(5 * time.Second); err != nil {
		t.Fatalf("leak before the test: %v", err)
	}
	q := workqueue.NewTypedDelayingQueue[string]()
	time.Sleep(10 * time.Millisecond)
	if len(testenv.Leaked()) == 0 {
		t.Fatal("the queue's goroutine is not reported")
	}
	if err := testenv.WaitNoLeaks(100 * time.Millisecond); err == nil {
		t.Fatal("Wait passed with the queue running")
	}
	q.ShutDown()
	if err := testenv.WaitNoLeaks(5 * time.Second); err != nil {
		t.Fatalf("after ShutDown: %v", err)
	}
}
