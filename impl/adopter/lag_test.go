package adopter

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

func numbered(i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetName(fmt.Sprintf("obj-%d", i))
	u.SetResourceVersion(fmt.Sprint(i + 1))
	return u
}

// TestWatchLagDeliversEveryEventInOrder: a lagged watch stream delivers
// every event the server sent, in the order sent, each no earlier than it
// arrived and no later than the maximum lag after it (give or take the
// scheduler); the stream ends after its last event when the server ends
// it; pending counts the events still held and drops to zero.
func TestWatchLagDeliversEveryEventInOrder(t *testing.T) {
	const n, max = 200, 20 * time.Millisecond
	lag := newWatchLag(max, 1)
	in := watch.NewFake()
	w := lag.wrap(in)
	sent := make([]time.Time, n)
	go func() {
		for i := range n {
			sent[i] = time.Now()
			in.Modify(numbered(i))
			if i%20 == 0 {
				time.Sleep(max / 4)
			}
		}
		in.Stop() // the server ends the stream
	}()
	got, delayed := 0, 0
	for ev := range w.ResultChan() {
		at := time.Now()
		name := ev.Object.(*unstructured.Unstructured).GetName()
		if want := fmt.Sprintf("obj-%d", got); ev.Type != watch.Modified || name != want {
			t.Fatalf("event %d: got %s %s, want MODIFIED %s", got, ev.Type, name, want)
		}
		if late := at.Sub(sent[got]); late > max+200*time.Millisecond {
			t.Errorf("event %d arrived %s late, beyond the maximum %s", got, late, max)
		} else if late > max/4 {
			delayed++
		}
		got++
	}
	if got != n {
		t.Fatalf("the stream ended after %d events, want all %d", got, n)
	}
	if delayed == 0 {
		t.Errorf("no event of %d was delayed by more than %s: the lag did nothing", n, max/4)
	}
	if p := lag.pending.Load(); p != 0 {
		t.Errorf("pending = %d after every event was delivered", p)
	}
}

// TestWatchLagStop: stopping a lagged watch stops the server's stream,
// closes the result channel and forgets the events it still held.
func TestWatchLagStop(t *testing.T) {
	lag := newWatchLag(time.Hour, 2)
	in := watch.NewFakeWithChanSize(10, false)
	for i := range 5 {
		in.Add(numbered(i))
	}
	w := lag.wrap(in)
	deadline := time.Now().Add(5 * time.Second)
	for lag.pending.Load() != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("pending = %d, want the 5 events held", lag.pending.Load())
		}
		time.Sleep(time.Millisecond)
	}
	w.Stop()
	w.Stop() // idempotent
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("a stopped stream delivered %v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the result channel did not close after Stop")
	}
	if !in.IsStopped() {
		t.Error("Stop did not stop the server's stream")
	}
	for lag.pending.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pending = %d after Stop", lag.pending.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
