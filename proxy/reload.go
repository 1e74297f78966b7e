package proxy

import (
	"fmt"
	"reflect"
	"strings"

	"tradergate/proxy/upstream"
)

// Hot reload: on SIGHUP main re-reads config.yaml, validates it
// whole, and hands it to Reload. Keys, plans, cache policy figures,
// breaker settings and the legacy section (legacy.go) take effect at once,
// without dropping a connection; everything else is fixed at start and
// named in a log line when it differs, so an operator is never left
// guessing.

// Reload applies the reloadable parts of cfg, which the caller has
// validated (Config.Validate). A cfg the cache refuses changes nothing.
func (s *Server) Reload(cfg *Config) error {
	// The one step that can refuse goes first, so a refusal leaves all of
	// the running configuration in place.
	if err := s.cache.SetConfig(cfg.Cache); err != nil {
		err = fmt.Errorf("cache: %w", err)
		s.reloads.record(err)
		return err
	}
	s.keys.Store(newKeySet(cfg.Keys, cfg.Plans, s.routes.Routes()))
	s.migration.configure(cfg)
	s.limiter.SetPlans(cfg.Plans)
	running := s.live.Load()
	if !reflect.DeepEqual(running.Upstream.Breaker, cfg.Upstream.Breaker) {
		s.upstream.SetBreaker(cfg.Upstream.Breaker)
	}
	// Restart-only settings are compared with what runs (as started), not
	// with the last file read: a change reverted warns nothing, and one
	// still waiting for a restart warns at every reload.
	if fixed := restartOnly(s.cfg, cfg); len(fixed) > 0 {
		s.log.Warn("config reload: these settings take effect only on restart", "sections", strings.Join(fixed, ", "))
	}
	s.live.Store(cfg)
	s.reloads.record(nil)
	s.log.Info("config reloaded", "keys", len(cfg.Keys), "plans", len(cfg.Plans))
	return nil
}

// restartOnly names the settings that differ between a and b but are not
// reloaded.
func restartOnly(a, b *Config) []string {
	var out []string
	diff := func(name string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			out = append(out, name)
		}
	}
	diff("server", a.Server, b.Server)
	ua, ub := a.Upstream, b.Upstream
	ua.Breaker, ub.Breaker = upstream.BreakerConfig{}, upstream.BreakerConfig{}
	diff("upstream (other than breaker)", ua, ub)
	diff("limits", a.Limits, b.Limits)
	diff("cache.max_bytes", a.Cache.MaxBytes, b.Cache.MaxBytes)
	diff("admin", a.Admin, b.Admin)
	diff("log.access", a.Log.AccessLog(), b.Log.AccessLog())
	return out
}
