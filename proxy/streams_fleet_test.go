package proxy_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/proxy/config"
)

// withStreamFleet sets what the fleet tests of the streams need: room
// for many streams of one key from one address, and a short lease.
func withStreamFleet() edgeOption {
	return withConfig(func(c *config.Config) {
		c.Streams.MaxPerKey = 2000
		c.Streams.Lease = time.Second
		c.Server.MaxConnections = 4000
		c.Server.MaxConnectionsPerAddress = -1
	})
}

// One poll per stream for the whole fleet: the legacy calls of one
// stream over three replicas sharing a Redis are as many with 1,000
// subscribers as with one, and every subscriber gets the events.
func TestStreamFleetOnePollPerStream(t *testing.T) {
	r := redistest.Start(t)
	fleet := fleetOf(t, 3, r.Addr(), withSim(liveSim()), withStreamFleet())
	sim := fleet[0].sim
	token := sim.Markets()[0].Tokens[0]
	path := "/v1/orderbook/stream?tokenId=" + token
	calls := func() int64 { return sim.Stats().ByRoute["orderbook_events"] }
	// rate is the legacy calls of the events route over a span.
	rate := func(span time.Duration) float64 {
		before := calls()
		time.Sleep(span)
		return float64(calls()-before) / span.Seconds()
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var got atomic.Int64 // subscribers that received an event
	subscribe := func(e *edge) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		resp, err := e.front.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("subscribe: %v %v", resp, err)
			return
		}
		wg.Go(func() {
			defer resp.Body.Close()
			r := newSSEReader(resp.Body)
			counted := false
			for {
				ev, err := r.next()
				if err != nil {
					return
				}
				if ev.id != "" && !counted {
					got.Add(1)
					counted = true
				}
			}
		})
	}
	subscribe(fleet[0])
	time.Sleep(2 * time.Second) // the poller settles: head read, lease taken
	one := rate(6 * time.Second)

	for i := 1; i < 1000; i++ {
		subscribe(fleet[i%3])
	}
	testkit.Eventually(t, "every subscriber's first event", func() bool { return got.Load() == 1000 })
	many := rate(6 * time.Second)
	t.Logf("legacy calls of the stream: %.2f/s with 1 subscriber, %.2f/s with 1000 over 3 replicas", one, many)
	if many > one+0.5 || one == 0 {
		t.Errorf("legacy calls: %.2f/s with 1 subscriber, %.2f/s with 1000", one, many)
	}
	leading := 0.0
	for _, e := range fleet {
		leading += seriesValue(t, e.srv.Registry(), "tradergate_stream_leading", "route", "orderbook_events")
	}
	if leading != 1 {
		t.Errorf("%v replicas poll the stream, want 1", leading)
	}
}
