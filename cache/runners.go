package cache

import "time"

// A flight runs on a goroutine kept from one flight to the next rather
// than on the goroutine singleflight starts for it. A fresh goroutine's
// stack starts small, and a flight (the legacy call, the rewrite's
// descent through the page) would grow it by copying two or three times
// on every miss (docs/BENCHMARKS.md, "The miss: flights on kept
// goroutines", has the profiles). A kept runner's stack has its size
// already. The goroutine singleflight starts only waits for the runner,
// and its stack stays small.

// runnerIdle is how long a runner waits for its next flight before it
// ends: runners number at most the flights running at once, and those of
// a burst do not outlive it by more than this.
const runnerIdle = 10 * time.Second

// fly runs cl's flight on a parked runner, or on a new one when none is
// parked, and returns when it is done. The caller holds a registration in
// c.wg (enter), so the Add of a new runner never starts from zero.
func (c *Cache) fly(cl *call) {
	cl.flown.Add(1)
	select {
	case c.runs <- cl:
	default:
		c.wg.Add(1)
		c.stats.runners.Add(1)
		go c.runner(cl)
	}
	cl.flown.Wait()
}

// runner flies cl, then each flight handed to it, until it has waited
// c.runnerIdle (runnerIdle; tests shorten it) for one or the cache closes.
func (c *Cache) runner(cl *call) {
	defer c.wg.Done()
	defer c.stats.runners.Add(-1)
	idle := time.NewTimer(c.runnerIdle)
	defer idle.Stop()
	for {
		cl.fly()
		cl = nil // nothing of a finished flight stays reachable from here
		idle.Reset(c.runnerIdle)
		select {
		case cl = <-c.runs:
		case <-idle.C:
			return
		case <-c.stop.Done():
			return
		}
	}
}
