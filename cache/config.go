package cache

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"tradergate/cache/configerr"
)

// Config is the `cache:` section of config.yaml. Every figure is optional:
// the comment on a field says what its zero value means, and ApplyDefaults
// (also run by New and SetConfig) fills those zeros (gobreaker Settings
// style).
type Config struct {
	// MaxBytes bounds the bytes the page cache holds: identity bodies, their
	// gzip copies, keys and a fixed per-entry overhead. Zero: 256 MiB. At
	// least 1 MiB, so that a value meant in MiB is not taken as bytes. Fixed
	// at start: a reload does not resize the cache.
	MaxBytes int64 `yaml:"max_bytes"`
	// CompressMinBytes: a page larger than this is also kept gzip-compressed,
	// made on the first hit that accepts gzip (forms.go) and served to
	// clients that accept it. Zero: 1024 (1 KiB). Negative: never compress.
	CompressMinBytes int `yaml:"compress_min_bytes"`
	// SendfileMinBytes: a form of a page (identity or gzip) at least this
	// long is also kept in a page file in SendfileDir, made on its first
	// plain HTTP/1.1 answer and sent from then on with sendfile(2), which
	// spares the kernel a copy of the page (files.go). Zero: 64 KiB.
	// Negative: never, which can be cheaper on a host where system calls
	// are dear (docs/CONFIGURATION.md, "Page files"). Linux only; elsewhere pages are always
	// sent from memory.
	SendfileMinBytes int `yaml:"sendfile_min_bytes"`
	// SendfileMaxBytes: a form longer than this is sent from memory even
	// with page files on, for a host where copying a large page costs less
	// than sending its file (docs/BENCHMARKS.md). Zero or negative: no
	// upper bound, as nginx sends every cached file.
	SendfileMaxBytes int `yaml:"sendfile_max_bytes"`
	// SendfileDir is where page files are made, unnamed (O_TMPFILE): a
	// directory on a disk filesystem. Zero: /var/tmp. One that cannot hold
	// them (missing, not writable, tmpfs) turns page files off, with a log
	// line.
	SendfileDir string `yaml:"sendfile_dir"`
	// Policy holds the figures of every route (docs/ARCHITECTURE.md "Cache
	// policy"). A zero field takes the default named on Policy.
	Policy Policy `yaml:"policy"`
	// Routes overrides Policy per route name (orderbook_events, activity,
	// ...). A zero field inherits the value of Policy.
	Routes map[string]Policy `yaml:"routes"`
	// L2 configures the shared tier, used when the proxy gives the cache a
	// Redis client (Options.L2).
	L2 L2Config `yaml:"l2"`
	// StaleAfter: a miss that holds a page still inside stale_if_error is
	// answered with it (X-Cache: STALE) once the key's fetch has not
	// answered within this, counted from when that fetch began (at once
	// when a fetch of the key has run this long already); the fetch goes
	// on and refreshes the page. Zero: 500ms.
	// Negative: wait for the fetch.
	StaleAfter time.Duration `yaml:"stale_after"`
}

// L2Config is the `cache.l2:` section.
type L2Config struct {
	// Enabled turns the shared tier on or off. Absent: on whenever a client
	// is given. A reload may flip it; flights started before keep their
	// tier.
	Enabled *bool `yaml:"enabled"`
	// MaxEntryBytes bounds a page's value in Redis (its gzip form, or its
	// identity body when gzip does not shrink it, plus ~60 bytes); a larger
	// page stays in L1 only. Zero: 1 MiB. At most 512 MiB, the Redis
	// string limit.
	MaxEntryBytes int `yaml:"max_entry_bytes"`
	// Timeout bounds each Redis call of the shared tier (read the page,
	// take or wait for the lease, write it back). They are all made on a
	// miss, which waits for the legacy host anyway, so it may be longer
	// than redis.timeout, the bound of the quota's call on every request;
	// never shorter than it. Zero: 250ms. At most 1s.
	Timeout time.Duration `yaml:"timeout"`
}

// Policy holds the figures of the caching policy (docs/ARCHITECTURE.md
// "Cache policy": immutable vs fresh). For the TTLs and the stale windows a
// negative value means "off": such pages are not cached (X-Cache: BYPASS), or
// no stale page is served.
type Policy struct {
	// FreshTTL is the TTL of pages that may still change. Zero: 1s. At most
	// 1m: the contract promises data within seconds (docs/CONTRACT.md).
	FreshTTL time.Duration `yaml:"fresh_ttl"`
	// ImmutableTTL is the TTL of settled pages and of found lookups. Zero: 24h.
	ImmutableTTL time.Duration `yaml:"immutable_ttl"`
	// NegativeTTL is the TTL of "not found" answers (data null,
	// docs/CONTRACT.md#envelopes), the one kind of negative entry the policy
	// allows. Zero: 2s. At most 1m.
	NegativeTTL time.Duration `yaml:"negative_ttl"`
	// SettleWindow: items older than this are settled, never to change. Zero:
	// 5m. Must not be negative.
	SettleWindow time.Duration `yaml:"settle_window"`
	// StaleWhileRevalidate: this long past its TTL a page is still served
	// (X-Cache: STALE) while one background refresh runs. Zero: 1s. At most
	// 1m, for the same promise as FreshTTL.
	StaleWhileRevalidate time.Duration `yaml:"stale_while_revalidate"`
	// StaleIfError: this long past its TTL a page is served instead of an
	// upstream failure (5xx, timeout, open breaker). Zero: 5m.
	StaleIfError time.Duration `yaml:"stale_if_error"`
}

// Defaults of the zero values above.
const (
	DefaultMaxBytes         = 256 << 20
	defaultCompressMinBytes = 1024
	DefaultSendfileMinBytes = 64 << 10
	defaultSendfileMaxBytes = -1 // no upper bound
	defaultSendfileDir      = "/var/tmp"

	defaultFreshTTL             = time.Second
	defaultImmutableTTL         = 24 * time.Hour
	defaultNegativeTTL          = 2 * time.Second
	defaultSettleWindow         = 5 * time.Minute
	defaultStaleWhileRevalidate = time.Second
	defaultStaleIfError         = 5 * time.Minute

	defaultStaleAfter = 500 * time.Millisecond
	defaultL2Timeout  = 250 * time.Millisecond
	maxL2Timeout      = time.Second
)

// Bounds checked by Validate.
const (
	minMaxBytes = 1 << 20
	// maxShortTTL caps the figures that decide how old a changing page may
	// be when served: the spec promises data "within seconds".
	maxShortTTL = time.Minute
)

// ApplyDefaults fills the zero fields of c.Policy with the defaults, and the
// zero fields of every route override with the values of c.Policy, so that
// each entry of Routes is complete. Running it twice changes nothing.
func (c *Config) ApplyDefaults() {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.CompressMinBytes == 0 {
		c.CompressMinBytes = defaultCompressMinBytes
	}
	if c.SendfileMinBytes == 0 {
		c.SendfileMinBytes = DefaultSendfileMinBytes
	}
	if c.SendfileMaxBytes == 0 {
		c.SendfileMaxBytes = defaultSendfileMaxBytes
	}
	if c.SendfileDir == "" {
		c.SendfileDir = defaultSendfileDir
	}
	if c.L2.Enabled == nil {
		on := true
		c.L2.Enabled = &on
	}
	if c.L2.MaxEntryBytes == 0 {
		c.L2.MaxEntryBytes = defaultL2MaxEntryBytes
	}
	c.L2.Timeout = cmp.Or(c.L2.Timeout, defaultL2Timeout)
	c.StaleAfter = cmp.Or(c.StaleAfter, defaultStaleAfter)
	c.Policy = c.Policy.withDefaults()
	for name, p := range c.Routes {
		c.Routes[name] = p.inherit(c.Policy)
	}
}

// withDefaults fills zero fields with the package defaults. The zero Policy
// is thereby the default policy.
func (p Policy) withDefaults() Policy {
	return p.inherit(Policy{
		FreshTTL:             defaultFreshTTL,
		ImmutableTTL:         defaultImmutableTTL,
		NegativeTTL:          defaultNegativeTTL,
		SettleWindow:         defaultSettleWindow,
		StaleWhileRevalidate: defaultStaleWhileRevalidate,
		StaleIfError:         defaultStaleIfError,
	})
}

// inherit fills the zero fields of p from base.
func (p Policy) inherit(base Policy) Policy {
	return Policy{
		FreshTTL:             cmp.Or(p.FreshTTL, base.FreshTTL),
		ImmutableTTL:         cmp.Or(p.ImmutableTTL, base.ImmutableTTL),
		NegativeTTL:          cmp.Or(p.NegativeTTL, base.NegativeTTL),
		SettleWindow:         cmp.Or(p.SettleWindow, base.SettleWindow),
		StaleWhileRevalidate: cmp.Or(p.StaleWhileRevalidate, base.StaleWhileRevalidate),
		StaleIfError:         cmp.Or(p.StaleIfError, base.StaleIfError),
	}
}

// Validate checks every field, before or after ApplyDefaults. routes lists
// the route names the edge knows; nil skips the check of the Routes keys.
// All problems are reported on one line, each naming its field path
// ("cache.policy.fresh_ttl: ..."), sorted, like the proxy's own Validate.
func (c Config) Validate(routes []string) error {
	var errs configerr.List
	add := errs.Add
	switch {
	case c.MaxBytes < 0:
		add("cache.max_bytes", "must not be negative, got %d", c.MaxBytes)
	case c.MaxBytes > 0 && c.MaxBytes < minMaxBytes:
		add("cache.max_bytes", "must be at least %d (1 MiB; the unit is bytes), got %d", minMaxBytes, c.MaxBytes)
	}
	if fileMin, fileMax := cmp.Or(c.SendfileMinBytes, DefaultSendfileMinBytes), cmp.Or(c.SendfileMaxBytes, defaultSendfileMaxBytes); fileMin > 0 && fileMax > 0 && fileMax < fileMin {
		add("cache.sendfile_max_bytes", "must be at least cache.sendfile_min_bytes (%d), or negative for no bound, got %d", fileMin, fileMax)
	}
	if c.L2.MaxEntryBytes < 0 || c.L2.MaxEntryBytes > maxIdentity {
		add("cache.l2.max_entry_bytes", "must be between 0 (default 1 MiB) and %d (the Redis string limit), got %d", maxIdentity, c.L2.MaxEntryBytes)
	}
	if c.L2.Timeout < 0 || c.L2.Timeout > maxL2Timeout {
		add("cache.l2.timeout", "must be between 0 (default %v) and %v, got %v", defaultL2Timeout, maxL2Timeout, c.L2.Timeout)
	}
	c.Policy.validate("cache.policy", add)
	for name, p := range c.Routes {
		field := "cache.routes." + name
		if routes != nil && !slices.Contains(routes, name) {
			add(field, "unknown route (routes: %s)", strings.Join(routes, ", "))
			continue
		}
		p.validate(field, add)
	}
	errs.Sort()
	return errs.Err()
}

func (p Policy) validate(prefix string, add func(field, format string, args ...any)) {
	short := func(name string, d time.Duration) {
		if d > maxShortTTL {
			add(prefix+"."+name, "must be at most %v (the contract promises data within seconds; negative turns it off), got %v", maxShortTTL, d)
		}
	}
	short("fresh_ttl", p.FreshTTL)
	short("negative_ttl", p.NegativeTTL)
	short("stale_while_revalidate", p.StaleWhileRevalidate)
	if p.SettleWindow < 0 {
		add(prefix+".settle_window", "must not be negative, got %v", p.SettleWindow)
	}
}

// settings is one resolved configuration: what New and SetConfig build and
// Get reads through an atomic pointer, so a reload never races a request.
type settings struct {
	compressMin int // < 0: never compress
	fileMin     int // < 0: no page files
	fileMax     int // < 0: no upper bound
	fileDir     string
	l2          bool
	l2Max       int
	l2Timeout   time.Duration
	staleAfter  time.Duration // < 0: wait for the fetch
	global      Policy
	routes      map[string]Policy
}

// resolve validates cfg (without route names) and resolves its defaults.
func resolve(cfg Config) (*settings, error) {
	if err := cfg.Validate(nil); err != nil {
		return nil, err
	}
	// ApplyDefaults writes into Routes: work on a copy, never on the
	// caller's map.
	cfg.Routes = maps.Clone(cfg.Routes)
	cfg.ApplyDefaults()
	return &settings{
		compressMin: cfg.CompressMinBytes,
		fileMin:     cfg.SendfileMinBytes,
		fileMax:     cfg.SendfileMaxBytes,
		fileDir:     cfg.SendfileDir,
		l2:          *cfg.L2.Enabled,
		l2Max:       cfg.L2.MaxEntryBytes,
		l2Timeout:   cfg.L2.Timeout,
		staleAfter:  cfg.StaleAfter,
		global:      cfg.Policy,
		routes:      cfg.Routes,
	}, nil
}

// policy returns the resolved policy of a route; unknown or empty names get
// the global one.
func (s *settings) policy(route string) Policy {
	if p, ok := s.routes[route]; ok {
		return p
	}
	return s.global
}
