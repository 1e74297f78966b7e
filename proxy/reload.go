package proxy

import (
	"reflect"
	"strings"

	"tradergate/cache"
	"tradergate/limits"
	"tradergate/proxy/admin"
	"tradergate/proxy/native"
	"tradergate/proxy/upstream"
)

// Hot reload: on SIGHUP main re-reads config.yaml, validates it whole, and
// hands it to Reload. Keys, plans, cache policy figures, breaker settings,
// the legacy section, the native section (but native.shadow), the admin
// token and login lifetime, and log.level
// take effect at once, without dropping a connection. Every other setting
// is fixed at start: one that differs from what runs is named in a warning
// and counted as restart_needed (tradergate_config_reloads_total), so an
// operator is never left guessing.

// Reload applies the reloadable parts of cfg, which the caller has
// validated (Config.Validate). A cfg the cache refuses changes nothing.
// The native section is applied whole but for native.shadow, and every
// native route that rolled back is re-armed (docs/OPERATING.md "Moving
// the backend").
func (s *Server) Reload(cfg *Config) error {
	// The one step that can refuse goes first, so a refusal leaves all of
	// the running configuration in place.
	if err := s.cache.SetConfig(cfg.Cache); err != nil {
		// Its problems name their fields (cache.*): passed on as they are.
		s.admin.Reloaded(admin.ReloadFailed, err)
		return err
	}
	s.keys.Store(newKeySet(cfg.Keys, cfg.Plans, s.routes.Routes()))
	s.migration.configure(cfg)
	s.limiter.SetPlans(cfg.Plans)
	s.native.Reload(cfg.Native)
	s.authGuard.setPlan(cfg.Limits.AuthFailures)
	s.admin.Reload(cfg.Admin)
	running := s.live.Load()
	if !reflect.DeepEqual(running.Upstream.Breaker, cfg.Upstream.Breaker) {
		s.upstream.SetBreaker(cfg.Upstream.Breaker)
	}
	s.live.Store(cfg)
	// Restart-only settings are compared with what runs (as started), not
	// with the last file read: a change reverted warns nothing, and one
	// still waiting for a restart warns at every reload.
	if fixed := restartOnly(s.cfg, cfg); len(fixed) > 0 {
		s.log.Warn("config reload: these settings take effect only on restart", "sections", strings.Join(fixed, ", "))
		s.admin.Reloaded(admin.ReloadRestartNeeded, nil)
	} else {
		s.admin.Reloaded(admin.ReloadApplied, nil)
	}
	s.log.Info("config reloaded", "keys", len(cfg.Keys), "plans", len(cfg.Plans))
	return nil
}

// restartOnly names, by their paths in the file, the settings that differ
// between running and next but that Reload does not apply. Every section
// of Config is compared, so a section Reload does not know is named, never
// passed over.
func restartOnly(running, next *Config) []string {
	var out []string
	diffFields("", reflect.ValueOf(fixedAtStart(running)), reflect.ValueOf(fixedAtStart(next)), 2, &out)
	return out
}

// fixedAtStart is c without what Reload applies: what is left takes effect
// only on restart.
func fixedAtStart(c *Config) Config {
	f := *c
	f.doc = nil // where each setting stands in the file is not a setting
	f.Keys, f.Plans, f.Legacy = nil, nil, LegacyConfig{}
	f.Upstream.Breaker = upstream.BreakerConfig{}
	// Of the native section only the shadow workers and queue are fixed.
	f.Native = native.Config{Shadow: c.Native.Shadow}
	f.Limits.AuthFailures = limits.Plan{}
	// The admin token and the login's lifetime are reloaded (proxy/admin).
	f.Admin = c.Admin.FixedAtStart()
	// Of the cache section only max_bytes is fixed (cache.SetConfig).
	f.Cache = cache.Config{MaxBytes: c.Cache.MaxBytes}
	// log.level is main's to apply; log.access is fixed.
	access := c.Log.AccessLog()
	f.Log = LogConfig{Access: &access}
	return f
}

// diffFields appends to out the yaml path of each field of the structs a
// and b that differs, descending depth levels into structs. A difference
// in fields with no name in the file (unexported, or yaml "-", such as a
// secret read from the environment) names the struct itself.
func diffFields(prefix string, a, b reflect.Value, depth int, out *[]string) {
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	named := len(*out)
	t := a.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || reflect.DeepEqual(fa.Interface(), fb.Interface()):
		case name == "" && sf.Anonymous && fa.Kind() == reflect.Struct: // yaml inline
			diffFields(prefix, fa, fb, depth, out)
		case depth > 1 && fa.Kind() == reflect.Struct:
			diffFields(prefix+name+".", fa, fb, depth-1, out)
		default:
			*out = append(*out, prefix+name)
		}
	}
	if len(*out) == named && prefix != "" {
		*out = append(*out, strings.TrimSuffix(prefix, "."))
	}
}
