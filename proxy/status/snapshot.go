// Package status is the edge's status page: what an operator shielding the
// legacy host needs to see at a glance. The edge hands it a Snapshot of its
// state; the package renders it as a page (GET /, GET /status), serves it as
// JSON (GET /status.json), turns the edge's Prometheus counters into the
// last minute's figures (Sampler: it counts no request itself), and lets
// replicas share their figures through Redis (Board).
//
// The package holds no secrets and asks for none: a Snapshot names API keys
// by their id only, and has no field for a client address. Free text that
// could carry one (error messages) is scrubbed of the secrets the edge lists
// in Options.Secrets before it is shown.
//
// It imports cache, a package beside the edge rather than under it, for
// one fact only: the names of the cache's results (cache.Status), which a
// Window counts apart; owning a copy of those names here would let the two
// drift. It imports its neighbour proxy/fleet for the posts board (Board)
// the replicas share, which fleet owns with the rest of the shared Redis.
package status

import "time"

// Snapshot is the edge's state at one moment. It is the documented schema
// of GET /status.json: field names are stable; fields are added, never
// renamed. Rates and ratios cover the last minute unless their name says
// "total" (since the replica started). Ratios are 0 to 1; durations are
// seconds.
type Snapshot struct {
	// Replica identifies this replica in the fleet (a host name, a pod name).
	Replica string `json:"replica"`
	// Taken is when the snapshot was made.
	Taken time.Time `json:"taken"`
	// Ready is /readyz: serving with a loaded configuration, not draining.
	Ready bool `json:"ready"`
	// Health is the page's verdict, filled in by the handler (Assess).
	Health  health    `json:"health"`
	Build   Build     `json:"build"`
	Started time.Time `json:"started"`
	// UptimeSeconds is Taken minus Started.
	UptimeSeconds float64 `json:"uptime_seconds"`
	Config        Config  `json:"config"`
	// Totals are this replica's figures summed over its routes; the fleet
	// section adds them up across replicas.
	Totals   figures      `json:"totals"`
	Routes   []Route      `json:"routes"`
	Cache    cacheView    `json:"cache"`
	Upstream upstreamView `json:"upstream"`
	Limits   limitsView   `json:"limits"`
	TLS      []Cert       `json:"tls"`
	Fleet    fleetView    `json:"fleet"`
	// Migration is absent until the edge counts legacy against /v1 calls.
	Migration *migration `json:"migration,omitempty"`
	// Native is absent while no route leaves the legacy host (native
	// section off).
	Native *Native `json:"native,omitempty"`
	// Streams is absent while the edge has no stream series (streams.go).
	Streams *Streams `json:"streams,omitempty"`
}

// Build says which binary runs (tradergate_build_info).
type Build struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go_version"`
}

// Config is the loaded configuration file and its last reload.
type Config struct {
	// Hash is a digest of the file the edge runs with (say, the first 12 hex
	// digits of its SHA-256), so operators can tell replicas apart.
	Hash string `json:"hash"`
	// LastReload is when the last reload was tried; zero: never reloaded.
	LastReload time.Time `json:"last_reload,omitzero"`
	// ReloadOK is the last reload's result; true when never reloaded.
	ReloadOK bool `json:"reload_ok"`
	// ReloadError is why the last reload failed; "" when it did not.
	ReloadError string `json:"reload_error,omitempty"`
}

// Breaker states, as gobreaker's State.String() spells them.
const (
	BreakerClosed   = "closed"
	breakerHalfOpen = "half-open"
	breakerOpen     = "open"
)

// Route is one route's last minute.
type Route struct {
	Name string `json:"name"`
	// Breaker is the upstream breaker's state: closed, half-open or open;
	// "" for a route the edge builds from other routes' pages, which has
	// no breaker of its own (theirs guard its upstream calls).
	Breaker        string  `json:"breaker"`
	RequestsPerSec float64 `json:"requests_per_second"`
	// ErrorRatio is the share of answers with a 5xx status.
	ErrorRatio float64 `json:"error_ratio"`
	// P50Seconds and P99Seconds are estimated from the buckets of
	// tradergate_request_duration_seconds, as histogram_quantile does.
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// Cache is the page cache: the in-process first level and, when Redis is
// configured, the shared second level.
type cacheView struct {
	Entries  int64 `json:"entries"`
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"max_bytes"`
	// HitRatio is HIT over HIT+MISS+STALE (BYPASS is not a lookup).
	HitRatio      float64 `json:"hit_ratio"`
	HitRatioTotal float64 `json:"hit_ratio_total"`
	// CoalescedTotal counts requests that waited for another's fetch
	// instead of calling upstream themselves.
	CoalescedTotal int64 `json:"coalesced_total"`
	// StalePerSec and StaleTotal count answers served stale.
	StalePerSec float64 `json:"stale_per_second"`
	StaleTotal  int64   `json:"stale_total"`
	L2          L2      `json:"l2"`
}

// L2 is the shared cache level in Redis.
type L2 struct {
	// Present is false when Redis is not configured; the other fields are
	// then empty.
	Present bool `json:"present"`
	// Breaker is the Redis breaker's state.
	Breaker string `json:"breaker,omitempty"`
	// HitRatioTotal is hit over hit+miss+stale+error+corrupt, since start.
	HitRatioTotal float64 `json:"hit_ratio_total"`
}

// Upstream is the legacy host as the edge sees it.
type upstreamView struct {
	CallsPerSec float64 `json:"calls_per_second"`
	// LegacyCallsPerRequest is legacy calls per client request: 0.05
	// means the legacy host sees one call for every twenty requests. It
	// may pass 1: an order book rebuild (/v1/orderbook/book) reads several
	// events pages, each a legacy call on a miss.
	LegacyCallsPerRequest float64 `json:"legacy_calls_per_request"`
	ErrorRatio            float64 `json:"error_ratio"`
	InFlight              int64   `json:"in_flight"`
	MaxConcurrent         int64   `json:"max_concurrent"`
	RetriesTotal          int64   `json:"retries_total"`
	// BudgetRefusedTotal counts retries the retry budget refused.
	BudgetRefusedTotal int64 `json:"budget_refused_total"`
	// LastError is the last failed call: no answer, or a 5xx.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// Store health states of the rate limiter's store.
const (
	StoreOK       = "ok"
	storeDegraded = "degraded"
	StoreDown     = "down"
)

// Limits is rate limiting.
type limitsView struct {
	// Store is the counters' store health: ok, degraded (falling back to
	// local counters) or down.
	Store string `json:"store"`
	// StoreErrorsTotal is tradergate_ratelimit_store_errors_total.
	StoreErrorsTotal int64 `json:"store_errors_total"`
	// Refused is 429s per plan ("anonymous" for the per-IP bucket), for
	// each plan that refused since start.
	Refused []PlanRefusals `json:"refused"`
	// TopKeys are the key ids with the most valid requests of the last
	// minute (tradergate_migration_requests_total), busiest first.
	TopKeys []KeyLoad `json:"top_keys"`
}

// PlanRefusals is one plan's 429s.
type PlanRefusals struct {
	Plan       string  `json:"plan"`
	PerSec     float64 `json:"per_second"`
	LastMinute int64   `json:"last_minute"`
	Total      int64   `json:"total"`
}

// KeyLoad is one API key's traffic, named by the key's id, never the key.
type KeyLoad struct {
	KeyID      string `json:"key_id"`
	LastMinute int64  `json:"last_minute"`
}

// Cert is one certificate the edge serves.
type Cert struct {
	// Names are the certificate's DNS names.
	Names    []string  `json:"names"`
	NotAfter time.Time `json:"not_after"`
	// DaysLeft is NotAfter minus Taken in whole days; negative once expired.
	DaysLeft int `json:"days_left"`
}

// Migration counts, per key id, the calls clients still make on the legacy
// paths against those on /v1.
type migration struct {
	Keys []migrationKey `json:"keys"`
}

// MigrationKey is one key id's calls since start.
type migrationKey struct {
	KeyID  string `json:"key_id"`
	Legacy int64  `json:"legacy"`
	V1     int64  `json:"v1"`
}

// Route returns the route named name, or nil.
func (s *Snapshot) Route(name string) *Route {
	for i := range s.Routes {
		if s.Routes[i].Name == name {
			return &s.Routes[i]
		}
	}
	return nil
}

// Native is the move of the backend off the legacy host: per route, how
// its misses are served and what the comparisons with the native service
// found, since the replica started (GET /shadow has the details).
type Native struct {
	Routes []NativeRoute `json:"routes"`
}

// NativeRoute is one route of Native.
type NativeRoute struct {
	Name string `json:"name"`
	// Mode is the configured mode (legacy, shadow, canary, native);
	// EffectiveMode what runs: shadow once the route rolled back.
	Mode          string `json:"mode"`
	EffectiveMode string `json:"effective_mode"`
	// Percent is the share of keys native serves in canary mode.
	Percent float64 `json:"percent"`
	// RolledBack: native's errors or differences passed native.rollback;
	// clients are on legacy until a reload. Reason says which bound.
	RolledBack   bool      `json:"rolled_back"`
	Reason       string    `json:"reason,omitempty"`
	RolledBackAt time.Time `json:"rolled_back_at,omitzero"`
	// Compared counts comparisons made, Different those that differed;
	// Skipped, pages not compared because they are fresh; NativeErrors,
	// comparisons native gave no answer for; Dropped, comparisons a full
	// queue refused.
	Compared     int64 `json:"compared"`
	Different    int64 `json:"different"`
	Skipped      int64 `json:"skipped"`
	NativeErrors int64 `json:"native_errors"`
	Dropped      int64 `json:"dropped"`
}
