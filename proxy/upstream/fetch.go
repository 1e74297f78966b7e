package upstream

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"tradergate/limits"
	"tradergate/proxy/breaker"
	"tradergate/proxy/route"
)

// Options are what a Client takes from its owner rather than from the
// configuration.
type Options struct {
	// Logger receives breaker transitions; nil discards them.
	Logger *slog.Logger
	// Observe, when set, is told of every legacy call: the route, the legacy
	// host's status (0 when none came) and how long the call took.
	Observe func(route string, status int, took time.Duration)
	// BreakerChanged, when set, is told of every breaker transition. It runs
	// under the breaker's lock: it must stay cheap (set a gauge).
	BreakerChanged func(route string, to gobreaker.State)
	// Tracer, when set, records a span per Fetch (its attempts and waits)
	// under the span in the caller's context; nil: none.
	Tracer trace.Tracer
	// Propagator, when set, writes the trace's context (traceparent) into
	// every legacy call's header; nil: none is sent.
	Propagator propagation.TextMapPropagator
}

// Client fetches pages from the legacy host. It is safe for concurrent use.
type Client struct {
	cfg      Config
	host     *legacyHost
	shield   *limits.Shield
	budget   *retryBudget
	breakers atomic.Pointer[breakers] // swapped by SetBreaker
	routes   []*route.Route
	opt      Options
	// transitions writes the breakers' transition lines off their locks.
	transitions *breaker.Log
	closeOnce   sync.Once
}

// New builds the client of cfg (validated, defaults applied) for the routes
// of the table. Close releases what it starts.
func New(cfg Config, routes []*route.Route, opt Options) *Client {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		cfg:    cfg,
		host:   newLegacyHost(cfg, opt),
		shield: limits.NewShield(cfg.ShieldConfig),
		budget: newRetryBudget(cfg.Retry),
		routes: routes,
		opt:    opt,
		transitions: breaker.NewLog(func(t breaker.Transition) {
			log.Warn("circuit breaker", "route", t.Name, "from", t.From.String(), "to", t.To.String())
		}),
	}
	c.SetBreaker(cfg.Breaker)
	return c
}

// SetBreaker replaces every route's breaker with new ones of cfg, closed:
// the settings changed, and so may have the operator's view of the legacy
// host. Calls already allowed report to the breakers they started with.
func (c *Client) SetBreaker(cfg BreakerConfig) {
	cfg.applyDefaults()
	bs := newBreakers(cfg, c.routes, c.breakerChanged)
	c.breakers.Store(&bs)
}

// breakerChanged runs under gobreaker's lock: it sets the owner's gauge and
// hands the line to the transition log, which never blocks.
func (c *Client) breakerChanged(route string, from, to gobreaker.State) {
	if c.opt.BreakerChanged != nil {
		c.opt.BreakerChanged(route, to)
	}
	c.transitions.Changed(route, from, to)
}

// Close closes idle connections to the legacy host and stops the client's
// goroutine. Call it after the last Fetch.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		c.host.close()
		c.transitions.Close()
	})
}

// CloseIdle closes idle connections to the legacy host.
func (c *Client) CloseIdle() { c.host.close() }

// BreakerState is the state of a route's breaker ("closed", "open",
// "half-open"), or "" for an unknown route.
func (c *Client) BreakerState(name string) string {
	for _, r := range c.routes {
		if r.Name == name {
			return (*c.breakers.Load())[r.Index()].cb.State().String()
		}
	}
	return ""
}

// RetryStats are the retries made and those the budget refused.
func (c *Client) RetryStats() (retried, refused uint64) { return c.budget.counts() }

// InFlight is the number of legacy calls holding a shield slot.
func (c *Client) InFlight() int { return c.shield.InFlight() }

// Call is the last legacy call a Fetch made, for the access log line of
// the request that started it.
type Call struct {
	Status int           // the legacy host's status; 0 when none came
	Took   time.Duration // how long the call took
}

// Fetch gets one page from the legacy host within upstream.timeout:
// attempts through the 429 hold, the shield and the route's breaker,
// retried within the budget until abandoned reports that nobody waits for
// the page any more (nil: somebody always does). Errors are *Error, a
// shield error from limits, or the context's error when the call was
// abandoned. last is the last legacy call made, whether it failed or not
// (zero when none was).
func (c *Client) Fetch(ctx context.Context, req *route.Request, requestID string, abandoned func() bool) (_ *Page, last Call, _ error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if c.opt.Tracer != nil {
		var span trace.Span
		ctx, span = c.opt.Tracer.Start(ctx, "upstream.fetch", trace.WithAttributes(
			attribute.String("tradergate.route", req.Route.Name), attribute.String("tradergate.request_id", requestID)))
		defer span.End()
	}
	c.budget.deposit()
	for n := 1; ; n++ {
		page, out, err := c.attempt(ctx, cancel, req, requestID, &last)
		if err == nil || n >= c.cfg.Retry.MaxAttempts || !retryable(out) || abandoned != nil && abandoned() {
			return page, last, err
		}
		wait := backoff(c.cfg.Retry, n, out)
		if deadline, ok := ctx.Deadline(); wait > c.cfg.Retry.MaxBackoff || ok && time.Until(deadline) <= wait {
			// An upstream Retry-After longer than we may wait, or no time
			// left for another attempt: this error is the answer.
			return nil, last, err
		}
		if !c.budget.withdraw() {
			return nil, last, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, last, err
		}
	}
}

// attempt is one legacy call: held back after a legacy 429, capped by the
// shield, allowed by the route's breaker, its outcome reported to it; a
// call made is told in *last. cancel ends ctx, the Fetch's: the route's
// breaker runs it if it opens during the call, and the Fetch then ends
// with the breaker's refusal, never a retry.
func (c *Client) attempt(ctx context.Context, cancel context.CancelFunc, req *route.Request, requestID string, last *Call) (*Page, outcome, error) {
	if err := c.host.held(); err != nil {
		return nil, outcome{}, err
	}
	b := (*c.breakers.Load())[req.Route.Index()]
	if err := b.open(); err != nil {
		return nil, outcome{}, err
	}
	release, err := c.shield.Acquire(ctx)
	if err != nil {
		return nil, outcome{}, err
	}
	defer release()
	call, err := b.allow(cancel)
	if err != nil {
		return nil, outcome{}, err
	}
	start := time.Now() // wall time: a duration, whatever the injected clock does
	page, out, err := c.host.fetch(ctx, req, requestID)
	if call.end() && err != nil {
		// The breaker opened during the call and ended it: a 503 with its
		// Retry-After, not retried (the breaker refuses the next attempt).
		err, out = b.refusal(gobreaker.ErrOpenState), outcome{}
	}
	call.record(err)
	took := time.Since(start)
	if c.opt.Observe != nil {
		c.opt.Observe(req.Route.Name, out.status, took)
	}
	*last = Call{Status: out.status, Took: took}
	return page, out, err
}
