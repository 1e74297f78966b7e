package upstream

import (
	"cmp"
	"net/url"
	"strings"
	"time"

	"tradergate/cache/configerr"
	"tradergate/limits"
)

// Price scales of the legacy host (docs/CONTRACT.md "Conventions"): cents
// (variant B as documented) or already 0..1.
const (
	PriceScaleCents = "cents"
	PriceScaleUnit  = "unit"
)

// How pages travel from the legacy host: gzip (asked for with
// Accept-Encoding, inflated by the edge) or as they are. gzip moves a
// fifth of the bytes and costs the edge the inflating, about a fifth of a
// miss's CPU (docs/BENCHMARKS.md): worth it across a WAN, not from a host
// on the same network.
const (
	compressionGzip = "gzip"
	compressionNone = "none"
)

// Config is the `upstream:` section: the legacy host, how it is called, and
// how its failures are retried and broken.
type Config struct {
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
	// Compression is how pages are asked for: "gzip" or "none"; zero:
	// "gzip".
	Compression string `yaml:"compression"`
	// ShieldConfig caps the calls in flight and per second (max_concurrent,
	// per_second, queue_timeout, at this level of the section).
	limits.ShieldConfig `yaml:",inline"`
	// Retry is how failed calls are retried.
	Retry RetryConfig `yaml:"retry"`
	// Breaker is the per-route circuit breaker.
	Breaker BreakerConfig `yaml:"breaker"`

	// Key is the resolved value of KeyEnv (Validate sets it); never printed.
	Key string `yaml:"-"`
	// Proxy is the proxy the legacy host is dialled through, resolved from
	// the proxy variables (Validate sets it, legacyProxy); nil: directly.
	// Never printed: it may hold credentials.
	Proxy *url.URL `yaml:"-"`
}

// ApplyDefaults fills the zero fields with the defaults their comments name.
func (c *Config) ApplyDefaults() {
	c.KeyEnv = cmp.Or(c.KeyEnv, "TRADERGATE_UPSTREAM_KEY")
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.DialTimeout = cmp.Or(c.DialTimeout, 2*time.Second)
	c.TLSHandshakeTimeout = cmp.Or(c.TLSHandshakeTimeout, 2*time.Second)
	c.ResponseHeaderTimeout = cmp.Or(c.ResponseHeaderTimeout, 8*time.Second)
	c.PriceScale = cmp.Or(c.PriceScale, PriceScaleCents)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 32<<20)
	c.MaxIdleConns = cmp.Or(c.MaxIdleConns, 256)
	c.Compression = cmp.Or(c.Compression, compressionGzip)
	c.ShieldConfig.ApplyDefaults()
	c.Retry.applyDefaults()
	c.Breaker.applyDefaults()
}

// Validate checks the section and resolves Key and Proxy from getenv.
// Each problem is one line naming its field.
func (c *Config) Validate(getenv func(string) string) error {
	var errs configerr.List
	add := func(field, format string, args ...any) { errs.Add("upstream."+field, format, args...) }
	if bu, err := url.Parse(c.BaseURL); c.BaseURL == "" {
		add("base_url", "is required (the legacy host, including /open-api)")
	} else if err != nil || (bu.Scheme != "http" && bu.Scheme != "https") || bu.Host == "" || bu.RawQuery != "" || bu.User != nil {
		// Credentials in the URL would end up in logs; the key has its own
		// variable.
		add("base_url", "must be an http(s) URL without query or credentials, got %q", c.BaseURL)
	} else {
		c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
		var err error
		if c.Proxy, err = legacyProxy(bu, proxyVars(getenv)); err != nil {
			errs.AddHint("upstream.base_url", "fix the variable, or name the host in NO_PROXY to dial it directly", "is reached through a proxy: %v", err)
		}
	}
	if c.Key = getenv(c.KeyEnv); c.Key == "" {
		add("key_env", "environment variable %s (the edge's legacy API key) is not set", c.KeyEnv)
	}
	for name, d := range map[string]time.Duration{
		"timeout": c.Timeout, "dial_timeout": c.DialTimeout,
		"response_header_timeout": c.ResponseHeaderTimeout, "tls_handshake_timeout": c.TLSHandshakeTimeout,
	} {
		if d < 0 {
			add(name, "must not be negative, got %v", d)
		}
	}
	if c.PriceScale != PriceScaleCents && c.PriceScale != PriceScaleUnit {
		add("price_scale", "must be %q or %q, got %q", PriceScaleCents, PriceScaleUnit, c.PriceScale)
	}
	if c.Compression != compressionGzip && c.Compression != compressionNone {
		add("compression", "must be %q or %q, got %q", compressionGzip, compressionNone, c.Compression)
	}
	if c.MaxBodyBytes < 1024 {
		add("max_body_bytes", "must be at least 1024, got %d", c.MaxBodyBytes)
	}
	errs.Append(c.Retry.validate())
	errs.Append(c.Breaker.validate())
	errs.Append(c.ShieldConfig.Validate())
	return errs.Err()
}
