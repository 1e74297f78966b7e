package status

import (
	"cmp"
	"slices"
	"time"
)

// Figures are one replica's rates and counts, in a form that adds up across
// replicas: rates and counts only, never a ratio. Ratios are computed from
// the sums (a fleet's hit ratio is its hits over its lookups, not the mean
// of its replicas' ratios, which would weigh an idle replica like a busy
// one).
type figures struct {
	RequestsPerSec float64 `json:"requests_per_second"`
	// ErrorsPerSec counts 5xx answers.
	ErrorsPerSec float64 `json:"errors_per_second"`
	// CacheLookupsPerSec counts HIT, MISS and STALE; CacheHitsPerSec HIT.
	CacheLookupsPerSec  float64 `json:"cache_lookups_per_second"`
	CacheHitsPerSec     float64 `json:"cache_hits_per_second"`
	UpstreamCallsPerSec float64 `json:"upstream_calls_per_second"`
	// RefusedPerSec counts 429s, every plan.
	RefusedPerSec    float64 `json:"refused_per_second"`
	UpstreamInFlight int64   `json:"upstream_in_flight"`
	CacheEntries     int64   `json:"cache_entries"`
	CacheBytes       int64   `json:"cache_bytes"`
	// OpenBreakers counts routes whose breaker is open.
	OpenBreakers int `json:"open_breakers"`
}

// Add adds g to f.
func (f *figures) Add(g figures) {
	f.RequestsPerSec += g.RequestsPerSec
	f.ErrorsPerSec += g.ErrorsPerSec
	f.CacheLookupsPerSec += g.CacheLookupsPerSec
	f.CacheHitsPerSec += g.CacheHitsPerSec
	f.UpstreamCallsPerSec += g.UpstreamCallsPerSec
	f.RefusedPerSec += g.RefusedPerSec
	f.UpstreamInFlight += g.UpstreamInFlight
	f.CacheEntries += g.CacheEntries
	f.CacheBytes += g.CacheBytes
	f.OpenBreakers += g.OpenBreakers
}

// ErrorRatio is the share of 5xx answers.
func (f figures) ErrorRatio() float64 { return ratio(f.ErrorsPerSec, f.RequestsPerSec) }

// HitRatio is the share of cache lookups that hit.
func (f figures) HitRatio() float64 { return ratio(f.CacheHitsPerSec, f.CacheLookupsPerSec) }

// LegacyCallsPerRequest is legacy (upstream) calls per client request. It
// passes 1 when requests make several calls each: an order book rebuild
// reads several events pages.
func (f figures) LegacyCallsPerRequest() float64 {
	return ratio(f.UpstreamCallsPerSec, f.RequestsPerSec)
}

func ratio(num, den float64) float64 {
	if den <= 0 {
		return 0
	}
	return num / den
}

// FleetView is every replica that published its figures lately, and their
// sum; this replica's row is its figures as the page is drawn, not its
// last post. It is empty when the edge has no Redis to share them through.
type fleetView struct {
	// Enabled is true when the edge shares figures (a Board is set).
	Enabled bool `json:"enabled"`
	// Error says why the replicas could not be read; the list is then
	// this replica alone.
	Error    string    `json:"error,omitempty"`
	Replicas []replica `json:"replicas"`
	Sum      figures   `json:"sum"`
	// The sum's ratios, recomputed from the summed rates.
	HitRatio              float64 `json:"hit_ratio"`
	ErrorRatio            float64 `json:"error_ratio"`
	LegacyCallsPerRequest float64 `json:"legacy_calls_per_request"`
}

// Replica is one replica's published summary.
type replica struct {
	ID       string    `json:"id"`
	Ready    bool      `json:"ready"`
	LastSeen time.Time `json:"last_seen"`
	Version  string    `json:"version"`
	Figures  figures   `json:"figures"`
}

// Summary is what a replica publishes of its snapshot.
func summary(s Snapshot) replica {
	deriveTotals(&s)
	return replica{ID: s.Replica, Ready: s.Ready, LastSeen: s.Taken, Version: s.Build.Version, Figures: s.Totals}
}

// withOwn puts own, the summary of the snapshot the page is drawn from,
// in the place of that replica's post in list (sorted by id), or adds it:
// the post can be a publish interval old, and a page must give one answer
// for its own replica in the header, the reasons and the fleet.
func withOwn(list []replica, own replica) []replica {
	if own.ID == "" {
		return list
	}
	i, found := slices.BinarySearchFunc(list, own.ID, func(r replica, id string) int { return cmp.Compare(r.ID, id) })
	if found {
		list[i] = own
		return list
	}
	return slices.Insert(list, i, own)
}

// newFleetView adds up the replicas' figures.
func newFleetView(replicas []replica) fleetView {
	v := fleetView{Enabled: true, Replicas: replicas}
	for _, r := range replicas {
		v.Sum.Add(r.Figures)
	}
	v.HitRatio, v.ErrorRatio, v.LegacyCallsPerRequest = v.Sum.HitRatio(), v.Sum.ErrorRatio(), v.Sum.LegacyCallsPerRequest()
	return v
}
