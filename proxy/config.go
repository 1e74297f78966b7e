package proxy

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"tradergate/cache"
	"tradergate/cache/configerr"
	"tradergate/limits"
	"tradergate/proxy/fleet"
	"tradergate/proxy/native"
	"tradergate/proxy/orderbook"
	"tradergate/proxy/route"
	"tradergate/proxy/stream"
	"tradergate/proxy/tlsedge"
	"tradergate/proxy/tracing"
	"tradergate/proxy/upstream"
)

// Config is the whole configuration file. Each package owns its section as
// a plain struct; the comment on a field says what its zero value means, and
// applyDefaults fills those zeros (gobreaker Settings style).
type Config struct {
	Server    ServerConfig           `yaml:"server"`
	Upstream  upstream.Config        `yaml:"upstream"`
	Keys      []KeyConfig            `yaml:"keys"`
	Plans     map[string]limits.Plan `yaml:"plans"`
	Limits    limits.Config          `yaml:"limits"`
	Cache     cache.Config           `yaml:"cache"`
	Redis     fleet.Config           `yaml:"redis"`
	OrderBook orderbook.Config       `yaml:"orderbook"`
	Tracing   tracing.Config         `yaml:"tracing"`
	Admin     AdminConfig            `yaml:"admin"`
	Legacy    LegacyConfig           `yaml:"legacy"`
	Native    native.Config          `yaml:"native"`
	Streams   stream.Config          `yaml:"streams"`
	Log       LogConfig              `yaml:"log"`

	// doc is the file's document node, by which Validate places each
	// problem on its line; nil for a Config not read from a file.
	doc *yaml.Node
}

// LogConfig is the log section. Logs are JSON lines (log/slog) on stderr.
type LogConfig struct {
	// Level is debug, info, warn or error; zero: info. Reloaded on SIGHUP.
	Level string `yaml:"level"`
	// Access writes one line per request; zero (left out): true.
	Access *bool `yaml:"access"`
}

// MemoryLimit is the Go memory limit server.memory_limit asks for, its
// default filled in; 0: none.
func (c *Config) MemoryLimit() int64 {
	switch l := c.Server.MemoryLimit; {
	case l < 0:
		return 0
	case l > 0:
		return l
	}
	return c.Cache.MaxBytes + c.Cache.MaxBytes/2 + memoryLimitSlack
}

// memoryLimitSlack is what the default Go memory limit adds to 1.5 x
// cache.max_bytes. The resident size a replica should be given is 1.5 x
// cache.max_bytes + 64 MiB (docs/SCALING.md, "Memory per replica"); the Go limit
// counts only the runtime's own memory, and the rest of the 64 MiB is left
// to what it does not count: the binary's mapped code and data and pages
// the runtime has freed but not yet returned.
const memoryLimitSlack = 32 << 20

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
	// ReadTimeout bounds reading a whole request; zero: 10s. On HTTP/2 it
	// is how long a request may stay unfinished (no END_STREAM) before
	// its stream is reset.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response, from the end of the request
	// headers; zero: 30s. It must exceed upstream.timeout.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle this long; zero: 120s.
	// On HTTP/2 only streams and DATA count, not PING or SETTINGS.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ShutdownTimeout is how long in-flight requests may drain on SIGTERM;
	// zero: 15s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long, on SIGTERM, the edge keeps accepting requests
	// while /readyz already says "not ready", so a load balancer stops
	// sending first; zero: none.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// MaxHeaderBytes caps request line plus headers; zero: 16384. An
	// HTTP/2 connection's unfinished requests may hold 16 times it of
	// header lists (proxy/serve.go).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnections caps the open client connections, HTTP/1.1 and
	// HTTP/2 together; at the cap the listener accepts nothing more until
	// one closes. Zero: a quarter of the Go memory limit at 64 KiB a
	// connection, at least 1024 (1664 with the default memory limit).
	// Fixed at start.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerAddress caps the open client connections of one
	// remote address; a new connection past it is closed at once. Zero: a
	// quarter of max_connections; -1: none (behind a load balancer, whose
	// few addresses carry every client). Fixed at start.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// MemoryLimit is the Go memory limit of the process, in bytes: the heap
	// size past which the collector works harder rather than let the
	// process grow. Zero: 1.5 x cache.max_bytes + 32 MiB; -1: none. The
	// environment's GOMEMLIMIT wins over it, and a container's memory limit
	// (cgroups) caps it at 90% of that limit. Fixed at start.
	MemoryLimit int64 `yaml:"memory_limit"`
	// TLS is TLS at the edge; zero: off (plain HTTP).
	TLS tlsedge.Config `yaml:"tls"`
}

// KeyConfig is one client API key, kept as its SHA-256 only (docs/CONTRACT.md
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
	// Legacy is allow or retired: whether the key may still use the legacy
	// paths (legacy section); zero: allow.
	Legacy string `yaml:"legacy"`
}

// ParseConfig decodes a configuration file strictly (unknown fields are
// errors) and fills defaults. It does not validate; call Validate.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	doc, err := decodeStrict(data, &c)
	if err != nil {
		return nil, err
	}
	c.doc = doc
	c.applyDefaults()
	return &c, nil
}

func (c *Config) applyDefaults() {
	s := &c.Server
	s.Listen = cmp.Or(s.Listen, ":8080")
	s.ReadHeaderTimeout = cmp.Or(s.ReadHeaderTimeout, 5*time.Second)
	s.ReadTimeout = cmp.Or(s.ReadTimeout, 10*time.Second)
	s.WriteTimeout = cmp.Or(s.WriteTimeout, 30*time.Second)
	s.IdleTimeout = cmp.Or(s.IdleTimeout, 120*time.Second)
	s.ShutdownTimeout = cmp.Or(s.ShutdownTimeout, 15*time.Second)
	s.MaxHeaderBytes = cmp.Or(s.MaxHeaderBytes, 16<<10)
	s.TLS.ApplyDefaults()
	c.Upstream.ApplyDefaults()
	c.Limits.ApplyDefaults()
	c.Redis.ApplyDefaults()
	c.OrderBook.ApplyDefaults()
	c.Tracing.ApplyDefaults()
	c.Cache.ApplyDefaults()
	c.Admin.applyDefaults()
	c.Native.ApplyDefaults()
	c.Streams.ApplyDefaults()
	c.Log.Level = cmp.Or(c.Log.Level, "info")
}

// Validate checks every section and reads the secrets they name (the
// upstream key, the Redis password, the admin token, the native
// service's credential) from getenv. It returns every problem of every
// section at once, as a configerr.List in file order, each placed on its
// field's line when the Config was read by ParseConfig.
func (c *Config) Validate(getenv func(string) string) error {
	var errs configerr.List
	for _, err := range []error{
		c.Server.validate(c.Upstream.Timeout),
		c.Admin.validate(getenv),
		c.Log.validate(),
		c.Upstream.Validate(getenv),
		c.Redis.Validate(getenv),
		c.Native.Validate(getenv),
		c.validateNativeTimeout(),
		c.OrderBook.Validate(),
		c.Tracing.Validate(),
		c.Legacy.validate(c.Keys),
		c.Limits.Validate(),
		c.Cache.Validate(route.Names()),
		c.Streams.Validate(),
		validatePlans(c.Plans),
		c.validateKeys(),
	} {
		errs.Append(err)
	}
	place(c.doc, errs)
	errs.Sort()
	return errs.Err()
}

// validateNativeTimeout checks what spans the native and server sections:
// a miss that native fails is fetched again from the legacy host, so the
// answer may take native.timeout and upstream.timeout one after the other,
// and server.write_timeout must exceed both.
func (c *Config) validateNativeTimeout() error {
	serves := false
	for _, rc := range c.Native.Routes {
		serves = serves || rc.Mode == native.ModeCanary || rc.Mode == native.ModeNative
	}
	if !serves || c.Server.WriteTimeout <= 0 || c.Native.Timeout <= 0 || c.Upstream.Timeout <= 0 {
		return nil
	}
	if both := c.Native.Timeout + c.Upstream.Timeout; c.Server.WriteTimeout <= both {
		return &configerr.FieldError{Path: "server.write_timeout", Msg: fmt.Sprintf("must exceed native.timeout + upstream.timeout (%v) while a route is in canary or native mode: a miss native fails is fetched from the legacy host after it", both)}
	}
	return nil
}

// validate checks the server section and its TLS. upstreamTimeout is
// upstream.timeout, which server.write_timeout must exceed.
func (s *ServerConfig) validate(upstreamTimeout time.Duration) error {
	var errs configerr.List
	if err := configerr.CheckListen(s.Listen); err != nil {
		errs.Add("server.listen", "%v", err)
	}
	for name, d := range map[string]time.Duration{
		"server.read_header_timeout": s.ReadHeaderTimeout, "server.read_timeout": s.ReadTimeout,
		"server.write_timeout": s.WriteTimeout, "server.idle_timeout": s.IdleTimeout,
		"server.shutdown_timeout": s.ShutdownTimeout, "server.drain_delay": s.DrainDelay,
	} {
		if d < 0 {
			errs.Add(name, "must not be negative, got %v", d)
		}
	}
	if upstreamTimeout > 0 && s.WriteTimeout > 0 && s.WriteTimeout <= upstreamTimeout {
		errs.Add("server.write_timeout", "must exceed upstream.timeout (%v), or slow upstream answers are cut off mid-write", upstreamTimeout)
	}
	if s.MemoryLimit < -1 || (s.MemoryLimit > 0 && s.MemoryLimit < 64<<20) {
		errs.Add("server.memory_limit", "must be -1 (none), 0 (the default) or at least 64 MiB in bytes, got %d", s.MemoryLimit)
	}
	if s.MaxHeaderBytes < 1024 {
		errs.Add("server.max_header_bytes", "must be at least 1024, got %d", s.MaxHeaderBytes)
	}
	if s.MaxConnections < 0 {
		errs.Add("server.max_connections", "must be 0 (sized from the memory limit) or a count of connections, got %d", s.MaxConnections)
	}
	if s.MaxConnectionsPerAddress < -1 {
		errs.Add("server.max_connections_per_address", "must be -1 (none), 0 (a quarter of max_connections) or a count of connections, got %d", s.MaxConnectionsPerAddress)
	}
	if s.MaxConnections > 0 && s.MaxConnectionsPerAddress > s.MaxConnections {
		errs.Add("server.max_connections_per_address", "must not exceed server.max_connections (%d), got %d", s.MaxConnections, s.MaxConnectionsPerAddress)
	}
	errs.Append(s.TLS.Validate())
	return errs.Err()
}

// validate checks the log section.
func (c LogConfig) validate() error {
	if err := new(slog.Level).UnmarshalText([]byte(c.Level)); err != nil {
		return &configerr.FieldError{Path: "log.level", Msg: fmt.Sprintf("must be debug, info, warn or error, got %q", c.Level)}
	}
	return nil
}

// validatePlans checks each named plan.
func validatePlans(plans map[string]limits.Plan) error {
	var errs configerr.List
	for name, p := range plans {
		errs.AppendAt("plans."+name, p.Validate())
	}
	return errs.Err()
}

// validateKeys checks the keys against the plans and the routes, and
// lower-cases their hashes.
func (c *Config) validateKeys() error {
	var errs configerr.List
	if len(c.Keys) == 0 {
		errs.Add("keys", "at least one key is required (hash one with `tradergate hash-key`)")
	}
	routes := route.Names()
	ids, hashes := map[string]bool{}, map[string]bool{}
	for i := range c.Keys {
		k := &c.Keys[i]
		f := fmt.Sprintf("keys[%d]", i)
		switch {
		case k.ID == "":
			errs.Add(f+".id", "is required")
		case ids[k.ID]:
			errs.Add(f+".id", "duplicate id %q", k.ID)
		}
		ids[k.ID] = true
		k.SHA256 = strings.ToLower(k.SHA256)
		switch {
		case len(k.SHA256) != 64 || strings.Trim(k.SHA256, "0123456789abcdef") != "":
			errs.Add(f+".sha256", "must be 64 hex digits (the SHA-256 of the key, from `tradergate hash-key`)")
		case hashes[k.SHA256]:
			errs.Add(f+".sha256", "duplicate of another key")
		}
		hashes[k.SHA256] = true
		if _, ok := c.Plans[k.Plan]; !ok {
			errs.Add(f+".plan", "unknown plan %q (plans: %s)", k.Plan, strings.Join(sortedKeys(c.Plans), ", "))
		}
		if k.Limit != nil {
			errs.AppendAt(f+".limit", k.Limit.Validate())
		}
		if len(k.Routes) == 0 {
			errs.Add(f+".routes", "is required: route names or \"*\" (routes: %s)", strings.Join(routes, ", "))
		}
		for _, r := range k.Routes {
			if r != "*" && !slices.Contains(routes, r) {
				errs.Add(f+".routes", "unknown route %q (routes: %s)", r, strings.Join(routes, ", "))
			}
		}
	}
	return errs.Err()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
