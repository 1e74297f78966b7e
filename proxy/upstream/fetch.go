package upstream

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"tradergate/cache"
	"tradergate/limits"
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
	// Transport, when set, wraps the HTTP transport to the legacy host
	// (tracing's, which sends traceparent); nil: the transport as is.
	Transport func(http.RoundTripper) http.RoundTripper
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
	log      *slog.Logger

	// Breaker transitions on their way to the log (logTransitions), so the
	// callback under gobreaker's lock never waits on a logger.
	transitions chan transition
	stop        chan struct{}
	done        sync.WaitGroup
	closeOnce   sync.Once
}

// transition is a breaker's change of state, on its way to the log.
type transition struct {
	route    string
	from, to gobreaker.State
}

// New builds the client of cfg (validated, defaults applied) for the routes
// of the table. Close releases what it starts.
func New(cfg Config, routes []*route.Route, opt Options) *Client {
	c := &Client{
		cfg:         cfg,
		host:        newLegacyHost(cfg, opt.Transport),
		shield:      limits.NewShield(cfg.ShieldConfig),
		budget:      newRetryBudget(cfg.Retry),
		routes:      routes,
		opt:         opt,
		log:         opt.Logger,
		transitions: make(chan transition, 64),
		stop:        make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.SetBreaker(cfg.Breaker)
	c.done.Add(1)
	go c.logTransitions()
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
// hands the line to logTransitions; if that falls behind, the line is
// dropped rather than blocking a request.
func (c *Client) breakerChanged(route string, from, to gobreaker.State) {
	if c.opt.BreakerChanged != nil {
		c.opt.BreakerChanged(route, to)
	}
	select {
	case c.transitions <- transition{route, from, to}:
	default:
	}
}

// logTransitions writes the breaker transition lines until Close.
func (c *Client) logTransitions() {
	defer c.done.Done()
	for {
		select {
		case t := <-c.transitions:
			c.log.Warn("circuit breaker", "route", t.route, "from", t.from.String(), "to", t.to.String())
		case <-c.stop:
			return
		}
	}
}

// Close closes idle connections to the legacy host and stops the client's
// goroutine. Call it after the last Fetch.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		c.host.close()
		close(c.stop)
		c.done.Wait()
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

// Info is where Fetch records the last legacy call it made, for the access
// log line of the request that started it. It is written with atomics: a
// fetch may outlive its request (a coalesced flight, a refresh).
type Info struct {
	Status   atomic.Int32
	Duration atomic.Int64 // nanoseconds
}

// Fetch gets one page from the legacy host within upstream.timeout:
// attempts through the 429 hold, the shield and the route's breaker,
// retried within the budget while someone still waits for the page
// (cache.Abandoned). Errors are *Error, a shield error from limits, or the
// context's error when the call was abandoned.
func (c *Client) Fetch(ctx context.Context, req *route.Request, requestID string, info *Info) (*Page, error) {
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
		page, f, err := c.attempt(ctx, req, requestID, info)
		if err == nil || n >= c.cfg.Retry.MaxAttempts || !retryable(f) || cache.Abandoned(ctx) {
			return page, err
		}
		wait := backoff(c.cfg.Retry, n, f)
		if deadline, ok := ctx.Deadline(); wait > c.cfg.Retry.MaxBackoff || ok && time.Until(deadline) <= wait {
			// An upstream Retry-After longer than we may wait, or no time
			// left for another attempt: this error is the answer.
			return nil, err
		}
		if !c.budget.withdraw() {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// attempt is one legacy call: held back after a legacy 429, capped by the
// shield, allowed by the route's breaker, its outcome reported to it.
func (c *Client) attempt(ctx context.Context, req *route.Request, requestID string, info *Info) (*Page, facts, error) {
	if err := c.host.held(); err != nil {
		return nil, facts{}, err
	}
	release, err := c.shield.Acquire(ctx)
	if err != nil {
		return nil, facts{}, err
	}
	defer release()
	done, err := (*c.breakers.Load())[req.Route.Index()].allow()
	if err != nil {
		return nil, facts{}, err
	}
	start := time.Now() // wall time: a duration, whatever the injected clock does
	page, f, err := c.host.fetch(ctx, req, requestID)
	done(err)
	took := time.Since(start)
	if c.opt.Observe != nil {
		c.opt.Observe(req.Route.Name, f.status, took)
	}
	info.Status.Store(int32(f.status))
	info.Duration.Store(int64(took))
	return page, f, err
}
