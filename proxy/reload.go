package proxy

import (
	"fmt"
	"reflect"
	"strings"
)

// Hot reload (issue 7): on SIGHUP main re-reads config.yaml, validates it
// whole, and hands it to Reload. Keys, plans, cache policy figures and
// breaker settings take effect at once, without dropping a connection;
// everything else is fixed at start and named in a log line when it
// differs, so an operator is never left guessing.

// Reload applies the reloadable parts of cfg, which the caller has
// validated (Config.Validate). A cfg the cache refuses changes nothing.
func (s *Server) Reload(cfg *Config) error {
	// The one step that can refuse goes first, so a refusal leaves all of
	// the running configuration in place.
	if err := s.cache.SetConfig(cfg.Cache); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	s.keys.Store(newKeySet(cfg.Keys, cfg.Plans, s.router.routes))
	s.limiter.SetPlans(cfg.Plans)
	running := s.live.Load()
	if !reflect.DeepEqual(running.Upstream.Breaker, cfg.Upstream.Breaker) {
		// New breakers start closed: the settings changed, and so may have
		// the operator's view of the legacy host.
		bs := newBreakers(cfg.Upstream.Breaker, s.router.routes, s.breakerChanged)
		s.breakers.Store(&bs)
	}
	if fixed := restartOnly(running, cfg); len(fixed) > 0 {
		s.log.Warn("config reload: these settings take effect only on restart", "sections", strings.Join(fixed, ", "))
	}
	s.live.Store(cfg)
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
	ua.Breaker, ub.Breaker = BreakerConfig{}, BreakerConfig{}
	diff("upstream (other than breaker)", ua, ub)
	diff("limits", a.Limits, b.Limits)
	diff("cache.max_bytes", a.Cache.MaxBytes, b.Cache.MaxBytes)
	diff("admin", a.Admin, b.Admin)
	diff("log.access", a.Log.AccessLog(), b.Log.AccessLog())
	return out
}
