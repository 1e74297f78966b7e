package cache

import (
	"context"
	"time"
)

// waiting returns a channel closed once n calls wait on the flights of cs
// at the same time, by the caches' own count of waiting calls
// (Stats.Waiting): a barrier for tests that block a fetch until every
// caller has joined its flight. It gives up after ten seconds, closing the
// channel, so that a test that never gets there fails rather than hangs.
func waiting(n int64, cs ...*Cache) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			var sum int64
			for _, c := range cs {
				sum += c.stats.waiting.Load()
			}
			if sum >= n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ch
}

// get is Get with the result's entry and status apart, as most tests read
// them.
func (c *Cache) get(ctx context.Context, key string, fetch Fetch) (*Entry, Status, error) {
	r, err := c.Get(ctx, key, fetch)
	return r.Entry, r.Status, err
}
