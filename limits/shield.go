package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"tradergate/cache/configerr"

	"golang.org/x/time/rate"
)

// Defaults of ShieldConfig, filled by ApplyDefaults.
const (
	defaultShieldMaxConcurrent = 64
	defaultShieldPerSecond     = 200
	defaultShieldQueueTimeout  = time.Second
)

// ShieldConfig caps the calls the edge makes to the legacy host. It lives under `upstream:` in config.yaml. Zero values mean the
// defaults named in the field comments.
type ShieldConfig struct {
	// MaxConcurrent is the most legacy calls in flight at once. Zero: 64.
	MaxConcurrent int `yaml:"max_concurrent"`
	// PerSecond is the most legacy calls started per second, with a burst of
	// max(1, PerSecond). Zero: 200.
	PerSecond float64 `yaml:"per_second"`
	// QueueTimeout is how long a cache miss may wait for a slot before the
	// edge serves stale or answers 503. Zero: 1s.
	QueueTimeout time.Duration `yaml:"queue_timeout"`
}

// ApplyDefaults fills the zero fields with their documented defaults (and
// negative ones, which Validate rejects, so NewShield cannot panic).
func (c *ShieldConfig) ApplyDefaults() {
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = defaultShieldMaxConcurrent
	}
	if !(c.PerSecond > 0) || math.IsInf(c.PerSecond, 0) {
		c.PerSecond = defaultShieldPerSecond
	}
	if c.QueueTimeout <= 0 {
		c.QueueTimeout = defaultShieldQueueTimeout
	}
}

// Validate reports the first problem as one line naming the field path under
// upstream. Zero values are valid (they mean the default).
func (c ShieldConfig) Validate() error {
	var errs configerr.List
	if c.MaxConcurrent < 0 {
		errs.Add("upstream.max_concurrent", "must be at least 1, got %d", c.MaxConcurrent)
	}
	if c.PerSecond < 0 || math.IsNaN(c.PerSecond) || math.IsInf(c.PerSecond, 0) {
		errs.Add("upstream.per_second", "must be a positive number, got %v", c.PerSecond)
	}
	if c.QueueTimeout < 0 {
		errs.Add("upstream.queue_timeout", "must be positive, got %v", c.QueueTimeout)
	}
	return errs.Err()
}

// ErrShieldFull is the state "no upstream slot within QueueTimeout". Acquire
// returns it as a *ShieldFullError, which carries the retry hint; test with
// errors.Is and read the hint with errors.As.
var ErrShieldFull = errors.New("limits: upstream shield full")

// ShieldFullError is ErrShieldFull with a retry hint; the proxy turns it
// into 503 with Retry-After when it holds no stale copy.
type ShieldFullError struct {
	// RetryAfter is when a slot is likely: the rate limiter's own delay when
	// the per-second cap was the obstacle, else one second.
	RetryAfter time.Duration
}

func (e *ShieldFullError) Error() string {
	return fmt.Sprintf("%v, retry after %v", ErrShieldFull, e.RetryAfter)
}

// Is makes errors.Is(err, ErrShieldFull) hold.
func (e *ShieldFullError) Is(target error) bool { return target == ErrShieldFull }

// Shield caps legacy calls: at most MaxConcurrent in flight and at most
// PerSecond started per second. It is safe for concurrent use.
type Shield struct {
	slots chan struct{}
	// rateMu orders the rate limiter's calls with fresh times. x/time/rate
	// takes the caller's time and stores it even when it is older than the
	// last one (rate.go reserveN: lim.last = t), so two callers reading the
	// clock before racing for its lock credit the same interval twice and
	// let more calls start than PerSecond allows. Under rateMu every
	// reservation and cancellation reads the clock after the previous one.
	rateMu   sync.Mutex
	rate     *rate.Limiter
	timeout  time.Duration
	inFlight atomic.Int64
}

// NewShield builds a shield; zero fields of cfg take their defaults.
func NewShield(cfg ShieldConfig) *Shield {
	cfg.ApplyDefaults()
	return &Shield{
		slots:   make(chan struct{}, cfg.MaxConcurrent),
		rate:    rate.NewLimiter(rate.Limit(cfg.PerSecond), max(1, int(min(cfg.PerSecond, math.MaxInt32)))),
		timeout: cfg.QueueTimeout,
	}
}

// slotBusyRetryAfter is the hint when every slot stayed busy for the whole
// QueueTimeout: when one frees up is unknown, so the shortest whole second.
const slotBusyRetryAfter = time.Second

// Acquire waits for a slot, at most QueueTimeout. It returns the release
// func (call it once the legacy call is over; further calls do nothing), or
// a *ShieldFullError (errors.Is ErrShieldFull), or ctx.Err() when ctx ended
// first.
//
// The concurrency slot is taken first and the rate token second, so that the
// instant Acquire returns is the instant the token was scheduled for: calls
// start at most PerSecond per second, however long they queued for a slot.
func (s *Shield) Acquire(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.timeout)
	select {
	case s.slots <- struct{}{}:
	default:
		t := time.NewTimer(s.timeout)
		select {
		case s.slots <- struct{}{}:
			t.Stop()
		case <-t.C:
			return nil, &ShieldFullError{RetryAfter: slotBusyRetryAfter}
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	s.rateMu.Lock()
	now := time.Now()
	r := s.rate.ReserveN(now, 1) // burst >= 1: always OK
	delay := r.DelayFrom(now)
	if delay > 0 && now.Add(delay).After(deadline) {
		// r is the latest reservation, so cancelling it returns exactly
		// its token.
		r.CancelAt(now)
		s.rateMu.Unlock()
		<-s.slots
		return nil, &ShieldFullError{RetryAfter: delay}
	}
	s.rateMu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			// Later reservations may exist; CancelAt then returns only
			// what they did not build on, never more.
			s.rateMu.Lock()
			r.CancelAt(time.Now())
			s.rateMu.Unlock()
			<-s.slots
			return nil, ctx.Err()
		}
	}
	s.inFlight.Add(1)
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			s.inFlight.Add(-1)
			<-s.slots
		}
	}, nil
}

// InFlight is the number of calls holding a slot and started, for metrics.
func (s *Shield) InFlight() int { return int(s.inFlight.Load()) }
