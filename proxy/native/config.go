package native

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
	"time"

	"tradergate/cache/configerr"
	"tradergate/proxy/route"
)

// Mode is how the misses of one route are served.
type Mode string

// The modes of a route (docs/ARCHITECTURE.md "Moving the backend").
const (
	// ModeLegacy: the translation of the legacy host's answer, as always.
	ModeLegacy Mode = "legacy"
	// ModeShadow: clients get the translation; a sampled share of the
	// misses on immutable pages is fetched from native after the answer is
	// written, and compared.
	ModeShadow Mode = "shadow"
	// ModeCanary: the misses of a share of keys (sticky per key id) are
	// served by native; the other keys' misses are served as in legacy and
	// shadowed as in shadow.
	ModeCanary Mode = "canary"
	// ModeNative: misses are served by native; when native fails or
	// breaks the contract the caller serves the translation instead.
	ModeNative Mode = "native"
)

func (m Mode) valid() bool {
	return m == ModeLegacy || m == ModeShadow || m == ModeCanary || m == ModeNative
}

// Config is the `native:` section: a service that serves the /v1 contract
// (docs/openapi.json) itself, and per route how much of the traffic it
// takes.
type Config struct {
	// BaseURL of the native service, without the /v1 prefix: a miss for
	// /v1/tx/0x.. is asked of BaseURL + "/v1/tx/0x..". Zero: off, every
	// route is legacy. Required when any route is not legacy.
	BaseURL string `yaml:"base_url"`
	// KeyEnv names the environment variable holding the edge's own
	// credential for the native service, sent as a Bearer token. Required
	// when BaseURL is set; the variable must be set.
	KeyEnv string `yaml:"key_env"`
	// Timeout bounds one native call, body included; zero: 5s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxBodyBytes caps a native body; a larger one is a bad body. Zero:
	// 32 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Routes is the mode of each route, by route name (the names of the
	// route table: activity, tx, ...); a route left out is legacy.
	Routes map[string]RouteConfig `yaml:"routes"`
	// Rollback is when a route goes back to legacy by itself.
	Rollback RollbackConfig `yaml:"rollback"`
	// Shadow bounds the background comparisons.
	Shadow ShadowConfig `yaml:"shadow"`

	// Key is the resolved value of KeyEnv (Validate sets it); never printed.
	Key string `yaml:"-"`
}

// RouteConfig is one entry of native.routes.
type RouteConfig struct {
	// Mode is legacy, shadow, canary or native; zero: legacy.
	Mode Mode `yaml:"mode"`
	// Sample is the share (0 to 1) of the misses served from the legacy
	// host that are also fetched from native and compared, in shadow and
	// canary modes, and in any mode while the route is rolled back.
	// Absent: 1 (every miss on an immutable page).
	Sample *float64 `yaml:"sample"`
	// Percent is the share (0 to 100) of API keys whose misses native
	// serves in canary mode; zero: none. A key's side is fixed by a hash
	// of its id, so a key sees one backend, not a mix.
	Percent float64 `yaml:"percent"`
}

// sample is Sample with its default.
func (r RouteConfig) sample() float64 {
	if r.Sample == nil {
		return 1
	}
	return *r.Sample
}

// RollbackConfig is native.rollback: the bounds past which a route in
// canary or native mode goes back to legacy (still shadowing), until the
// next reload.
type RollbackConfig struct {
	// ErrorRatio: native calls that failed (timeout, 5xx or another status
	// than 200, transport error, bad body, contract break, breaker open)
	// over native calls; a caller that went away is neither. A route
	// rolls back when the ratio goes above it; 1 never rolls back on
	// errors. Zero: 0.05.
	ErrorRatio float64 `yaml:"error_ratio"`
	// DiffRatio: comparisons that found a difference over comparisons.
	// Zero: 0.01.
	DiffRatio float64 `yaml:"diff_ratio"`
	// Window is the sliding span the ratios are counted over; zero: 1m.
	Window time.Duration `yaml:"window"`
	// MinRequests is how many calls (for ErrorRatio) or comparisons (for
	// DiffRatio) the window must hold before its ratio may roll the
	// route back; zero: 20.
	MinRequests int `yaml:"min_requests"`
}

// ShadowConfig is native.shadow: the work done after a client's answer is
// written. It is fixed at start; a reload keeps the running figures.
type ShadowConfig struct {
	// Workers is how many comparisons run at once; zero: 4.
	Workers int `yaml:"workers"`
	// Queue is how many comparisons may wait for a worker; more are
	// dropped and counted. Zero: 256.
	Queue int `yaml:"queue"`
}

// ApplyDefaults fills the zero fields with the defaults their comments name.
func (c *Config) ApplyDefaults() {
	c.Timeout = cmp.Or(c.Timeout, 5*time.Second)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 32<<20)
	r := &c.Rollback
	r.ErrorRatio = cmp.Or(r.ErrorRatio, 0.05)
	r.DiffRatio = cmp.Or(r.DiffRatio, 0.01)
	r.Window = cmp.Or(r.Window, time.Minute)
	r.MinRequests = cmp.Or(r.MinRequests, 20)
	c.Shadow.Workers = cmp.Or(c.Shadow.Workers, 4)
	c.Shadow.Queue = cmp.Or(c.Shadow.Queue, 256)
	for name, rc := range c.Routes {
		rc.Mode = cmp.Or(rc.Mode, ModeLegacy)
		c.Routes[name] = rc
	}
}

// Enabled reports whether any route sends traffic to native.
func (c *Config) Enabled() bool {
	if c.BaseURL == "" {
		return false
	}
	for _, rc := range c.Routes {
		if rc.Mode != ModeLegacy && rc.Mode != "" {
			return true
		}
	}
	return false
}

// Validate checks the section (defaults applied) and resolves Key from
// getenv. Each problem is one line naming its field by its path.
func (c *Config) Validate(getenv func(string) string) error {
	var errs configerr.List
	add := func(field, format string, args ...any) { errs.Add("native."+field, format, args...) }
	table := route.NewTable()
	names := make([]string, 0, len(c.Routes))
	for name := range c.Routes {
		names = append(names, name)
	}
	slices.Sort(names) // one order for the lines
	used := false
	for _, name := range names {
		rc := c.Routes[name]
		at := "routes." + name
		rt := table.ByName(name)
		switch {
		case rt == nil:
			add(at, "unknown route; want one of %s", strings.Join(route.Names(), ", "))
			continue
		case rt.EdgeBuilt && rc.Mode != ModeLegacy:
			// The edge builds this route from orderbook_events pages,
			// which are what reach a backend.
			add(at+".mode", "%s is built by the edge from %s pages: set the mode of %s", name, route.OrderBookEvents, route.OrderBookEvents)
		}
		if !rc.Mode.valid() {
			add(at+".mode", "must be legacy, shadow, canary or native, got %q", rc.Mode)
		}
		if rc.Mode != ModeLegacy {
			used = true
		}
		if s := rc.sample(); s < 0 || s > 1 || s != s {
			add(at+".sample", "must be between 0 and 1, got %v", s)
		}
		if p := rc.Percent; p < 0 || p > 100 || p != p {
			add(at+".percent", "must be between 0 and 100, got %v", p)
		}
		if rc.Percent != 0 && rc.Mode != ModeCanary {
			add(at+".percent", "applies to mode canary only, got mode %q", rc.Mode)
		}
	}
	if c.BaseURL == "" {
		if used {
			add("base_url", "is required when a route is not legacy")
		}
	} else if bu, err := url.Parse(c.BaseURL); err != nil || (bu.Scheme != "http" && bu.Scheme != "https") || bu.Host == "" || bu.RawQuery != "" || bu.Fragment != "" || bu.User != nil {
		// Credentials in the URL would end up in logs and on the report;
		// the credential has its own variable.
		add("base_url", "must be an absolute http(s) URL without query or credentials, got %q", c.BaseURL)
	} else {
		c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
	}
	if c.BaseURL != "" {
		if c.KeyEnv == "" {
			add("key_env", "is required when base_url is set (the variable holding the edge's credential for native)")
		} else if c.Key = getenv(c.KeyEnv); c.Key == "" {
			add("key_env", "environment variable %s (the edge's credential for native) is not set", c.KeyEnv)
		}
	}
	if c.Timeout <= 0 {
		add("timeout", "must be positive, got %v", c.Timeout)
	}
	if c.MaxBodyBytes < 1024 {
		add("max_body_bytes", "must be at least 1024, got %d", c.MaxBodyBytes)
	}
	r := c.Rollback
	if r.ErrorRatio <= 0 || r.ErrorRatio > 1 || r.ErrorRatio != r.ErrorRatio {
		add("rollback.error_ratio", "must be in (0, 1], got %v", r.ErrorRatio)
	}
	if r.DiffRatio <= 0 || r.DiffRatio > 1 || r.DiffRatio != r.DiffRatio {
		add("rollback.diff_ratio", "must be in (0, 1], got %v", r.DiffRatio)
	}
	if r.Window <= 0 {
		add("rollback.window", "must be positive, got %v", r.Window)
	}
	if r.MinRequests < 1 {
		add("rollback.min_requests", "must be at least 1, got %d", r.MinRequests)
	}
	if c.Shadow.Workers < 1 || c.Shadow.Workers > 256 {
		add("shadow.workers", "must be between 1 and 256, got %d", c.Shadow.Workers)
	}
	if c.Shadow.Queue < 1 {
		add("shadow.queue", "must be at least 1, got %d", c.Shadow.Queue)
	}
	return errs.Err()
}
