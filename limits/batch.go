package limits

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
)

// Reserving a key-window's allowance from Redis in batches, so that a hot
// key costs Redis one command per batch rather than one script per request.
//
// A replica reserves b requests of a window at once (one INCRBY of b on the
// window's counter, the same counter the exact path counts in) and spends
// them in memory with atomics; when they run out it reserves again. The
// fleet never grants more than the limit: a reservation whose INCRBY passes
// the limit keeps only what was left before it, max(0, limit - (count -
// b)). The price is on the other side: up to b - 1 requests of the window
// may sit unspent in each other replica's batch, so a key may be refused
// when the fleet has granted as few as limit - replicas x (b - 1)
// (docs/SCALING.md "What the fleet shares").
//
// b starts at 1 for each key-window and doubles while batches are spent in
// less than a sixteenth of the window, up to batchCap; a key that slows
// down halves it again. A key seen a few times per window therefore still
// costs one reservation per request, and unspent batches stay small.
//
// Limits too small to split (batchCap <= 1) keep the exact path: one
// script per request, as ulule/limiter counts (redisstore.go).
//
// Remaining is the fleet's remaining as this replica knew it at its last
// reservation, minus what it spent since: limit - count + unspent. One
// replica alone sees it count down exactly; in a fleet it is high by at
// most what the other replicas hold unspent.
//
// Once a reservation finds the window's allowance spent, the replica
// refuses the key's requests in that window without asking Redis: counts
// only grow within a window.
//
// When Redis fails, what a replica holds was granted by Redis and is still
// spent, exactly as if Redis answered; the next reservation fails, and
// on_store_error decides from there (failmode.go).

// defaultRedisBatch is the ceiling of b when limits.redis_batch is zero.
const defaultRedisBatch = 64

// batchSpread is how many batches each replica should need at least to
// spend a whole allowance: b <= limit / (batchSpread x replicas), so that
// the allowance left unspent in batches is at most an eighth of it.
const batchSpread = 8

// batchHot is the share of a window within which a batch spent marks the
// key as hot, so that its next batch doubles.
const batchHot = 16

// batch is one replica's reservations in one window of one counter.
type batch struct {
	// left is what this replica reserved and has not spent yet.
	left atomic.Int64
	// count is the window's counter as the last reservation found it.
	count atomic.Int64
	// lock serialises reservations; a channel, so that a request waiting
	// behind a slow reservation still gives up at its deadline.
	lock chan struct{}
	// Under lock: the next batch's size, when the last reservation was
	// made (unix nanoseconds), whether this replica has reserved in the
	// window (the first reservation also sets the counter's expiry).
	size     int64
	reserved int64
	started  bool

	expires int64 // unix nanoseconds; the cleaner drops it past then
	store   *redisStore
}

func (b *batch) expiry() int64 { return b.expires }

// batchCap is the largest batch for limit across replicas: ceiling, and
// at most an eighth of each replica's share.
func batchCap(limit, replicas, ceiling int64) int64 {
	return min(ceiling, limit/(batchSpread*max(replicas, 1)))
}

// spend takes n from what b holds, if it holds that much.
func (b *batch) spend(n int64) (left int64, ok bool) {
	for {
		l := b.left.Load()
		if l < n {
			return l, false
		}
		if b.left.CompareAndSwap(l, l-n) {
			return l - n, true
		}
	}
}

// result is the decision on a charge, with remaining as the replica knows it.
func (b *batch) result(left, limit int64, allowed bool) limiter.Context {
	c := limiter.Context{Limit: limit, Reset: b.expires / int64(time.Second), Reached: !allowed}
	c.Remaining = max(0, limit-b.count.Load()) + left
	return c
}

// batchCapFor is the largest batch for limit now; <= 1: no batches.
func (s *redisStore) batchCapFor(limit int64) int64 {
	if s.batchMax <= 1 {
		return 0
	}
	return batchCap(limit, int64(s.fleet()), s.batchMax)
}

// held decides on n requests of window w from what this replica knows,
// without Redis, if it can: they are spent from its batch, or refused
// because the fleet has spent the window. It runs before the store call's
// timeout is set up, as it cannot block.
func (s *redisStore) held(w *windowKey, n, limit int64, ttl time.Duration) (limiter.Context, bool) {
	if s.batchCapFor(limit) <= 1 {
		return limiter.Context{}, false
	}
	b := s.batchOf(w, ttl)
	for {
		left := b.left.Load()
		switch {
		case left >= n:
			if b.left.CompareAndSwap(left, left-n) {
				return b.result(left-n, limit, true), true
			}
		case b.count.Load() < limit:
			return limiter.Context{}, false
		// The fleet has spent the window: refused, and a refused charge
		// spends what it asked for, as Redis would count it.
		case left == 0 || b.left.CompareAndSwap(left, 0):
			return b.result(0, limit, false), true
		}
	}
}

// batched charges n requests of window w through this replica's batch.
func (s *redisStore) batched(ctx context.Context, w *windowKey, n, limit, cap int64, ttl time.Duration) (limiter.Context, error) {
	if res, ok := s.held(w, n, limit, ttl); ok {
		return res, nil
	}
	b := s.batchOf(w, ttl)
	select {
	case b.lock <- struct{}{}:
	case <-ctx.Done():
		return limiter.Context{}, ctx.Err()
	}
	defer func() { <-b.lock }()
	if left, ok := b.spend(n); ok { // another request reserved meanwhile
		return b.result(left, limit, true), nil
	}
	now := s.now().UnixNano()
	if b.reserved != 0 && now-b.reserved < int64(w.length)/batchHot {
		b.size = min(b.size*2, cap)
	} else {
		b.size = max(b.size/2, 1)
	}
	held := b.left.Swap(0)
	want := max(b.size, n-held)
	count, err := s.reserve(ctx, w.name, want, ttl, !b.started)
	if err != nil {
		b.left.Add(held)
		return limiter.Context{}, err
	}
	b.started, b.reserved = true, now
	granted := min(want, max(0, limit-(count-want)))
	for { // count only grows; keep the highest seen
		c := b.count.Load()
		if count <= c || b.count.CompareAndSwap(c, count) {
			break
		}
	}
	if have := held + granted; have >= n {
		return b.result(b.left.Add(have-n), limit, true), nil
	}
	return b.result(0, limit, false), nil
}

// batchOf finds or makes this replica's batch of window w.
func (s *redisStore) batchOf(w *windowKey, ttl time.Duration) *batch {
	if b := w.batch.Load(); b != nil && b.store == s {
		return b
	}
	v, ok := s.batches.Load(w.name)
	if !ok {
		v, _ = s.batches.LoadOrStore(w.name, &batch{
			lock: make(chan struct{}, 1), size: 1, store: s,
			expires: time.Now().Add(ttl).UnixNano(),
		})
	}
	b := v.(*batch)
	w.batch.Store(b)
	return b
}

// reserve adds n to counter key and returns its new value. The counter
// must expire ttl from now: this replica's first reservation in the window
// creates it with that expiry (SET NX PX, in the same round trip), and a
// later one that finds it gone (Redis lost it) sets the expiry after.
func (s *redisStore) reserve(ctx context.Context, key string, n int64, ttl time.Duration, first bool) (int64, error) {
	key = s.prefix + ":" + key
	if !first {
		count, err := s.client.IncrBy(ctx, key, n).Result()
		if err == nil && count == n {
			err = s.client.PExpire(ctx, key, ttl).Err()
		}
		return count, err
	}
	var incr *redis.IntCmd
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, key, 0, ttl)
		incr = p.IncrBy(ctx, key, n)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return incr.Val(), nil
}

// expiring is what sweep drops once expired.
type expiring interface{ expiry() int64 }

// sweep drops the entries of m (values implementing expiring) whose expiry
// has passed.
func sweep(m *sync.Map) {
	now := time.Now().UnixNano()
	m.Range(func(k, v any) bool {
		if v.(expiring).expiry() < now {
			m.Delete(k)
		}
		return true
	})
}
