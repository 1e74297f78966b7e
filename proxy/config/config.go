// Package config is the configuration file of the edge: the Config that
// gathers each package's section (each package owns its section as a
// plain struct, its field comments saying what the zero value means),
// the sections no other package owns (keys, plans, legacy, log), the
// strict decoding that names an unknown field by its path (yaml.go), the
// checks that span sections, `tradergate check` (check.go), and what a
// reload cannot apply (reload.go).
//
// It only reads and judges a file: it must not start anything nor hold
// state of a running edge (proxy.Server applies a Config; proxy.Reload
// applies what can change).
package config

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"tradergate/cache"
	"tradergate/cache/configerr"
	"tradergate/limits"
	"tradergate/proxy/admin"
	"tradergate/proxy/fleet"
	"tradergate/proxy/front"
	"tradergate/proxy/native"
	"tradergate/proxy/orderbook"
	"tradergate/proxy/route"
	"tradergate/proxy/stream"
	"tradergate/proxy/tracing"
	"tradergate/proxy/upstream"
)

// Config is the whole configuration file. Each package owns its section as
// a plain struct; the comment on a field says what its zero value means, and
// applyDefaults fills those zeros (gobreaker Settings style).
type Config struct {
	Server    front.Config           `yaml:"server"`
	Upstream  upstream.Config        `yaml:"upstream"`
	Keys      []KeyConfig            `yaml:"keys"`
	Plans     map[string]limits.Plan `yaml:"plans"`
	Limits    limits.Config          `yaml:"limits"`
	Cache     cache.Config           `yaml:"cache"`
	Redis     fleet.Config           `yaml:"redis"`
	OrderBook orderbook.Config       `yaml:"orderbook"`
	Tracing   tracing.Config         `yaml:"tracing"`
	Admin     admin.Config           `yaml:"admin"`
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

// SizedMemoryLimit is the memory limit what is sized from it (the
// default connection cap) is sized by when the process has none:
// MemoryLimit, or, with none set (-1), the default's size all the same.
func (c *Config) SizedMemoryLimit() int64 {
	if l := c.MemoryLimit(); l > 0 {
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

// Parse decodes a configuration file strictly (unknown fields are
// errors) and fills defaults. It does not validate; call Validate.
func Parse(data []byte) (*Config, error) {
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
	c.Server.ApplyDefaults()
	c.Upstream.ApplyDefaults()
	c.Limits.ApplyDefaults()
	c.Redis.ApplyDefaults()
	c.OrderBook.ApplyDefaults()
	c.Tracing.ApplyDefaults()
	c.Cache.ApplyDefaults()
	c.Admin.ApplyDefaults()
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
		c.Server.Validate(c.Upstream.Timeout),
		c.Admin.Validate(getenv),
		c.Log.validate(),
		c.Upstream.Validate(getenv),
		c.Redis.Validate(getenv),
		c.Native.Validate(getenv),
		c.validateNativeTimeout(),
		c.OrderBook.Validate(),
		c.Tracing.Validate(),
		c.Legacy.validate(c.Keys),
		c.Limits.Validate(),
		c.Streams.Validate(),
		c.Cache.Validate(route.Names()),
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
