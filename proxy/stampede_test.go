package proxy_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"tradergate/internal/testkit/redistest"
	"tradergate/proxy/config"
)

// A busy Redis is not a dead one: on a saturated machine, where every
// Redis call is slow, a cold stampede over the fleet still makes one legacy
// call per page. 150 concurrent requests for one cold page over 3 replicas,
// ten rounds with a page of their own, each round with every CPU kept busy
// by spinning goroutines; at the default redis.timeout and cache.l2.timeout.
func TestFleetStampedeOnABusyMachine(t *testing.T) {
	r := redistest.Start(t)
	fleet := fleetOf(t, 3, r.Addr(), withConfig(func(c *config.Config) {
		c.Redis.Timeout = 0 // the defaults, not withRedis's generous one
		c.Redis.ApplyDefaults()
	}))
	sim := fleet[0].sim
	const rounds, n = 10, 150
	for round := range rounds {
		path := fmt.Sprintf("/v1/trader/%s/activity?limit=%d", sim.Wallets()[round%len(sim.Wallets())], 20+round)
		before := sim.Stats().Requests
		stop := burnCPUs()
		counts := stampede(fleet, n, path)
		stop()
		calls := sim.Stats().Requests - before
		if counts[200] != n || calls != 1 {
			for i, e := range fleet {
				st := e.srv.CacheStats()
				t.Logf("replica %d: l2 hits %d misses %d errors %d waits %d wait timeouts %d",
					i+1, st.L2Hits, st.L2Misses, st.L2Errors, st.L2LockWaits, st.L2LockWaitTimeouts)
			}
			t.Errorf("round %d: %d requests over 3 replicas on a busy machine: statuses %v, %d legacy calls, want all 200 and 1 call",
				round, n, counts, calls)
		}
	}
}

// burnCPUs keeps every P busy with a goroutine that spins until the
// returned stop, which waits for them to end: the scheduling of a
// saturated machine, where Redis replies and the edges' goroutines wait
// for a CPU.
func burnCPUs() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for x := uint64(1); ctx.Err() == nil; {
				for range 1 << 12 {
					x = x*6364136223846793005 + 1442695040888963407
				}
				sink(x)
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

//go:noinline
func sink(uint64) {}
