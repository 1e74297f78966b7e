package upstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"tradergate/proxy/route"
)

// Circuit breakers: one per route, so one failing endpoint does not close
// the others (docs/ARCHITECTURE.md "Breakers per route"). The two-step form
// fits a proxy: Allow before the legacy call, the outcome reported after it.

// BreakerConfig is upstream.breaker.
type BreakerConfig struct {
	// MinRequests is how many calls the breaker must see in one Interval
	// before it may trip; zero: 20.
	MinRequests uint32 `yaml:"min_requests"`
	// FailureRatio trips the breaker when failures/calls reach it; zero: 0.5.
	FailureRatio float64 `yaml:"failure_ratio"`
	// Interval is the counting window of the closed state; zero: 10s.
	Interval time.Duration `yaml:"interval"`
	// OpenTimeout is how long the breaker stays open before it lets probes
	// through; zero: 5s.
	OpenTimeout time.Duration `yaml:"open_timeout"`
	// HalfOpenProbes is how many calls the half-open breaker lets through;
	// that many successes close it, one failure opens it again. Zero: 3.
	HalfOpenProbes uint32 `yaml:"half_open_probes"`
}

func (c *BreakerConfig) applyDefaults() {
	c.MinRequests = cmp.Or(c.MinRequests, 20)
	c.FailureRatio = cmp.Or(c.FailureRatio, 0.5)
	c.Interval = cmp.Or(c.Interval, 10*time.Second)
	c.OpenTimeout = cmp.Or(c.OpenTimeout, 5*time.Second)
	c.HalfOpenProbes = cmp.Or(c.HalfOpenProbes, 3)
}

func (c *BreakerConfig) validate() []string {
	var errs []string
	if c.FailureRatio <= 0 || c.FailureRatio > 1 {
		errs = append(errs, fmt.Sprintf("upstream.breaker.failure_ratio: must be in (0, 1], got %v", c.FailureRatio))
	}
	if c.Interval < time.Second {
		errs = append(errs, fmt.Sprintf("upstream.breaker.interval: must be at least 1s, got %v", c.Interval))
	}
	if c.OpenTimeout < 10*time.Millisecond {
		errs = append(errs, fmt.Sprintf("upstream.breaker.open_timeout: must be at least 10ms, got %v", c.OpenTimeout))
	}
	return errs
}

// routeBreaker is the breaker of one route.
type routeBreaker struct {
	cb          *gobreaker.TwoStepCircuitBreaker[struct{}]
	openTimeout time.Duration
	// openedAt is when the breaker last opened (Unix ns), for Retry-After.
	// gobreaker keeps time with time.Now, so this does too.
	openedAt atomic.Int64
	// transitions counts state changes, for metrics.
	transitions atomic.Uint64
}

// breakers holds one breaker per route, by route index.
type breakers []*routeBreaker

// onChange is called by gobreaker under its lock: it must stay cheap (set
// a gauge, hand the line to a logger; nothing that waits).
type onChange func(route string, from, to gobreaker.State)

func newBreakers(c BreakerConfig, routes []*route.Route, notify onChange) breakers {
	bs := make(breakers, len(routes))
	for _, r := range routes {
		b := &routeBreaker{openTimeout: c.OpenTimeout}
		minReq, ratio := c.MinRequests, c.FailureRatio
		b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        r.Name,
			MaxRequests: c.HalfOpenProbes,
			Interval:    c.Interval,
			Timeout:     c.OpenTimeout,
			ReadyToTrip: func(n gobreaker.Counts) bool {
				return n.Requests >= minReq && float64(n.TotalFailures) >= ratio*float64(n.Requests)
			},
			OnStateChange: func(name string, from, to gobreaker.State) {
				if to == gobreaker.StateOpen {
					b.openedAt.Store(time.Now().UnixNano())
				}
				b.transitions.Add(1)
				if notify != nil {
					notify(name, from, to)
				}
			},
			IsSuccessful: breakerSuccess,
			IsExcluded:   breakerExcluded,
		})
		bs[r.Index()] = b
	}
	return bs
}

// allow asks the route's breaker for one legacy call. When it refuses, the
// error is a 503 whose Retry-After is the time left before it half-opens.
func (b *routeBreaker) allow() (done func(error), err error) {
	done, err = b.cb.Allow()
	if err == nil {
		return done, nil
	}
	retry := time.Second // half-open with its probes all out: soon
	if errors.Is(err, gobreaker.ErrOpenState) {
		left := b.openTimeout - time.Since(time.Unix(0, b.openedAt.Load()))
		retry = max(left, time.Second)
	}
	return nil, &Error{Reason: Unavailable, RetryAfter: retry, Err: err}
}

// breakerSuccess: a call that got an answer that is not the legacy host's
// failure. A refusal is the client's (or our request's) doing, not the
// host's health.
func breakerSuccess(err error) bool {
	if err == nil {
		return true
	}
	e, ok := errors.AsType[*Error](err)
	return ok && e.Reason == Refused
}

// breakerExcluded: calls that say nothing about the legacy host: the
// caller went away or the edge is stopping (both cancel the call), or the
// legacy host asked us to slow down (429, handled by the hold instead).
func breakerExcluded(err error) bool {
	if errors.Is(err, context.Canceled) {
		return true
	}
	e, ok := errors.AsType[*Error](err)
	return ok && e.Reason == RateLimited
}
