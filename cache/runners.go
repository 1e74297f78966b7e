package cache

import "time"

// A flight runs on a goroutine kept from one flight to the next, handed
// to it by the caller that leads it. A fresh goroutine's stack starts
// small, and a flight (the legacy call, the rewrite's descent through the
// page) would grow it by copying two or three times on every miss
// (docs/BENCHMARKS.md, "The miss: flights on kept goroutines", has the
// profiles). A kept runner's stack has its size already.
//
// A leader that cannot stop waiting before the flight's other callers
// would (Options.Inline) runs its flight itself instead: the hand-off to
// a runner and back, two goroutine switches and another stack's caches,
// cost a miss more than its stack does on the HTTP/1.1 front's kept
// workers (docs/BENCHMARKS.md, "Flights on their leaders' goroutines").

// runnerIdle is how long a runner waits for its next flight before it
// ends: runners number at most the flights running at once, and those of
// a burst do not outlive it by more than this.
const runnerIdle = 10 * time.Second

// start runs cl, a flight join has just made: here when it is inline,
// else on a parked runner, or on a new one when none is parked, and
// returns (the runner lands it: fly). The flight holds a registration in
// c.wg until it lands, so that Close waits for it; a closed cache lands
// it at once with errClosed.
func (c *Cache) start(cl *call) {
	if !c.enter() {
		c.land(cl, result{}, errClosed)
		return
	}
	if cl.inline {
		cl.fly()
		return
	}
	select {
	case c.runs <- cl:
	default:
		// The flight's registration is held: this Add never starts from
		// zero.
		c.wg.Add(1)
		c.stats.runners.Add(1)
		go c.runner(cl)
	}
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
