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
