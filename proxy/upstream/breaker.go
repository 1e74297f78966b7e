package upstream

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"tradergate/cache/configerr"
	"tradergate/proxy/route"
)

// Circuit breakers: one per route, so one failing endpoint does not close
// the others (docs/ARCHITECTURE.md "Breakers per route"). The two-step form
// fits a proxy: Allow before the legacy call, the outcome reported after it.
//
// A hanging legacy host must trip the breaker as surely as one that
// answers 503, so two rules make slow failures count:
//
//   - The window rolls in one-second buckets (gobreaker's BucketPeriod), and
//     an outcome counts in the bucket its call started in for as long as
//     that bucket is inside the window: a failure that takes 8 s to show is
//     not dropped because a fixed window ended meanwhile.
//   - A call still outstanding after slow_call is recorded as a failure at
//     that moment (a slow call, as resilience4j counts them); its own
//     outcome, when it comes, is not counted again. So a hang opens the
//     breaker slow_call after min_requests calls have started, not after
//     the upstream timeout.
//
// When the breaker opens, the calls of its route still outstanding are
// cancelled (their callers get the 503 of an open breaker, or a stale
// page): they hold upstream slots that other routes need, for an answer
// that the breaker has just judged will not come.

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
	// SlowCall is how long a call may be outstanding before it counts as
	// a failure (the call goes on; its own outcome is then not counted).
	// Zero: 2s. It must be shorter than Interval.
	SlowCall time.Duration `yaml:"slow_call"`
}

// bucketPeriod is the step of the breaker's rolling window.
const bucketPeriod = time.Second

func (c *BreakerConfig) applyDefaults() {
	c.MinRequests = cmp.Or(c.MinRequests, 20)
	c.FailureRatio = cmp.Or(c.FailureRatio, 0.5)
	c.Interval = cmp.Or(c.Interval, 10*time.Second)
	c.OpenTimeout = cmp.Or(c.OpenTimeout, 5*time.Second)
	c.HalfOpenProbes = cmp.Or(c.HalfOpenProbes, 3)
	c.SlowCall = cmp.Or(c.SlowCall, 2*time.Second)
}

func (c *BreakerConfig) validate() error {
	var errs configerr.List
	if c.FailureRatio <= 0 || c.FailureRatio > 1 {
		errs.Add("upstream.breaker.failure_ratio", "must be in (0, 1], got %v", c.FailureRatio)
	}
	if c.Interval < time.Second {
		errs.Add("upstream.breaker.interval", "must be at least 1s, got %v", c.Interval)
	}
	if c.OpenTimeout < 10*time.Millisecond {
		errs.Add("upstream.breaker.open_timeout", "must be at least 10ms, got %v", c.OpenTimeout)
	}
	if c.SlowCall != 0 && (c.SlowCall < 10*time.Millisecond || c.SlowCall >= c.Interval) {
		errs.Add("upstream.breaker.slow_call", "must be at least 10ms and shorter than interval (%v), got %v", c.Interval, c.SlowCall)
	}
	return errs.Err()
}

// routeBreaker is the breaker of one route.
type routeBreaker struct {
	cb          *gobreaker.TwoStepCircuitBreaker[struct{}]
	openTimeout time.Duration
	slowCall    time.Duration
	// openedAt is when the breaker last opened (Unix ns), for Retry-After.
	// gobreaker keeps time with time.Now, so this does too.
	openedAt atomic.Int64
	// transitions counts state changes, for metrics.
	transitions atomic.Uint64
	// calls ends when the breaker opens, and with it runs the cancel of
	// every call allowed until then and still outstanding. Swapped for a
	// new one at each opening, under gobreaker's lock (OnStateChange).
	calls atomic.Pointer[callGroup]
}

// callGroup is the context the calls allowed between two openings share:
// when it ends, the cancel of each call still outstanding runs (allow).
type callGroup struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newCallGroup() *callGroup {
	ctx, cancel := context.WithCancel(context.Background())
	return &callGroup{ctx: ctx, cancel: cancel}
}

// errSlowCall is what the breaker records for a call outstanding longer
// than slow_call.
var errSlowCall = errors.New("legacy call slower than upstream.breaker.slow_call")

// breakers holds one breaker per route, by route index.
type breakers []*routeBreaker

// onChange is called by gobreaker under its lock: it must stay cheap (set
// a gauge, hand the line to a logger; nothing that waits).
type onChange func(route string, from, to gobreaker.State)

func newBreakers(c BreakerConfig, routes []*route.Route, notify onChange) breakers {
	bs := make(breakers, len(routes))
	for _, r := range routes {
		b := &routeBreaker{openTimeout: c.OpenTimeout, slowCall: c.SlowCall}
		b.calls.Store(newCallGroup())
		minReq, ratio := c.MinRequests, c.FailureRatio
		b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:         r.Name,
			MaxRequests:  c.HalfOpenProbes,
			Interval:     c.Interval,
			BucketPeriod: bucketPeriod,
			Timeout:      c.OpenTimeout,
			ReadyToTrip: func(n gobreaker.Counts) bool {
				return n.Requests >= minReq && float64(n.TotalFailures) >= ratio*float64(n.Requests)
			},
			OnStateChange: func(name string, from, to gobreaker.State) {
				if to == gobreaker.StateOpen {
					b.openedAt.Store(time.Now().UnixNano())
					// Cancelling ends the calls' sockets through their
					// contexts; nothing here waits for them.
					b.calls.Swap(newCallGroup()).cancel()
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

// open reports whether the breaker refuses every call now: checked before
// a call queues for an upstream slot, so that a route known to be failing
// answers at once rather than after the shield's queue_timeout.
func (b *routeBreaker) open() error {
	if b.cb.State() != gobreaker.StateOpen {
		return nil
	}
	return b.refusal(gobreaker.ErrOpenState)
}

// allow asks the route's breaker for one legacy call. When it refuses, the
// error is a 503 whose Retry-After is the time left before it half-opens.
// Allowed, the call must end with the call's end and then its record: if
// the breaker opens while the call is outstanding, cancel runs (it ends
// the context the call runs under), and a call outstanding at slow_call is
// recorded as slow by a timer of its own.
//
// The call keeps what it needs in one struct with methods (the breaker's
// report, the once that keeps it to one outcome, the slow-call timer and
// the stop of cancel), and adds no context of its own: the caller's cancel
// is the one the opening runs, so a miss does not pay for a context, its
// cancel function and its registration with the caller's, nor for a
// closure per step.
func (b *routeBreaker) allow(cancel context.CancelFunc) (*breakerCall, error) {
	report, err := b.cb.Allow()
	if err != nil {
		return nil, b.refusal(err)
	}
	call := &breakerCall{report: report}
	call.slow = time.AfterFunc(b.slowCall, call.slowCall)
	call.stop = context.AfterFunc(b.calls.Load().ctx, cancel)
	return call, nil
}

// breakerCall is one legacy call a route's breaker allowed.
type breakerCall struct {
	report func(error) // gobreaker's, for the call's one outcome
	once   sync.Once
	slow   *time.Timer
	// stop keeps the breaker's opening from running the call's cancel.
	stop func() bool
}

// slowCall records the call as slow: its slow_call timer fired.
func (c *breakerCall) slowCall() { c.record(errSlowCall) }

// end stops the call's slow_call timer and its cancel on opening, and
// reports whether the breaker opened while it was outstanding (its cancel
// ran, or is running).
func (c *breakerCall) end() (opened bool) {
	c.slow.Stop()
	return !c.stop()
}

// record reports the call's outcome to the breaker, unless its slow_call
// timer reported it already: a call counts once.
func (c *breakerCall) record(err error) {
	c.once.Do(func() { c.report(err) })
}

// refusal is the 503 of a breaker that refused a call with err.
func (b *routeBreaker) refusal(err error) error {
	retry := time.Second // half-open with its probes all out: soon
	if errors.Is(err, gobreaker.ErrOpenState) {
		left := b.openTimeout - time.Since(time.Unix(0, b.openedAt.Load()))
		retry = max(left, time.Second)
	}
	return &Error{Reason: Unavailable, RetryAfter: retry, Err: err}
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
// caller went away or the edge is stopping (both cancel the call), the
// breaker itself cancelled it on opening, or the legacy host asked us to
// slow down (429, handled by the hold instead).
//
// A 401 or 403 (Credential) is counted as a failure, deliberately: it
// refuses the edge's own key, so every call of the route would fail alike
// until an operator fixes the key; the open breaker stops sending a
// refused key to the legacy host, serves held pages, and shows in
// tradergate_breaker_state and the log (docs/OPERATING.md "When the
// legacy host fails").
func breakerExcluded(err error) bool {
	if errors.Is(err, context.Canceled) {
		return true
	}
	e, ok := errors.AsType[*Error](err)
	return ok && (e.Reason == RateLimited || e.Reason == Unavailable)
}
