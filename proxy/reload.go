package proxy

import (
	"reflect"
	"strings"

	"tradergate/proxy/admin"
	"tradergate/proxy/config"
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
// validated (config.Config.Validate). A cfg the cache refuses changes nothing.
// The native section is applied whole but for native.shadow, and every
// native route that rolled back is re-armed (docs/OPERATING.md "Moving
// the backend").
func (s *Server) Reload(cfg *config.Config) error {
	// The one step that can refuse goes first, so a refusal leaves all of
	// the running configuration in place.
	if err := s.cache.SetConfig(cfg.Cache); err != nil {
		// Its problems name their fields (cache.*): passed on as they are.
		s.admin.Reloaded(admin.ReloadFailed, err)
		return err
	}
	s.keys.Store(newKeySet(cfg.Keys, cfg.Plans, s.routes.Routes()))
	s.legacy.Store(newLegacyPolicy(cfg.Legacy))
	s.migration.Configure(cfg)
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
	if fixed := config.RestartOnly(s.cfg, cfg); len(fixed) > 0 {
		s.log.Warn("config reload: these settings take effect only on restart", "sections", strings.Join(fixed, ", "))
		s.admin.Reloaded(admin.ReloadRestartNeeded, nil)
	} else {
		s.admin.Reloaded(admin.ReloadApplied, nil)
	}
	s.log.Info("config reloaded", "keys", len(cfg.Keys), "plans", len(cfg.Plans))
	return nil
}
