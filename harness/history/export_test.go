package history

import "time"

// NewObserverAt returns an observer that started at start and watches
// nothing: tests feed it events with See.
func NewObserverAt(start time.Time) *Observer { return &Observer{start: start} }

// See records that the watch delivered obj (removed: a DELETED event) at
// the instant at, in Unix nanoseconds.
func (o *Observer) See(obj *Object, removed bool, at int64) {
	o.record(WatchEvent{Object: obj, Removed: removed, At: at})
}
