package step

import "testing"

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestArrivals: Signal wakes exactly the current waiters and hands out a
// fresh channel; Close wakes every later waiter too and is idempotent.
func TestArrivals(t *testing.T) {
	a := NewArrivals()
	first := a.Wait()
	if closed(first) {
		t.Fatal("a fresh Arrivals must not have woken anyone")
	}
	a.Signal()
	second := a.Wait()
	if !closed(first) || closed(second) {
		t.Fatal("Signal must wake the old waiters only")
	}
	a.Close()
	a.Close()
	a.Signal()
	if !closed(second) || !closed(a.Wait()) || !a.Closed() {
		t.Fatal("after Close every waiter is woken for good")
	}
}
