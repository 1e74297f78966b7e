package limits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ulule/limiter/v3"
)

// What happens when the store fails: the edge neither hangs nor answers
// 500; on_store_error allows or denies, with a log line and a counter.
//
// Allowing does not leave a key unmetered: each replica counts the key's
// requests in its own memory against a local share of the allowance,
// ceil(limit / fleet size), and refuses past it as deny would (503 with
// Retry-After: the store that would say when the allowance resets is
// out). The fleet size is limits.fleet_size, or the number of
// replicas that last counted themselves in Redis (redisstore.go). So
// while Redis is out a key gets at most fleet x ceil(limit / fleet) <=
// limit + fleet - 1 per window across the fleet, plus what Redis had
// counted in the window the outage began (docs/SCALING.md "When Redis
// fails"); a replica added since the last count adds its own share.
//
// Each Redis call is bounded by Options.RedisTimeout (incr). The breaker
// is the shared client's (package fleet); a second one here would only
// delay recovery behind its own probe. The limiter adds the decision
// (on_store_error) and a log line saying that requests are being served
// unmetered or refused.
const (
	// storeErrLogEvery limits failure logs to one line per interval; the
	// line carries the running count, so no request logs on its own.
	storeErrLogEvery = 10 * time.Second
)

// errCallerGone marks a store call cut short by the caller's context: not
// the store's fault, so it is not counted.
var errCallerGone = errors.New("caller gone")

// incr is one store call, under RedisTimeout for Redis.
func (l *Limiter) incr(ctx context.Context, w *windowKey, n, limit int64, ttl time.Duration) (limiter.Context, error) {
	if !l.remote { // memory: cannot fail or block
		return l.store.incr(ctx, w, n, limit, ttl)
	}
	if rs, ok := l.store.(*redisStore); ok {
		if res, ok := rs.held(w, n, limit, ttl); ok { // from this replica's batch (batch.go)
			return res, nil
		}
	}
	sctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	res, err := l.store.incr(sctx, w, n, limit, ttl)
	if err != nil && ctx.Err() != nil {
		return res, fmt.Errorf("%w: %w", errCallerGone, err)
	}
	return res, err
}

// storeFailed counts a TakeAt the store did not answer and logs it, at most
// once per storeErrLogEvery. The error comes from the Redis client (address,
// timeout, Redis reply) or its breaker and never holds the key.
func (l *Limiter) storeFailed(err error) {
	n := l.storeErrs.Add(1)
	l.failing.Store(true)
	now := l.now().UnixNano()
	last := l.lastLogged.Load()
	if last != 0 && now-last < int64(storeErrLogEvery) || !l.lastLogged.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("rate limit store failed; on_store_error applies",
		"err", err, "on_store_error", l.cfg.OnStoreError, "store_errors_total", n)
}

// storeAnswered logs the end of an outage once.
func (l *Limiter) storeAnswered() {
	if l.failing.Load() && l.failing.CompareAndSwap(true, false) {
		l.log.Info("rate limit store answering again", "store_errors_total", l.storeErrs.Load())
	}
}

// localShare charges n requests that the store could not count to this
// replica's share of the key's allowance (see above): past it, the request
// is refused, its StoreErr saying so.
func (l *Limiter) localShare(ctx context.Context, d *Decision, w *windowKey, n, limit int64, ttl time.Duration) {
	replicas := int64(max(l.fleet(), 1))
	share := (limit + replicas - 1) / replicas
	if res, _ := l.local.incr(ctx, w, n, share, ttl); res.Reached {
		d.Allowed = false
		d.StoreErr = fmt.Errorf("%w (this replica's share, %d of %d, is spent)", d.StoreErr, share, limit)
	}
}
