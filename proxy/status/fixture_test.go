package status

import "time"

// routeNames are the edge's route names, in the order of its route table.
var routeNames = []string{
	"orderbook_events", "activity", "deposits_withdrawals", "combo_positions_closed",
	"positions_closed", "positions_open", "tx", "wallet_address", "orderbook_book",
}

// taken is when the fixture's snapshot was made.
var taken = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// fixture is a busy replica with trouble: the activity breaker is open,
// positions_open's is half-open, one certificate is close to expiry and
// Redis is configured.
func fixture() Snapshot {
	s := Snapshot{
		Replica: "edge-1",
		Taken:   taken,
		Ready:   true,
		Build:   Build{Version: "v1.4.0", Revision: "3c122e8", GoVersion: "go1.26.8"},
		Started: taken.Add(-(76*time.Hour + 12*time.Minute)),
		Config:  Config{Hash: "9f2c4e1a7b3d", LastReload: taken.Add(-42 * time.Minute), ReloadOK: true},
		Cache: cacheView{
			Entries: 48213, Bytes: 187 << 20, MaxBytes: 256 << 20,
			HitRatio: 0.912, HitRatioTotal: 0.874, CoalescedTotal: 15320,
			StalePerSec: 0.4, StaleTotal: 2210,
			L2: L2{Present: true, Breaker: BreakerClosed, HitRatioTotal: 0.41},
		},
		Upstream: upstreamView{
			CallsPerSec: 21.5, LegacyCallsPerRequest: 0.0519, ErrorRatio: 0.093, InFlight: 12, MaxConcurrent: 64,
			RetriesTotal: 312, BudgetRefusedTotal: 4,
			LastError: "activity: timeout after 5s", LastErrorAt: taken.Add(-3 * time.Second),
		},
		Limits: limitsView{
			Store: StoreOK, StoreErrorsTotal: 2,
			Refused: []PlanRefusals{
				{Plan: "anonymous", PerSec: 1.2, LastMinute: 72, Total: 9120},
				{Plan: "free", PerSec: 0.05, LastMinute: 3, Total: 411},
			},
			TopKeys: []KeyLoad{{"acme-prod", 9120}, {"desk-7", 4410}, {"bot-42", 2980}, {"research", 655}, {"mobile-ios", 120}},
		},
		TLS: []Cert{
			{Names: []string{"api.example.com", "edge.example.com"}, NotAfter: taken.Add(63*24*time.Hour + time.Hour)},
			{Names: []string{"old.example.com"}, NotAfter: taken.Add(12*24*time.Hour + time.Hour)},
		},
		Migration: &migration{Keys: []migrationKey{{KeyID: "acme-prod", Legacy: 120, V1: 88100}, {KeyID: "desk-7", Legacy: 5400, V1: 310}}},
		Native: &Native{Routes: []NativeRoute{
			{Name: "activity", Mode: "shadow", EffectiveMode: "shadow", Compared: 5120, Different: 3, Skipped: 40210, NativeErrors: 7},
			{Name: "tx", Mode: "native", EffectiveMode: "shadow", RolledBack: true, RolledBackAt: taken.Add(-7 * time.Minute),
				Reason: "native error ratio 0.400 (20 of 50 calls in 1m0s) passed rollback.error_ratio 0.05", Compared: 310, NativeErrors: 20, Dropped: 2},
			{Name: "wallet_address", Mode: "canary", EffectiveMode: "canary", Percent: 30, Compared: 880, Different: 0},
		}},
		Streams: &Streams{Routes: []StreamRoute{
			{Name: "orderbook_events", Open: 1840, Shared: 12, MostPerStream: 1200, Polling: 4,
				EventsPerSec: 5520.5, EventsTotal: 91_200_311, PollsPerSec: 4, LegacyCallsPerSec: 1.2, LegacyCallsTotal: 310_422,
				LagP50Seconds: 0.41, LagP99Seconds: 2.7, LaggingEndedTotal: 3},
			{Name: "activity", Open: 22, Shared: 20, MostPerStream: 2, Polling: 20, EventsPerSec: 0.7, EventsTotal: 9120,
				PollsPerSec: 6.6, LegacyCallsPerSec: 0.9, LegacyCallsTotal: 80_112, LagP50Seconds: 1.1, LagP99Seconds: 2.9},
			{Name: "deposits_withdrawals"},
		}},
	}
	rates := map[string][4]float64{ // requests/s, 5xx ratio, p50, p99
		"orderbook_events":       {120.4, 0, 0.0009, 0.012},
		"activity":               {88.1, 0.31, 0.0021, 4.8},
		"deposits_withdrawals":   {12.0, 0, 0.0011, 0.034},
		"combo_positions_closed": {3.2, 0, 0.0012, 0.051},
		"positions_closed":       {40.7, 0.004, 0.0010, 0.043},
		"positions_open":         {101.9, 0.012, 0.0008, 0.088},
		"tx":                     {7.3, 0, 0.0004, 0.006},
		"wallet_address":         {41.0, 0, 0.00025, 0.0031},
		"orderbook_book":         {0, 0, 0, 0},
	}
	for _, name := range routeNames {
		r := rates[name]
		s.Routes = append(s.Routes, Route{Name: name, Breaker: BreakerClosed, RequestsPerSec: r[0], ErrorRatio: r[1], P50Seconds: r[2], P99Seconds: r[3]})
	}
	s.Route("activity").Breaker = breakerOpen
	s.Route("positions_open").Breaker = breakerHalfOpen
	s.Route("orderbook_book").Breaker = "" // built by the edge: no breaker
	// The routes' sums, rounded, as the JSON would carry them.
	s.Totals.RequestsPerSec = 414.6
	s.Totals.ErrorsPerSec = 28.7
	s.Totals.CacheLookupsPerSec = 380
	s.Totals.CacheHitsPerSec = 346.56
	s.Totals.UpstreamCallsPerSec = 21.5
	s.Totals.RefusedPerSec = 1.25
	s.Fleet = newFleetView([]replica{
		summary(s),
		{ID: "edge-2", Ready: true, LastSeen: taken.Add(-4 * time.Second), Version: "v1.4.0", Figures: figures{RequestsPerSec: 402, ErrorsPerSec: 1.2, CacheLookupsPerSec: 360, CacheHitsPerSec: 331, UpstreamCallsPerSec: 18.2, CacheEntries: 47000, CacheBytes: 180 << 20}},
		{ID: "edge-3", Ready: false, LastSeen: taken.Add(-11 * time.Second), Version: "v1.3.2", Figures: figures{RequestsPerSec: 0.5, CacheLookupsPerSec: 0.5}},
	})
	return s
}
