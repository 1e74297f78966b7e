package limits

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestShieldCapsConcurrency(t *testing.T) {
	const limit, callers = 5, 50
	s := NewShield(ShieldConfig{MaxConcurrent: limit, PerSecond: 1e6, QueueTimeout: time.Minute})
	var inFlight, maxSeen atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := s.Acquire(bg)
			if err != nil {
				t.Error(err)
				return
			}
			n := inFlight.Add(1)
			for {
				m := maxSeen.Load()
				if n <= m || maxSeen.CompareAndSwap(m, n) {
					break
				}
			}
			if got := s.InFlight(); got > limit {
				t.Errorf("InFlight() = %d", got)
			}
			// A slow legacy call: the latency under test, which lets the
			// callers overlap; nothing waits on it.
			time.Sleep(5 * time.Millisecond)
			inFlight.Add(-1)
			release()
			release() // a second release must not free a second slot
		}()
	}
	wg.Wait()
	if m := maxSeen.Load(); m > limit || m < 1 {
		t.Fatalf("max in flight %d, want 1..%d", m, limit)
	}
	if s.InFlight() != 0 {
		t.Fatalf("InFlight() = %d after all released", s.InFlight())
	}
}

func TestShieldQueueTimeout(t *testing.T) {
	s := NewShield(ShieldConfig{MaxConcurrent: 1, PerSecond: 1e6, QueueTimeout: 20 * time.Millisecond})
	release, err := s.Acquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	_, err = s.Acquire(bg)
	var full *ShieldFullError
	if !errors.Is(err, ErrShieldFull) || !errors.As(err, &full) {
		t.Fatalf("err = %v, want ErrShieldFull carrying a *ShieldFullError", err)
	}
	if full.RetryAfter <= 0 || CeilSeconds(full.RetryAfter) < 1 {
		t.Fatalf("retry hint %v / %ds", full.RetryAfter, CeilSeconds(full.RetryAfter))
	}
}

func TestShieldRateQueueTimeout(t *testing.T) {
	// One token per 10s and a spent burst: the next token is beyond the
	// queue timeout, so Acquire gives up at once with that delay as hint.
	s := NewShield(ShieldConfig{MaxConcurrent: 10, PerSecond: 0.1, QueueTimeout: 50 * time.Millisecond})
	release, err := s.Acquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	release()
	_, err = s.Acquire(bg)
	var full *ShieldFullError
	if !errors.As(err, &full) || full.RetryAfter < 5*time.Second {
		t.Fatalf("err = %v, want a ShieldFullError with the limiter's delay (~10s)", err)
	}
	if s.InFlight() != 0 || len(s.slots) != 0 {
		t.Fatal("a refused Acquire kept its slot")
	}
}

// waitedCtx closes waited the first time someone asks for Done: a caller
// about to wait on the context.
type waitedCtx struct {
	context.Context
	once   sync.Once
	waited chan struct{}
}

func (c *waitedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waited) })
	return c.Context.Done()
}

func TestShieldContext(t *testing.T) {
	s := NewShield(ShieldConfig{MaxConcurrent: 1, QueueTimeout: time.Minute})
	release, err := s.Acquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	// Cancelled once Acquire waits on it: the wait for a slot ends.
	inner, cancel := context.WithCancel(bg)
	ctx := &waitedCtx{Context: inner, waited: make(chan struct{})}
	go func() { <-ctx.waited; cancel() }()
	if _, err := s.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := s.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: err = %v", err)
	}
}

func TestShieldRateCap(t *testing.T) {
	// Count starts over a bounded run against the token bucket's bound
	// (burst + rate * elapsed; +1 for rounding). A call starts no earlier
	// than its token's time and elapsed is measured after the run, so a slow
	// machine only loosens the bound; nothing here depends on speed.
	const perSecond = 50
	s := NewShield(ShieldConfig{MaxConcurrent: 100, PerSecond: perSecond, QueueTimeout: 10 * time.Millisecond})
	start := time.Now()
	var started atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; first || time.Since(start) < 300*time.Millisecond; first = false {
				release, err := s.Acquire(bg)
				if err != nil {
					if !errors.Is(err, ErrShieldFull) {
						t.Error(err)
						return
					}
					continue
				}
				started.Add(1)
				release()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	bound := perSecond + int64(perSecond*elapsed.Seconds()) + 1
	t.Logf("%d calls started in %v (bound %d)", started.Load(), elapsed, bound)
	if n := started.Load(); n > bound || n < 1 {
		t.Fatalf("%d calls started in %v; want 1 to %d", n, elapsed, bound)
	}
}

func TestShieldConfig(t *testing.T) {
	var c ShieldConfig
	c.ApplyDefaults()
	if c != (ShieldConfig{MaxConcurrent: 64, PerSecond: 200, QueueTimeout: time.Second}) {
		t.Fatalf("defaults %+v", c)
	}
	for _, tt := range []struct {
		c    ShieldConfig
		want string
	}{
		{ShieldConfig{}, ""},
		{ShieldConfig{MaxConcurrent: -1}, "upstream.max_concurrent: must be at least 1, got -1"},
		{ShieldConfig{PerSecond: -2}, "upstream.per_second: must be a positive number, got -2"},
		{ShieldConfig{QueueTimeout: -time.Second}, "upstream.queue_timeout: must be positive, got -1s"},
	} {
		err := tt.c.Validate()
		if got := errString(err); got != tt.want {
			t.Errorf("Validate(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
