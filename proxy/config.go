package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"tradergate/cache"
	"tradergate/limits"
)

// Config is the whole configuration file. Each package owns its section as
// a plain struct; the comment on a field says what its zero value means, and
// applyDefaults fills those zeros (gobreaker Settings style).
type Config struct {
	Server   ServerConfig           `yaml:"server"`
	Upstream UpstreamConfig         `yaml:"upstream"`
	Keys     []KeyConfig            `yaml:"keys"`
	Plans    map[string]limits.Plan `yaml:"plans"`
	Limits   limits.Config          `yaml:"limits"`
	Cache    cache.Config           `yaml:"cache"`
	Admin    AdminConfig            `yaml:"admin"`
	Log      LogConfig              `yaml:"log"`
}

// LogConfig is the log section. Logs are JSON lines (log/slog) on stderr.
type LogConfig struct {
	// Level is debug, info, warn or error; zero: info. Reloaded on SIGHUP.
	Level string `yaml:"level"`
	// Access writes one line per request; zero (left out): true.
	Access *bool `yaml:"access"`
}

// AccessLog reports whether the access log is on.
func (c LogConfig) AccessLog() bool { return c.Access == nil || *c.Access }

// SlogLevel is Level as a slog.Level.
func (c LogConfig) SlogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.Level)) // Validate refused anything else
	return l
}

// ServerConfig is the client-facing HTTP server.
type ServerConfig struct {
	// Listen is the address of the client listener; zero: ":8080".
	Listen string `yaml:"listen"`
	// ReadHeaderTimeout bounds how long a client may take to send its
	// headers; zero: 5s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request; zero: 10s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response, from the end of the request
	// headers; zero: 30s. It must exceed upstream.timeout.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle this long; zero: 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ShutdownTimeout is how long in-flight requests may drain on SIGTERM;
	// zero: 15s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long, on SIGTERM, the edge keeps accepting requests
	// while /readyz already says "not ready", so a load balancer stops
	// sending first; zero: none.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// MaxHeaderBytes caps request line plus headers; zero: 16384.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// TLS is TLS at the edge; zero: off (plain HTTP).
	TLS TLSConfig `yaml:"tls"`
}

// Price scales of the legacy host (SPEC "Conventions"): cents (variant B as
// documented) or already 0..1.
const (
	PriceScaleCents = "cents"
	PriceScaleUnit  = "unit"
)

// UpstreamConfig is the legacy host.
type UpstreamConfig struct {
	// BaseURL of the legacy host including the /open-api prefix. Required.
	BaseURL string `yaml:"base_url"`
	// KeyEnv names the environment variable holding the edge's own legacy
	// API key; zero: "TRADERGATE_UPSTREAM_KEY". The variable must be set.
	KeyEnv string `yaml:"key_env"`
	// Timeout bounds fetching one page from the legacy host: every attempt,
	// body included, and the backoff between them; zero: 10s.
	Timeout time.Duration `yaml:"timeout"`
	// DialTimeout bounds connecting; zero: 2s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// TLSHandshakeTimeout bounds the TLS handshake with an https legacy
	// host; zero: 2s.
	TLSHandshakeTimeout time.Duration `yaml:"tls_handshake_timeout"`
	// ResponseHeaderTimeout bounds the wait for the status line after the
	// request is sent; zero: 8s.
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
	// PriceScale is "cents" (variant B prices are 0 to 100) or "unit"
	// (already 0 to 1: no shift); zero: "cents".
	PriceScale string `yaml:"price_scale"`
	// MaxBodyBytes caps an upstream body (after decompression); a larger one
	// is a 502. Zero: 32 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxIdleConns is the keep-alive pool to the legacy host; zero: 256.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// MaxConcurrent caps legacy calls in flight across the edge; zero: 64.
	MaxConcurrent int `yaml:"max_concurrent"`
	// PerSecond caps legacy calls started per second; zero: 200.
	PerSecond float64 `yaml:"per_second"`
	// QueueTimeout is how long a miss may wait for a slot under those caps
	// before it is served stale, or a 503; zero: 1s.
	QueueTimeout time.Duration `yaml:"queue_timeout"`
	// Retry is how failed calls are retried.
	Retry RetryConfig `yaml:"retry"`
	// Breaker is the per-route circuit breaker.
	Breaker BreakerConfig `yaml:"breaker"`

	// Key is the resolved value of KeyEnv; never printed.
	Key string `yaml:"-"`
}

// KeyConfig is one client API key, kept as its SHA-256 only (SPEC
// "Authentication": the key is a secret).
type KeyConfig struct {
	// ID names the key in logs and metrics in place of the key. Required,
	// unique.
	ID string `yaml:"id"`
	// SHA256 is the hex SHA-256 of the key (`tradergate hash-key`).
	// Required, unique.
	SHA256 string `yaml:"sha256"`
	// Plan names an entry of plans. Required.
	Plan string `yaml:"plan"`
	// Routes the key may use: route names, or "*" for all. Required: a key
	// that may use nothing is a mistake, not a default.
	Routes []string `yaml:"routes"`
	// Limit overrides the plan's allowance for this key; absent: the plan's.
	Limit *limits.Plan `yaml:"limit"`
}

// ParseConfig decodes a configuration file strictly (unknown fields are
// errors) and fills defaults. It does not validate; call Validate.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := decodeStrict(data, &c); err != nil {
		return nil, err
	}
	c.applyDefaults()
	return &c, nil
}

func (c *Config) applyDefaults() {
	s := &c.Server
	s.Listen = cmp(s.Listen, ":8080")
	s.ReadHeaderTimeout = cmp(s.ReadHeaderTimeout, 5*time.Second)
	s.ReadTimeout = cmp(s.ReadTimeout, 10*time.Second)
	s.WriteTimeout = cmp(s.WriteTimeout, 30*time.Second)
	s.IdleTimeout = cmp(s.IdleTimeout, 120*time.Second)
	s.ShutdownTimeout = cmp(s.ShutdownTimeout, 15*time.Second)
	s.MaxHeaderBytes = cmp(s.MaxHeaderBytes, 16<<10)
	s.TLS.applyDefaults()

	u := &c.Upstream
	u.KeyEnv = cmp(u.KeyEnv, "TRADERGATE_UPSTREAM_KEY")
	u.Timeout = cmp(u.Timeout, 10*time.Second)
	u.DialTimeout = cmp(u.DialTimeout, 2*time.Second)
	u.TLSHandshakeTimeout = cmp(u.TLSHandshakeTimeout, 2*time.Second)
	u.Retry.applyDefaults()
	u.Breaker.applyDefaults()
	u.ResponseHeaderTimeout = cmp(u.ResponseHeaderTimeout, 8*time.Second)
	u.PriceScale = cmp(u.PriceScale, PriceScaleCents)
	u.MaxBodyBytes = cmp(u.MaxBodyBytes, 32<<20)
	u.MaxIdleConns = cmp(u.MaxIdleConns, 256)
	sh := u.shield()
	sh.ApplyDefaults()
	u.MaxConcurrent, u.PerSecond, u.QueueTimeout = sh.MaxConcurrent, sh.PerSecond, sh.QueueTimeout

	c.Limits.ApplyDefaults()
	c.Cache.ApplyDefaults()
	c.Admin.applyDefaults()
	c.Log.Level = cmp(c.Log.Level, "info")
}

// shield is the upstream caps as the limits package takes them.
func (u *UpstreamConfig) shield() limits.ShieldConfig {
	return limits.ShieldConfig{MaxConcurrent: u.MaxConcurrent, PerSecond: u.PerSecond, QueueTimeout: u.QueueTimeout}
}

// cmp returns v, or def when v is the zero value.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Validate checks every field and resolves the upstream key from getenv. All
// problems are reported on one line, each naming its field.
func (c *Config) Validate(getenv func(string) string) error {
	var errs []string
	add := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}

	s := &c.Server
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		add("server.listen", "must be host:port, got %q", s.Listen)
	}
	for name, d := range map[string]time.Duration{
		"server.read_header_timeout": s.ReadHeaderTimeout, "server.read_timeout": s.ReadTimeout,
		"server.write_timeout": s.WriteTimeout, "server.idle_timeout": s.IdleTimeout,
		"server.shutdown_timeout": s.ShutdownTimeout, "server.drain_delay": s.DrainDelay,
		"upstream.timeout":      c.Upstream.Timeout,
		"upstream.dial_timeout": c.Upstream.DialTimeout, "upstream.response_header_timeout": c.Upstream.ResponseHeaderTimeout,
		"upstream.tls_handshake_timeout": c.Upstream.TLSHandshakeTimeout,
	} {
		if d < 0 {
			add(name, "must not be negative, got %v", d)
		}
	}
	if s.MaxHeaderBytes < 1024 {
		add("server.max_header_bytes", "must be at least 1024, got %d", s.MaxHeaderBytes)
	}
	errs = append(errs, s.TLS.validate()...)
	errs = append(errs, c.Admin.validate()...)
	if err := new(slog.Level).UnmarshalText([]byte(c.Log.Level)); err != nil {
		add("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}

	u := &c.Upstream
	if bu, err := url.Parse(u.BaseURL); u.BaseURL == "" {
		add("upstream.base_url", "is required (the legacy host, including /open-api)")
	} else if err != nil || (bu.Scheme != "http" && bu.Scheme != "https") || bu.Host == "" || bu.RawQuery != "" || bu.User != nil {
		// Credentials in the URL would end up in logs; the key has its own
		// variable.
		add("upstream.base_url", "must be an http(s) URL without query or credentials, got %q", u.BaseURL)
	} else {
		u.BaseURL = strings.TrimSuffix(u.BaseURL, "/")
	}
	if u.Key = getenv(u.KeyEnv); u.Key == "" {
		add("upstream.key_env", "environment variable %s (the edge's legacy API key) is not set", u.KeyEnv)
	}
	if u.PriceScale != PriceScaleCents && u.PriceScale != PriceScaleUnit {
		add("upstream.price_scale", "must be %q or %q, got %q", PriceScaleCents, PriceScaleUnit, u.PriceScale)
	}
	if u.MaxBodyBytes < 1024 {
		add("upstream.max_body_bytes", "must be at least 1024, got %d", u.MaxBodyBytes)
	}
	if u.Timeout > 0 && s.WriteTimeout > 0 && s.WriteTimeout <= u.Timeout {
		add("server.write_timeout", "must exceed upstream.timeout (%v), or slow upstream answers are cut off mid-write", u.Timeout)
	}

	errs = append(errs, u.Retry.validate()...)
	errs = append(errs, u.Breaker.validate()...)
	if err := u.shield().Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if err := c.Cache.Validate(RouteNames()); err != nil {
		errs = append(errs, err.Error())
	}
	for name, p := range c.Plans {
		if err := p.Validate(); err != nil {
			add("plans."+name, "%v", err)
		}
	}
	if len(c.Keys) == 0 {
		add("keys", "at least one key is required (hash one with `tradergate hash-key`)")
	}
	routes := RouteNames()
	ids, hashes := map[string]bool{}, map[string]bool{}
	for i, k := range c.Keys {
		f := fmt.Sprintf("keys[%d]", i)
		switch {
		case k.ID == "":
			add(f+".id", "is required")
		case ids[k.ID]:
			add(f+".id", "duplicate id %q", k.ID)
		}
		ids[k.ID] = true
		k.SHA256 = strings.ToLower(k.SHA256)
		c.Keys[i].SHA256 = k.SHA256
		switch {
		case len(k.SHA256) != 64 || strings.Trim(k.SHA256, "0123456789abcdef") != "":
			add(f+".sha256", "must be 64 hex digits (the SHA-256 of the key, from `tradergate hash-key`)")
		case hashes[k.SHA256]:
			add(f+".sha256", "duplicate of another key")
		}
		hashes[k.SHA256] = true
		if _, ok := c.Plans[k.Plan]; !ok {
			add(f+".plan", "unknown plan %q (plans: %s)", k.Plan, strings.Join(sortedKeys(c.Plans), ", "))
		}
		if k.Limit != nil {
			if err := k.Limit.Validate(); err != nil {
				add(f+".limit", "%v", err)
			}
		}
		if len(k.Routes) == 0 {
			add(f+".routes", "is required: route names or \"*\" (routes: %s)", strings.Join(routes, ", "))
		}
		for _, r := range k.Routes {
			if r != "*" && !slices.Contains(routes, r) {
				add(f+".routes", "unknown route %q (routes: %s)", r, strings.Join(routes, ", "))
			}
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
