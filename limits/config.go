package limits

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"tradergate/cache/configerr"
)

// Defaults of Options and Config.
const (
	// defaultRedisPrefix starts the limiter's keys when Options.RedisPrefix
	// is empty; the redis section's default prefix plus ":rl".
	defaultRedisPrefix = "tradergate:rl"
	// OnStoreErrorAllow serves a request whose allowance could not be
	// checked: a Redis outage must not take the edge down with it.
	OnStoreErrorAllow = "allow"
	// OnStoreErrorDeny refuses such a request with 503, for operators who
	// would rather shed load than serve it unmetered.
	OnStoreErrorDeny = "deny"
)

// defaultAnonymous is the per-client-IP allowance of requests without a valid
// key. It only has to let an honest client see its 401 and throttle key
// guessing, so it is small.
var defaultAnonymous = Plan{Requests: 30, Window: time.Minute}

// defaultAuthFailures is the per-client-IP allowance of failed
// authentications: enough for a client with a mistyped key to notice, far
// too few to guess one.
var defaultAuthFailures = Plan{Requests: 20, Window: time.Minute}

// AuthFailuresPolicy is the policy name of the per-IP bucket of failed
// authentications (RateLimit-Policy of a lockout's 429).
const AuthFailuresPolicy = "auth_failures"

// Config is the `limits:` section of config.yaml. Zero values mean the
// defaults named in the field comments; ApplyDefaults fills them in.
//
// Where the counters live is not part of it: with a shared Redis (the
// `redis:` section, package fleet) the caller passes its client in Options;
// without one they stay in this process.
type Config struct {
	// OnStoreError is "allow" (zero; serve unmetered) or "deny" (answer 503)
	// when the store fails or is slower than Options.RedisTimeout.
	OnStoreError string `yaml:"on_store_error"`
	// Anonymous is the allowance per client IP for requests whose key is
	// missing or invalid, so key guessing is throttled. Zero: 30 requests
	// per 1m.
	Anonymous Plan `yaml:"anonymous"`
	// FleetSize is how many replicas share each quota, for the local share
	// that each enforces while Redis is out with on_store_error: allow
	// (failmode.go). Zero: the number of replicas that last counted
	// themselves in Redis, 1 until then. Without Redis it is not used.
	FleetSize int `yaml:"fleet_size"`
	// RedisBatch is the most requests of a key's window that a replica
	// reserves from Redis at once and spends in memory (batch.go): a hot
	// key costs Redis one command per batch. A batch is also at most an
	// eighth of each replica's share of the allowance; a limit too small
	// for two is counted one request at a time, exactly. Zero: 64; 1:
	// every request is counted in Redis.
	RedisBatch int `yaml:"redis_batch"`
	// AuthFailures is the allowance per client IP of requests whose key is
	// wrong. Once it is spent the address is locked out until the window
	// ends: every request from it that offers a key, the right one
	// included, is 429. Zero: 20 per 1m. Reloaded on SIGHUP.
	AuthFailures Plan `yaml:"auth_failures"`
	// TrustedProxies lists the IPs or CIDRs whose X-Forwarded-For is
	// believed (see ClientIPFrom). Zero: none; the peer address is the client.
	TrustedProxies []string `yaml:"trusted_proxies"`

	// Deprecated: moved to redis.addrs and redis.password_env. Kept only so
	// that a config still setting it is refused with a line saying so.
	RedisURL string `yaml:"redis_url"`
	// Deprecated: moved to redis.prefix; refused like RedisURL.
	RedisPrefix string `yaml:"redis_prefix"`
	// Deprecated: moved to redis.timeout; refused like RedisURL.
	StoreTimeout time.Duration `yaml:"store_timeout"`
}

// ApplyDefaults fills the zero fields with their documented defaults.
func (c *Config) ApplyDefaults() {
	if c.OnStoreError == "" {
		c.OnStoreError = OnStoreErrorAllow
	}
	if c.Anonymous == (Plan{}) {
		c.Anonymous = defaultAnonymous
	}
	if c.AuthFailures == (Plan{}) {
		c.AuthFailures = defaultAuthFailures
	}
}

// Validate reports the first problem as one line that names the field path,
// e.g. "limits.on_store_error: must be allow or deny". Zero values are valid
// (they mean the default), so it may run before or after ApplyDefaults.
func (c Config) Validate() error {
	var errs configerr.List
	// Store settings here are refused rather than ignored: ignoring them
	// would silently turn a shared quota into one per replica. The URL is
	// not echoed, as it may hold a password.
	if c.RedisURL != "" {
		errs.AddHint("limits.redis_url", "set redis.addrs (and redis.password_env) in the redis section", "moved")
	}
	if c.RedisPrefix != "" {
		errs.AddHint("limits.redis_prefix", `set redis.prefix in the redis section (the limiter's keys start with it and ":rl")`, "moved")
	}
	if c.StoreTimeout != 0 {
		errs.AddHint("limits.store_timeout", "set redis.timeout in the redis section", "moved")
	}
	switch c.OnStoreError {
	case "", OnStoreErrorAllow, OnStoreErrorDeny:
	default:
		errs.Add("limits.on_store_error", "must be allow or deny, got %q", c.OnStoreError)
	}
	if c.Anonymous != (Plan{}) {
		errs.AppendAt("limits.anonymous", c.Anonymous.Validate())
	}
	if c.FleetSize < 0 {
		errs.Add("limits.fleet_size", "must not be negative (0: as counted in Redis), got %d", c.FleetSize)
	}
	if c.RedisBatch < 0 {
		errs.Add("limits.redis_batch", "must not be negative (0: %d, 1: no batches), got %d", defaultRedisBatch, c.RedisBatch)
	}
	if c.AuthFailures != (Plan{}) {
		errs.AppendAt("limits.auth_failures", c.AuthFailures.Validate())
	}
	for i, s := range c.TrustedProxies {
		if _, err := parseTrusted(s); err != nil {
			errs.Add(fmt.Sprintf("limits.trusted_proxies[%d]", i), "%v", err)
		}
	}
	return errs.Err()
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
			// before matching (see ClientIPFrom).
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
