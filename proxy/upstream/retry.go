package upstream

import (
	"cmp"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"tradergate/cache/configerr"
)

// Retries: an idempotent GET that failed on a connection error or a 502/503/504 is tried again, with exponential backoff and full
// jitter, at most MaxAttempts times, and only while the retry budget allows:
// retries may be at most BudgetRatio of the calls, so an outage is not
// multiplied by the retries it provokes.

// RetryConfig is upstream.retry.
type RetryConfig struct {
	// MaxAttempts counts the first call too; 1 turns retries off. Zero: 3.
	MaxAttempts int `yaml:"max_attempts"`
	// BaseBackoff is the first backoff cap; it doubles per retry. Zero: 50ms.
	BaseBackoff time.Duration `yaml:"base_backoff"`
	// MaxBackoff caps a backoff, the upstream's Retry-After included: a
	// longer Retry-After is not waited for. Zero: 1s.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// BudgetRatio is the most retries per call, over time. Zero: 0.1.
	BudgetRatio float64 `yaml:"budget_ratio"`
	// BudgetReserve is the retries allowed on top of the ratio, so a quiet
	// edge can still retry its few calls. Zero: 10.
	BudgetReserve float64 `yaml:"budget_reserve"`
}

func (c *RetryConfig) applyDefaults() {
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 3)
	c.BaseBackoff = cmp.Or(c.BaseBackoff, 50*time.Millisecond)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, time.Second)
	c.BudgetRatio = cmp.Or(c.BudgetRatio, 0.1)
	c.BudgetReserve = cmp.Or(c.BudgetReserve, 10)
}

func (c *RetryConfig) validate() error {
	var errs configerr.List
	if c.MaxAttempts < 1 || c.MaxAttempts > 10 {
		errs.Add("upstream.retry.max_attempts", "must be 1 to 10, got %d", c.MaxAttempts)
	}
	if c.BaseBackoff <= 0 || c.MaxBackoff < c.BaseBackoff {
		errs.Add("upstream.retry.max_backoff", "must be at least base_backoff (%v), got %v", c.BaseBackoff, c.MaxBackoff)
	}
	if c.BudgetRatio < 0 || c.BudgetRatio > 1 {
		errs.Add("upstream.retry.budget_ratio", "must be in [0, 1], got %v", c.BudgetRatio)
	}
	if c.BudgetReserve < 0 {
		errs.Add("upstream.retry.budget_reserve", "must not be negative, got %v", c.BudgetReserve)
	}
	return errs.Err()
}

// retryBudget is a token bucket fed by calls (Finagle's RetryBudget, gRPC's
// retry throttling): each first attempt deposits ratio tokens, each retry
// withdraws one. The balance is capped so a long quiet spell does not bank
// an outage's worth of retries.
type retryBudget struct {
	mu      sync.Mutex
	balance float64
	ratio   float64
	max     float64
	refused uint64
	retried uint64
}

func newRetryBudget(c RetryConfig) *retryBudget {
	return &retryBudget{ratio: c.BudgetRatio, balance: c.BudgetReserve, max: c.BudgetReserve + 100*c.BudgetRatio}
}

func (b *retryBudget) deposit() {
	b.mu.Lock()
	b.balance = min(b.balance+b.ratio, b.max)
	b.mu.Unlock()
}

// withdraw takes one retry from the budget, if it holds one.
func (b *retryBudget) withdraw() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.balance < 1 {
		b.refused++
		return false
	}
	b.balance--
	b.retried++
	return true
}

// counts returns the retries made and refused by the budget, for metrics.
func (b *retryBudget) counts() (retried, refused uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retried, b.refused
}

// retryable reports whether a failed attempt may be tried again: the
// legacy host could not be reached, or answered 502/503/504. A timeout has
// used the call's deadline already; anything else is an answer.
func retryable(out outcome) bool {
	return out.connFailed || out.status == http.StatusBadGateway ||
		out.status == http.StatusServiceUnavailable || out.status == http.StatusGatewayTimeout
}

// backoff is the wait before retry n (1 for the first retry): full jitter
// over an exponentially growing cap (AWS Architecture Blog, "Exponential
// Backoff and Jitter"), or the upstream's Retry-After when it gave one.
func backoff(c RetryConfig, n int, out outcome) time.Duration {
	if out.retryAfter > 0 {
		return out.retryAfter
	}
	ceiling := min(c.BaseBackoff<<min(n-1, 20), c.MaxBackoff)
	return rand.N(ceiling + 1)
}
