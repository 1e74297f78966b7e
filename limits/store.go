package limits

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
)

// counterStore charges one request to the counter named key and reports the
// outcome against limit. ttl is how long the counter must outlive this call.
// Implementations: memoryStore (one node) and redisStore (every replica).
type counterStore interface {
	incr(ctx context.Context, key string, limit int64, ttl time.Duration) (limiter.Context, error)
	close() error
}

// tickLoop runs a store's background work (sweeping counters, reconnecting)
// in one goroutine on a ticker, which close stops and waits for: a closed
// Limiter leaves nothing running.
type tickLoop struct {
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// start calls tick every interval until tick reports it is done or close is
// called. It is called at most once, before close.
func (tl *tickLoop) start(every time.Duration, tick func() (done bool)) {
	tl.stop = make(chan struct{})
	tl.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-tl.stop:
				return
			case <-t.C:
				if tick() {
					return
				}
			}
		}
	})
}

// close stops the goroutine, if one was started, and waits for it.
func (tl *tickLoop) close() error {
	tl.once.Do(func() {
		if tl.stop != nil {
			close(tl.stop)
		}
	})
	tl.wg.Wait()
	return nil
}

// memoryStore is ulule/limiter's in-memory counter cache
// (drivers/store/memory/cache.go) with a cleaner this package owns.
//
// Counting is exact under concurrency: a counter is created once by
// sync.Map.LoadOrStore and incremented under its own mutex
// (Cache.Increment, Counter.Increment), so every request sees a distinct
// count and exactly limit of them see count <= limit.
//
// ulule's memory.Store is not used as is, for two reasons. Its cleaner
// goroutine (cache.go startCleaner) is stopped only by a GC finalizer on the
// store, so a closed Limiter would leave it running (and goleak fail the
// tests: every goroutine needs a stop path); and it hides its cache, so
// with CleanUpInterval 0 nothing could ever remove old counters. Its Clean
// checks expiry and deletes in two steps, which could drop a counter
// revived in between; with per-window keys (window.go) no request names a
// counter after its TTL, so that race cannot lose a count here.
type memoryStore struct {
	cache *memory.CacheWrapper
	loop  tickLoop
}

// memoryCleanInterval is how often expired counters are dropped; ulule's own
// default.
const memoryCleanInterval = limiter.DefaultCleanUpInterval

func newMemoryStore(log *slog.Logger) *memoryStore {
	s := &memoryStore{cache: memory.NewCache(0)} // 0: no cleaner goroutine of ulule's
	s.loop.start(memoryCleanInterval, func() bool { s.clean(log); return false })
	return s
}

func (s *memoryStore) incr(_ context.Context, key string, limit int64, ttl time.Duration) (limiter.Context, error) {
	count, expiration := s.cache.Increment(key, 1, ttl)
	return counted(count, limit, expiration), nil
}

// counted is what ulule's common.GetContextFromState makes of a count,
// without the clock reading its caller would make for it and it never
// uses: a clock reading is not free on every machine, and this runs once
// per request.
func counted(count, limit int64, expiration time.Time) limiter.Context {
	c := limiter.Context{Limit: limit, Reset: expiration.Unix(), Reached: true}
	if count <= limit {
		c.Remaining, c.Reached = limit-count, false
	}
	return c
}

// clean drops expired counters. A panic is reported, not fatal: the next
// sweep retries, and counting does not depend on sweeping.
func (s *memoryStore) clean(log *slog.Logger) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("rate limit memory store: cleaner panicked", "panic", fmt.Sprint(r))
		}
	}()
	s.cache.Clean()
}

func (s *memoryStore) close() error { return s.loop.close() }
