// Package fleet is the replicas' shared Redis: the `redis:` configuration
// section and the one client that every shared part (rate limits, the page
// cache's second level, fleet-wide locks) uses, behind one circuit breaker.
//
// A Redis that is down, at start or later, never stops a replica: the
// breaker refuses commands at once with ErrUnavailable, each part falls back
// to working alone, and the client recovers by itself when Redis returns.
//
// It imports proxy/breaker, its neighbour, to log its breaker's changes
// off gobreaker's lock as the upstream breakers do, with one logger.
package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/sony/gobreaker/v2"

	"tradergate/proxy/breaker"
)

// MaxCall is the longest any one call may take, whatever its caller's
// deadline; callers should bound their calls below it.
const MaxCall = time.Second

// Options are the collaborators of a Conn.
type Options struct {
	// Logger receives one line when Redis becomes unreachable and one when
	// it is reachable again. nil: discard.
	Logger *slog.Logger
}

// Conn is the open connection to the shared Redis. It is safe for
// concurrent use; Close it once every user of Client is done.
type Conn struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	log     *slog.Logger
	brk     *breakerHook

	stateGauge  prometheus.Gauge
	transitions *prometheus.CounterVec
	errs        prometheus.Counter
	// changes writes the breaker's transitions off its lock (logChange).
	changes *breaker.Log

	closeOnce sync.Once
	closeErr  error
}

// Open builds the client for cfg (defaults are applied to a copy) and warms
// its pool (warm), waiting at most warmFor. It never fails for a Redis that
// is down or slow at start: the warm-up's failures open the breaker, and
// the replica works alone until Redis answers. cfg must be Enabled and
// valid; getenv reads the password from cfg.PasswordEnv.
func Open(cfg Config, getenv func(string) string, opt Options) (*Conn, error) {
	cfg.ApplyDefaults()
	if !cfg.Enabled() {
		return nil, errors.New("redis.addrs: empty, nothing to open")
	}
	if err := cfg.Validate(getenv); err != nil {
		return nil, err
	}
	uo, err := clientOptions(cfg, getenv)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		prefix:  cfg.Prefix,
		timeout: cfg.Timeout,
		log:     opt.Logger,
		stateGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tradergate_redis_breaker_state",
			Help: "State of the breaker in front of the shared Redis: 0 closed, 1 half-open, 2 open (each replica works alone).",
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_redis_breaker_transitions_total",
			Help: "Changes of state of the breaker in front of the shared Redis, by the state entered.",
		}, []string{"to"}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tradergate_redis_errors_total",
			Help: "Redis commands that failed: not answered, too slow, or refused at once by the open breaker.",
		}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range []gobreaker.State{gobreaker.StateClosed, gobreaker.StateHalfOpen, gobreaker.StateOpen} {
		c.transitions.WithLabelValues(s.String()) // each series exists from the start
	}
	c.changes = breaker.NewLog(c.logChange())
	c.brk = newBreakerHook(c.errs, c.stateChanged)
	c.client = redis.NewUniversalClient(uo)
	c.client.AddHook(c.brk)
	if cc, ok := c.client.(*redis.ClusterClient); ok {
		// A ClusterClient runs its hooks around whole commands but dials
		// through its node clients, which need the dial gate of their own.
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(dialGate{c.brk}) })
	}

	c.log.Info("redis configured", "mode", mode(cfg), "addrs", cfg.Addrs, "prefix", cfg.Prefix, "timeout", cfg.Timeout)
	c.warm(warmConns, warmFor(cfg))
	return c, nil
}

// warmConns is how many connections warm opens (per master in a Cluster):
// enough for a cold burst's first calls not to dial under redis.timeout,
// a fraction of go-redis's pool (10 per CPU).
const warmConns = 8

// warmFor bounds the warm-up: a few calls' worth of redis.timeout, within
// StallAfter, so that its timeouts never count as failures by themselves.
func warmFor(cfg Config) time.Duration {
	return min(max(4*cfg.Timeout, 200*time.Millisecond), StallAfter/2)
}

// warm opens n connections before the first request, so that a burst at
// start finds them open rather than dialling each under redis.timeout: n
// concurrent PINGs, each holding a connection of its own. Its failures are
// the breaker's business, like any command's.
func (c *Conn) warm(n int, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var wg sync.WaitGroup
	pings := func(ctx context.Context, cl redis.Cmdable) {
		for range n {
			wg.Go(func() { _ = cl.Ping(ctx).Err() })
		}
	}
	if cc, ok := c.client.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			pings(ctx, node)
			return nil
		})
	} else {
		pings(ctx, c.client)
	}
	wg.Wait()
}

// clientOptions are go-redis's options for cfg: one attempt per call, the
// breaker deciding when to try again. The client's own timeouts are only a
// ceiling (maxCall): each caller bounds its calls with its context's
// deadline (redis.timeout for the limiter, cache.l2.timeout for a miss's
// calls), which go-redis applies to the socket.
func clientOptions(cfg Config, getenv func(string) string) (*redis.UniversalOptions, error) {
	uo := &redis.UniversalOptions{
		Addrs:      cfg.Addrs,
		MasterName: cfg.MasterName,
		DB:         cfg.DB,
		Username:   cfg.Username,
		// One dial attempt and no command retries: a retry would double
		// what a request waits, and the breaker decides when to try again.
		DialerRetries: 1,
		MaxRetries:    -1,
		DialTimeout:   max(cfg.Timeout, MaxCall),
		ReadTimeout:   max(cfg.Timeout, MaxCall),
		WriteTimeout:  max(cfg.Timeout, MaxCall),
		PoolTimeout:   max(cfg.Timeout, MaxCall),
		// A caller's shorter deadline is honoured on the socket.
		ContextTimeoutEnabled: true,
		// Neither is needed, and each costs a round trip on every new
		// connection (CLIENT SETINFO; CLIENT MAINT_NOTIFICATIONS).
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if cfg.PasswordEnv != "" {
		uo.Password = getenv(cfg.PasswordEnv)
	}
	if cfg.TLS {
		uo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CAFile != "" {
			pool, err := loadCA(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("redis.ca_file: %w", err)
			}
			uo.TLSConfig.RootCAs = pool
		}
	}

	return uo, nil
}

func mode(cfg Config) string {
	switch {
	case cfg.MasterName != "":
		return "sentinel"
	case cfg.cluster():
		return "cluster"
	}
	return "single"
}

// stateChanged is the breaker's OnStateChange. It runs under the breaker's
// lock, on the goroutine of whichever command caused the change, so it only
// updates metrics and hands the change to the log.
func (c *Conn) stateChanged(name string, from, to gobreaker.State) {
	c.stateGauge.Set(float64(to))
	c.transitions.WithLabelValues(to.String()).Inc()
	c.changes.Changed(name, from, to)
}

// logChange returns the writer of the breaker's transitions: one line when
// Redis becomes unreachable and one when it is reachable again, whatever
// the traffic. The half-open probes in between are in the metrics, not
// the log.
func (c *Conn) logChange() func(breaker.Transition) {
	down := false
	return func(t breaker.Transition) {
		switch {
		case t.To == gobreaker.StateOpen && !down:
			down = true
			var cause any = "unknown"
			if err := c.brk.lastErr.Load(); err != nil {
				cause = *err // go-redis's text: address and reason, never the password
			}
			c.log.Warn("redis unreachable: each replica works alone",
				"err", cause, "trip_after", TripAfter, "retry_every", OpenFor)
		case t.To == gobreaker.StateClosed && down:
			down = false
			c.log.Info("redis reachable again")
		}
	}
}

// Client is the shared client, for the parts that keep state in Redis. Its
// commands go through the breaker: while it is open they fail at once with
// an error wrapping ErrUnavailable. Callers must not Close it; Conn.Close
// does.
func (c *Conn) Client() redis.UniversalClient { return c.client }

// Key is the prefix and parts joined by ":", e.g. Key("rl") is
// "tradergate:rl". Every key of the fleet should be made by it, so that
// deployments sharing a Redis do not meet.
func (c *Conn) Key(parts ...string) string {
	return strings.Join(append([]string{c.prefix}, parts...), ":")
}

// Timeout is redis.timeout, the bound on one call; callers that give a call
// its own deadline should not make it shorter.
func (c *Conn) Timeout() time.Duration { return c.timeout }

// State is the breaker's state: "closed" (Redis in use), "half-open" (one
// probe in flight) or "open" (commands refused).
func (c *Conn) State() string { return c.brk.cb.State().String() }

// Collectors are the Conn's metrics, for the caller to register on its own
// registry: tradergate_redis_breaker_state, ..._breaker_transitions_total
// {to} and tradergate_redis_errors_total.
func (c *Conn) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.stateGauge, c.transitions, c.errs}
}

// Close closes the client and stops the Conn's goroutine. Commands after
// Close fail. Closing twice returns the first result.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.client.Close()
		c.changes.Close()
	})
	return c.closeErr
}
