// Package breaker carries circuit breaker transitions off gobreaker's lock.
// gobreaker (github.com/sony/gobreaker/v2) calls Settings.OnStateChange
// under the breaker's lock, on the goroutine of whichever call caused the
// change: a logger there would hold every call to that breaker. Log's
// Changed is such a callback that only hands the transition to a goroutine
// of its own, which writes it; the edge's per-route upstream breakers and
// the shared Redis's breaker both use it.
package breaker

import (
	"sync"

	"github.com/sony/gobreaker/v2"
)

// Transition is one breaker's change of state.
type Transition struct {
	Name     string // the breaker's Settings.Name
	From, To gobreaker.State
}

// buffered is how many transitions may wait for the writer. A breaker
// changes state at most about once per open timeout, so it never fills in
// practice; if it did, a transition would go unwritten (the owner's
// metrics, set in the callback, still count it) rather than block a call.
const buffered = 64

// Log writes the transitions handed to Changed, in order, on a goroutine of
// its own, until Close.
type Log struct {
	ch    chan Transition
	stop  chan struct{}
	done  chan struct{}
	close sync.Once
}

// NewLog starts the goroutine that calls write for each transition. write
// runs on that goroutine only, so it may keep state between calls.
func NewLog(write func(Transition)) *Log {
	l := &Log{ch: make(chan Transition, buffered), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case t := <-l.ch:
				write(t)
			case <-l.stop:
				return
			}
		}
	}()
	return l
}

// Changed hands a transition to the writer, or drops it when the writer is
// behind: it never blocks, so it is fit for Settings.OnStateChange.
func (l *Log) Changed(name string, from, to gobreaker.State) {
	select {
	case l.ch <- Transition{name, from, to}:
	default:
	}
}

// Close stops the goroutine; transitions not yet written are dropped.
// Closing twice is a no-op.
func (l *Log) Close() {
	l.close.Do(func() {
		close(l.stop)
		<-l.done
	})
}
