package step

// Arrivals wakes the goroutines of a stepped scheduler that wait for a
// held event to arrive: each Signal closes the channel the waiters hold
// and hands out a fresh one, and Close wakes them for good once the
// scheduler stops. It does no locking: call every method with the
// scheduler's own mutex held, as the state it guards is under that mutex.
type Arrivals struct {
	ch     chan struct{}
	closed bool
}

// NewArrivals returns an open Arrivals.
func NewArrivals() Arrivals { return Arrivals{ch: make(chan struct{})} }

// Wait returns a channel that is closed at the next Signal or Close.
func (a *Arrivals) Wait() <-chan struct{} { return a.ch }

// Signal wakes the current waiters; after Close it does nothing.
func (a *Arrivals) Signal() {
	if !a.closed {
		close(a.ch)
		a.ch = make(chan struct{})
	}
}

// Close wakes every waiter for good.
func (a *Arrivals) Close() {
	if !a.closed {
		a.closed = true
		close(a.ch)
	}
}

// Closed reports whether Close was called.
func (a *Arrivals) Closed() bool { return a.closed }
