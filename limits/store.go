package limits

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ulule/limiter/v3"
)

// counterStore charges n requests to the counter of window w and reports the
// outcome against limit. ttl is how long the counter must outlive this call.
// Implementations: memoryStore (one node) and redisStore (every replica).
type counterStore interface {
	incr(ctx context.Context, w *windowKey, n, limit int64, ttl time.Duration) (limiter.Context, error)
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

// memoryStore keeps the counters of one node in memory.
//
// It is not ulule/limiter's memory store (drivers/store/memory): ulule's
// counters open their window at the first request, so every increment
// takes a lock and reads the clock twice, and its cleaner goroutine
// outlives a closed Limiter. Here a window is named by its start
// (window.go), so an increment is one atomic add, and a bucket's window
// remembers its counter (windowKey.local).
//
// Counting is exact under concurrency: a counter is created once by
// sync.Map.LoadOrStore and incremented atomically, so every request sees
// a distinct count and exactly limit of them see count <= limit.
type memoryStore struct {
	counters sync.Map // counter name -> *memCounter
	loop     tickLoop
}

// memCounter is one window's count. expires is when the cleaner may drop
// it: the window's end plus the grace of every store (TakeAt's ttl).
type memCounter struct {
	n       atomic.Int64
	expires int64 // unix nanoseconds
	store   *memoryStore
}

// memoryCleanInterval is how often expired counters are dropped; ulule's
// default for its own stores.
const memoryCleanInterval = limiter.DefaultCleanUpInterval

func newMemoryStore(log *slog.Logger) *memoryStore {
	s := &memoryStore{}
	s.loop.start(memoryCleanInterval, func() bool { s.clean(log); return false })
	return s
}

func (s *memoryStore) incr(_ context.Context, w *windowKey, n, limit int64, ttl time.Duration) (limiter.Context, error) {
	c := w.local.Load()
	if c == nil || c.store != s {
		c = s.counter(w.name, ttl)
		w.local.Store(c)
	}
	return counted(c.n.Add(n), limit, time.Unix(0, c.expires)), nil
}

// counter finds or makes the counter named key, which must outlive now by
// ttl.
func (s *memoryStore) counter(key string, ttl time.Duration) *memCounter {
	if c, ok := s.counters.Load(key); ok {
		return c.(*memCounter)
	}
	c, _ := s.counters.LoadOrStore(key, &memCounter{expires: time.Now().Add(ttl).UnixNano(), store: s})
	return c.(*memCounter)
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

// clean drops expired counters. No request names a counter once it has
// expired (its window ended keyGrace and a store timeout ago), so dropping
// one loses no count. A bucket's window may still point at a dropped
// counter; it is only read again if the wall clock steps back into that
// window, which would at worst split that window's count in two. A panic
// is reported, not fatal: the next sweep retries, and counting does not
// depend on sweeping.
func (s *memoryStore) clean(log *slog.Logger) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("rate limit memory store: cleaner panicked", "panic", fmt.Sprint(r))
		}
	}()
	sweep(&s.counters)
}

func (c *memCounter) expiry() int64 { return c.expires }

func (s *memoryStore) close() error { return s.loop.close() }
