package limits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/ulule/limiter/v3"
)

// What happens when the store fails (issue 4, item 2: the edge neither hangs
// nor answers 500; on_store_error allow | deny, a log line and a counter).
//
// Each store call is bounded by StoreTimeout (Take). On top of that a
// circuit breaker (gobreaker, as the proxy uses per route) stops sending
// calls to a Redis that keeps failing: after storeTripAfter consecutive
// failures, Takes skip the store for storeOpenFor and let one probe through
// after it. A hanging Redis then costs StoreTimeout on a few requests, not
// on every one, and does not pin the client's connection pool. A probe that
// succeeds closes the breaker: a Redis that comes back is used again within
// about storeOpenFor.
const (
	storeTripAfter = 3
	storeOpenFor   = time.Second
	// storeErrLogEvery limits failure logs to one line per interval; the
	// line carries the running count, so no request logs on its own.
	storeErrLogEvery = 10 * time.Second
)

// errCallerGone marks a store call cut short by the caller's context: not
// the store's fault, so the breaker ignores it and it is not counted.
var errCallerGone = errors.New("caller gone")

func newStoreBreaker() *gobreaker.CircuitBreaker[limiter.Context] {
	return gobreaker.NewCircuitBreaker[limiter.Context](gobreaker.Settings{
		Name:        "limits-store",
		MaxRequests: 1,
		Timeout:     storeOpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= storeTripAfter },
		IsExcluded:  func(err error) bool { return errors.Is(err, errCallerGone) },
	})
}

// incr is one store call under StoreTimeout and, for Redis, the breaker.
func (l *Limiter) incr(ctx context.Context, key string, limit int64, ttl time.Duration) (limiter.Context, error) {
	if l.breaker == nil { // memory: cannot fail or block
		return l.store.incr(ctx, key, limit, ttl)
	}
	return l.breaker.Execute(func() (limiter.Context, error) {
		sctx, cancel := context.WithTimeout(ctx, l.cfg.StoreTimeout)
		defer cancel()
		res, err := l.store.incr(sctx, key, limit, ttl)
		if err != nil && ctx.Err() != nil {
			return res, fmt.Errorf("%w: %w", errCallerGone, err)
		}
		return res, err
	})
}

// storeFailed counts a Take the store did not answer and logs it, at most
// once per storeErrLogEvery. The error comes from the store client
// (address, timeout, Redis reply) or the breaker and never holds the key.
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
