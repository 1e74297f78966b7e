package migration

import (
	"cmp"
	"context"
	"slices"
	"time"

	"tradergate/proxy/config"
)

// Report is the migration report, as GET /migration on the admin listener
// answers it (docs/OPERATING.md "Migrating clients").
type Report struct {
	// Scope is "fleet" (every replica's counts, from Redis) or "replica"
	// (this one's: no Redis, or Redis did not answer).
	Scope       string      `json:"scope"`
	Enabled     bool        `json:"legacy_enabled"`
	Deprecation *string     `json:"deprecation"`
	Sunset      *string     `json:"sunset"`
	GuideURL    *string     `json:"guide_url"`
	Keys        []KeyReport `json:"keys"`
}

// KeyReport is one key's line of the report.
type KeyReport struct {
	KeyID          string        `json:"key_id"`
	Legacy         string        `json:"legacy"` // allow or retired, as configured; "" for a key no longer configured
	V1Requests     int64         `json:"v1_requests"`
	LegacyRequests int64         `json:"legacy_requests"`
	FirstLegacyUse *string       `json:"first_legacy_use"`
	LastLegacyUse  *string       `json:"last_legacy_use"`
	LegacyRoutes   []RouteReport `json:"legacy_routes"`
}

// RouteReport is a key's legacy calls of one route.
type RouteReport struct {
	Route    string `json:"route"`
	Requests int64  `json:"requests"`
	LastCall string `json:"last_call"`
}

// Report builds the report of the running configuration cfg: the fleet's
// counts with Redis, this replica's when Redis does not answer.
func (c *Counts) Report(ctx context.Context, cfg *config.Config) Report {
	rep := Report{Scope: "replica", Enabled: cfg.Legacy.Enabled, Keys: []KeyReport{}}
	if cfg.Legacy.Deprecation != "" {
		rep.Deprecation = &cfg.Legacy.Deprecation
	}
	if cfg.Legacy.Sunset != "" {
		rep.Sunset = &cfg.Legacy.Sunset
	}
	if cfg.Legacy.GuideURL != "" {
		rep.GuideURL = &cfg.Legacy.GuideURL
	}
	legacyOf := map[string]string{}
	for _, k := range cfg.Keys {
		legacyOf[k.ID] = cmp.Or(k.Legacy, config.LegacyAllow)
	}
	c.mu.RLock()
	ids := make([]string, 0, len(c.keys))
	snaps := map[string]snap{}
	for id, k := range c.keys {
		ids = append(ids, id)
		snaps[id] = k.snapshot()
	}
	c.mu.RUnlock()
	slices.Sort(ids)
	if c.fleet != nil {
		if fleetSnaps, err := c.fleetCounts(ctx, ids); err == nil {
			rep.Scope, snaps = "fleet", fleetSnaps
		} else {
			c.log.Warn("migration report: redis did not answer; this replica's counts only", "err", err)
		}
	}
	for _, id := range ids {
		s := snaps[id]
		k := KeyReport{KeyID: id, Legacy: legacyOf[id], V1Requests: s.v1, LegacyRequests: s.legacy,
			FirstLegacyUse: msTime(s.first), LastLegacyUse: msTime(s.last), LegacyRoutes: []RouteReport{}}
		for i, r := range s.routes {
			if r.n > 0 {
				k.LegacyRoutes = append(k.LegacyRoutes, RouteReport{c.routes[i].Name, r.n, *msTime(r.last)})
			}
		}
		rep.Keys = append(rep.Keys, k)
	}
	return rep
}

func msTime(ms int64) *string {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	return &t
}
