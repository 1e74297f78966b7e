package limits

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of Config, filled by ApplyDefaults.
const (
	DefaultRedisPrefix  = "tradergate:rl"
	DefaultStoreTimeout = 100 * time.Millisecond
	// OnStoreErrorAllow serves a request whose allowance could not be
	// checked: a Redis outage must not take the edge down with it (issue 4).
	OnStoreErrorAllow = "allow"
	// OnStoreErrorDeny refuses such a request with 503, for operators who
	// would rather shed load than serve it unmetered.
	OnStoreErrorDeny = "deny"
)

// defaultAnonymous is the per-client-IP allowance of requests without a valid
// key. It only has to let an honest client see its 401 and throttle key
// guessing, so it is small.
var defaultAnonymous = Plan{Requests: 30, Window: time.Minute}

// Config is the `limits:` section of config.yaml. Zero values mean the
// defaults named in the field comments; ApplyDefaults fills them in.
type Config struct {
	// RedisURL selects the store. "" (zero) keeps the counters in this
	// process: correct for one node only. redis://[user:pass@]host:port/db
	// (or rediss:// for TLS) makes one quota shared by every replica that
	// names the same Redis (DESIGN "Scale beyond one machine"). Timeouts and
	// retries given as URL query parameters are overridden by StoreTimeout.
	RedisURL string `yaml:"redis_url"`
	// RedisPrefix starts every Redis key, so that several deployments can
	// share one Redis. Zero: "tradergate:rl".
	RedisPrefix string `yaml:"redis_prefix"`
	// StoreTimeout bounds one store call (dial, pool wait, command); past it
	// OnStoreError decides. A slow Redis must not hang requests. Zero: 100ms.
	StoreTimeout time.Duration `yaml:"store_timeout"`
	// OnStoreError is "allow" (zero; serve unmetered) or "deny" (answer 503)
	// when the store fails or is slower than StoreTimeout.
	OnStoreError string `yaml:"on_store_error"`
	// Anonymous is the allowance per client IP for requests whose key is
	// missing or invalid, so key guessing is throttled (issue 4, item 4).
	// Zero: 30 requests per 1m.
	Anonymous Plan `yaml:"anonymous"`
	// TrustedProxies lists the IPs or CIDRs whose X-Forwarded-For is
	// believed (see ClientIP). Zero: none; the peer address is the client.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// ApplyDefaults fills the zero fields with their documented defaults.
func (c *Config) ApplyDefaults() {
	if c.RedisPrefix == "" {
		c.RedisPrefix = DefaultRedisPrefix
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
	if c.OnStoreError == "" {
		c.OnStoreError = OnStoreErrorAllow
	}
	if c.Anonymous == (Plan{}) {
		c.Anonymous = defaultAnonymous
	}
}

// Validate reports the first problem as one line that names the field path,
// e.g. "limits.on_store_error: must be allow or deny". Zero values are valid
// (they mean the default), so it may run before or after ApplyDefaults.
func (c Config) Validate() error {
	if c.RedisURL != "" {
		if _, err := redisOptions(c.RedisURL); err != nil {
			return fmt.Errorf("limits.redis_url: %w", err)
		}
	}
	if strings.ContainsAny(c.RedisPrefix, " \t\r\n") {
		return errors.New("limits.redis_prefix: must not contain white space")
	}
	if c.StoreTimeout < 0 {
		return fmt.Errorf("limits.store_timeout: must be positive, got %v", c.StoreTimeout)
	}
	switch c.OnStoreError {
	case "", OnStoreErrorAllow, OnStoreErrorDeny:
	default:
		return errors.New("limits.on_store_error: must be allow or deny")
	}
	if c.Anonymous != (Plan{}) {
		if err := c.Anonymous.Validate(); err != nil {
			return fmt.Errorf("limits.anonymous.%w", err)
		}
	}
	for i, s := range c.TrustedProxies {
		if _, err := parseTrusted(s); err != nil {
			return fmt.Errorf("limits.trusted_proxies[%d]: %w", i, err)
		}
	}
	return nil
}

// redisOptions parses a redis URL without ever echoing it: it may carry a
// password, and url.Parse quotes the whole input in its errors.
func redisOptions(raw string) (*redis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a valid URL (expected redis://host:port/db)")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("scheme must be redis or rediss, got %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("host is missing (expected redis://host:port/db)")
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		// go-redis names the offending part (db number, query parameter),
		// never the credentials.
		return nil, err
	}
	return opt, nil
}

// parseTrusted reads one trusted_proxies entry: a CIDR or a single address.
func parseTrusted(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP or CIDR", s)
		}
		p = p.Masked()
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			// ::ffff:10.0.0.0/104 means 10.0.0.0/8; peers are unmapped
			// before matching (see ClientIP).
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP or CIDR", s)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}
