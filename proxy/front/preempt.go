package front

import (
	"sync"
	"time"
)

// The sockets' raw calls (rawio_linux.go) no longer wake the runtime's
// monitor thread (sysmon), and sysmon is also what preempts a goroutine
// that has run for 10 ms: asleep since the process last went idle, with
// nothing else to wake it but the next timer, it would let one goroutine's
// long run (a large page's rewrite, a burst on one connection) hold a P
// for as long as it lasts. So while the fronts serve, a timer fires every
// preemptTick: sysmon sleeps at most until the next timer is due, so it is
// never asleep longer than that, and preemption keeps its bound. That
// costs a hundred wakes a second, where the calls woke sysmon once or
// twice per request.

// preemptTick bounds how long sysmon sleeps while the fronts serve: the
// runtime's own preemption bound (10 ms).
const preemptTick = 10 * time.Millisecond

// keepPreemption fires a timer every preemptTick until the returned stop
// is called; stop waits for its goroutine to end.
func keepPreemption() (stop func()) {
	t := time.NewTicker(preemptTick)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
