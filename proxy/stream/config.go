package stream

import (
	"time"

	"tradergate/cache/configerr"
)

// Config is the `streams:` section: the server-sent event streams of the
// order book events and of a trader's activity and transfers
// (docs/CONTRACT.md#streams). Fixed at start but for nothing: a reload
// keeps every open stream, and a changed figure applies on restart.
type Config struct {
	// Heartbeat is how long a stream may go without a byte before the
	// edge sends a comment line, so that proxies and clients in between
	// do not take a quiet stream for a dead one. Zero: 15s.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// Retry is the reconnection delay the edge tells clients (the
	// stream's first `retry:` field, and again before it ends a stream
	// on shutdown). Zero: 2s.
	Retry time.Duration `yaml:"retry"`
	// MaxPerKey is how many streams one API key may hold open on one
	// replica; one more is refused with 429. Zero: 8.
	MaxPerKey int `yaml:"max_per_key"`
	// BufferBytes bounds what the edge holds for one subscriber that
	// does not read as fast as events come: past it the stream ends with
	// an `error` event (reason slow_consumer). Zero: 262144.
	BufferBytes int `yaml:"buffer_bytes"`
	// WriteTimeout bounds one write to a subscriber's connection; a
	// client that takes no bytes for this long is cut off. Zero: 10s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// History is how many recent events each stream keeps, so that a
	// client reconnecting with Last-Event-ID resumes from memory rather
	// than from pages. Zero: 4096.
	History int `yaml:"history"`
	// CatchUpPages bounds the pages one stream request reads to catch up
	// from its cursor, Last-Event-ID or from= to the live events; past
	// it the stream ends with an `error` event (reason too_far_behind)
	// naming the last id sent, and the client resumes by reconnecting
	// (each reconnection costs one request of its allowance). Zero: 10.
	CatchUpPages int `yaml:"catch_up_pages"`
	// Linger is how long a stream's poller keeps running after its last
	// subscriber left, so that a client reconnecting at once finds its
	// events in memory. Zero: 30s.
	Linger time.Duration `yaml:"linger"`
	// Lease is how long one replica holds a stream's poller for the
	// fleet (with Redis): it renews it every third of it, and another
	// replica takes over within it once the holder stops renewing. Zero:
	// 5s.
	Lease time.Duration `yaml:"lease"`
	// Routes holds each streamed route's poll interval, by route name
	// (orderbook_events, activity, deposits_withdrawals).
	Routes map[string]RouteConfig `yaml:"routes"`
}

// RouteConfig is one streamed route's settings.
type RouteConfig struct {
	// Poll is how often the stream's poller reads the route's next page.
	// It is never below the route's fresh TTL (cache.policy.fresh_ttl or
	// its route's override): a shorter interval would read the same
	// cached page. Zero: 1s.
	Poll time.Duration `yaml:"poll"`
}

// Defaults of Config.
const (
	defaultHeartbeat    = 15 * time.Second
	defaultRetry        = 2 * time.Second
	defaultMaxPerKey    = 8
	defaultBufferBytes  = 256 << 10
	defaultWriteTimeout = 10 * time.Second
	defaultHistory      = 4096
	defaultCatchUpPages = 10
	defaultLinger       = 30 * time.Second
	defaultLease        = 5 * time.Second
	defaultPoll         = time.Second
)

// Streamed routes: the route names of config and metrics.
const (
	RouteOrderBook = "orderbook_events"
	RouteActivity  = "activity"
	RouteTransfers = "deposits_withdrawals"
)

// Routes lists the streamed routes.
var Routes = []string{RouteOrderBook, RouteActivity, RouteTransfers}

// ApplyDefaults fills the zero fields with the defaults their comments name.
func (c *Config) ApplyDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Heartbeat, defaultHeartbeat)
	def(&c.Retry, defaultRetry)
	def(&c.WriteTimeout, defaultWriteTimeout)
	def(&c.Linger, defaultLinger)
	def(&c.Lease, defaultLease)
	if c.MaxPerKey == 0 {
		c.MaxPerKey = defaultMaxPerKey
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = defaultBufferBytes
	}
	if c.History == 0 {
		c.History = defaultHistory
	}
	if c.CatchUpPages == 0 {
		c.CatchUpPages = defaultCatchUpPages
	}
	if c.Routes == nil {
		c.Routes = map[string]RouteConfig{}
	}
	for _, name := range Routes {
		rc := c.Routes[name]
		def(&rc.Poll, defaultPoll)
		c.Routes[name] = rc
	}
}

// Validate reports every problem, each naming its field path, joined.
func (c *Config) Validate() error {
	var errs configerr.List
	positive := func(path string, d, least time.Duration) {
		if d < least {
			errs.Add(path, "must be at least %v, got %v", least, d)
		}
	}
	positive("streams.heartbeat", c.Heartbeat, time.Second)
	positive("streams.retry", c.Retry, 100*time.Millisecond)
	positive("streams.write_timeout", c.WriteTimeout, 100*time.Millisecond)
	positive("streams.linger", c.Linger, 0)
	positive("streams.lease", c.Lease, time.Second)
	if c.MaxPerKey < 1 {
		errs.Add("streams.max_per_key", "must be at least 1, got %d", c.MaxPerKey)
	}
	if c.BufferBytes < 16<<10 || c.BufferBytes > 64<<20 {
		errs.Add("streams.buffer_bytes", "must be 16384 to 67108864, got %d", c.BufferBytes)
	}
	if c.History < 16 || c.History > 1_000_000 {
		errs.Add("streams.history", "must be 16 to 1000000, got %d", c.History)
	}
	if c.CatchUpPages < 1 || c.CatchUpPages > 1000 {
		errs.Add("streams.catch_up_pages", "must be 1 to 1000, got %d", c.CatchUpPages)
	}
	for name, rc := range c.Routes {
		known := false
		for _, r := range Routes {
			known = known || r == name
		}
		if !known {
			errs.Add("streams.routes."+name, "not a streamed route (orderbook_events, activity, deposits_withdrawals)")
			continue
		}
		positive("streams.routes."+name+".poll", rc.Poll, 100*time.Millisecond)
	}
	return errs.Err()
}
