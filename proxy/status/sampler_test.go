package status

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/internal/testkit"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func mustRoute(t *testing.T, s *Snapshot, name string) *Route {
	t.Helper()
	r := s.Route(name)
	if r == nil {
		t.Fatalf("no route %q in %+v", name, s.Routes)
	}
	return r
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 500e6, time.UTC)

// edgeCounters are collectors with the names, labels and buckets of the
// edge's (proxy/metrics.go, the migration's per-key count), counted by
// hand the way the edge counts.
type edgeCounters struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	upstream *prometheus.CounterVec
	refused  *prometheus.CounterVec
	keys     *prometheus.CounterVec
}

func newEdgeCounters() *edgeCounters {
	return &edgeCounters{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_requests_total"}, []string{"route", "code", "cache"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tradergate_request_duration_seconds",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route", "cache"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_upstream_requests_total"}, []string{"route", "code"}),
		refused:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_ratelimit_refused_total"}, []string{"plan"}),
		keys:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_migration_requests_total"}, []string{"key_id", "api"}),
	}
}

func (c *edgeCounters) counters() Counters {
	return Counters{Requests: c.requests, Durations: c.duration, Upstream: c.upstream, Refused: c.refused, KeyRequests: c.keys}
}

// answer counts one answered request as the edge's finish does, and the
// key's request as its migration step does.
func (c *edgeCounters) answer(route, code, cache string, took time.Duration, key string) {
	c.requests.WithLabelValues(route, code, cache).Inc()
	c.duration.WithLabelValues(route, cache).Observe(took.Seconds())
	if key != "" {
		c.keys.WithLabelValues(key, "v1").Inc()
	}
}

var testCacheLabels = CacheLabels{Hit: "HIT", Miss: "MISS", Stale: "STALE"}

// newTestSampler returns a Sampler of c that started at t0 and its clock.
func newTestSampler(c *edgeCounters) (*Sampler, *testkit.Clock) {
	clock := testkit.NewClock(t0)
	return NewSampler(c.counters(), SamplerOptions{Routes: routeNames, Cache: testCacheLabels, Now: clock.Now}), clock
}

// advance moves the clock by d in steps of Every, taking a reading after
// each, as Run does.
func advance(s *Sampler, c *testkit.Clock, d time.Duration) {
	for end := c.Now().Add(d); c.Now().Before(end); {
		c.Advance(min(s.o.Every, end.Sub(c.Now())))
		s.record(s.read())
	}
}

func fill(s *Sampler) (snap Snapshot) { s.Fill(&snap); return snap }

func TestSamplerRatesRatiosPercentiles(t *testing.T) {
	c := newEdgeCounters()
	s, clock := newTestSampler(c)
	// One minute of two requests a second on activity, a fast hit and a
	// slow 503 miss, and one failed legacy call.
	for range 60 {
		c.answer("activity", "200", "HIT", 3*time.Millisecond, "k1")
		c.answer("activity", "503", "MISS", 30*time.Millisecond, "k1")
		c.upstream.WithLabelValues("activity", "503").Inc()
		advance(s, clock, time.Second)
	}
	// And a route the page does not list: in the totals only, as its
	// requests were spread over the minute.
	c.answer("none", "404", "NONE", time.Millisecond, "")
	snap := fill(s)

	r := mustRoute(t, &snap, "activity")
	if !near(r.RequestsPerSec, 2) || !near(r.ErrorRatio, 0.5) {
		t.Errorf("activity: %v/s, 5xx %v; want 2/s, 0.5", r.RequestsPerSec, r.ErrorRatio)
	}
	// 60 answers in (2.5ms, 5ms], 60 in (25ms, 50ms]: the median is the
	// top of the first bucket, p99 is 98% into the second.
	if !near(r.P50Seconds, 0.005) || !near(r.P99Seconds, 0.025+0.025*(118.8-60)/60) {
		t.Errorf("activity p50 %v p99 %v", r.P50Seconds, r.P99Seconds)
	}
	if r.Breaker != BreakerClosed {
		t.Errorf("breaker %q, want closed by default", r.Breaker)
	}
	if o := mustRoute(t, &snap, "tx"); o.RequestsPerSec != 0 || o.P99Seconds != 0 {
		t.Errorf("idle route tx: %+v", o)
	}
	if len(snap.Routes) != len(routeNames) || snap.Route("orderbook_book") == nil {
		t.Errorf("routes: %+v", snap.Routes)
	}
	if !near(snap.Totals.RequestsPerSec, 121.0/60) || !near(snap.Totals.ErrorsPerSec, 1) {
		t.Errorf("totals %v/s, 5xx %v/s", snap.Totals.RequestsPerSec, snap.Totals.ErrorsPerSec)
	}
	if !near(snap.Cache.HitRatio, 0.5) || !near(snap.Cache.HitRatioTotal, 0.5) {
		t.Errorf("hit ratio %v, total %v", snap.Cache.HitRatio, snap.Cache.HitRatioTotal)
	}
	if !near(snap.Upstream.CallsPerSec, 1) || !near(snap.Upstream.LegacyCallsPerRequest, 60.0/121) || !near(snap.Upstream.ErrorRatio, 1) {
		t.Errorf("upstream %+v", snap.Upstream)
	}
	if len(snap.Limits.TopKeys) != 1 || snap.Limits.TopKeys[0] != (KeyLoad{KeyID: "k1", LastMinute: 120}) {
		t.Errorf("top keys %+v", snap.Limits.TopKeys)
	}

	// Half a minute later, half the figures have left the window; a
	// minute later, all of them, but the since-start ratio stays.
	advance(s, clock, 30*time.Second)
	snap = fill(s)
	if r := mustRoute(t, &snap, "activity"); !near(r.RequestsPerSec, 1) {
		t.Errorf("30 s later: %v/s, want 30 of 60 seconds at 2/s", r.RequestsPerSec)
	}
	advance(s, clock, 31*time.Second)
	snap = fill(s)
	if r := mustRoute(t, &snap, "activity"); r.RequestsPerSec != 0 || r.P50Seconds != 0 || snap.Totals.RequestsPerSec != 0 {
		t.Errorf("a minute later: %+v, totals %+v", r, snap.Totals)
	}
	if snap.Cache.HitRatio != 0 || !near(snap.Cache.HitRatioTotal, 0.5) || len(snap.Limits.TopKeys) != 0 {
		t.Errorf("a minute later: cache %+v, top keys %+v", snap.Cache, snap.Limits.TopKeys)
	}
}

func TestSamplerYoungerThanAMinute(t *testing.T) {
	c := newEdgeCounters()
	s, clock := newTestSampler(c)
	for range 10 {
		c.answer("tx", "200", "BYPASS", time.Millisecond, "")
	}
	clock.Advance(5 * time.Second) // no reading since the first
	snap := fill(s)
	if r := mustRoute(t, &snap, "tx"); !near(r.RequestsPerSec, 2) {
		t.Errorf("10 requests in the first 5 seconds: %v/s, want 2", r.RequestsPerSec)
	}
	if snap.Totals.CacheLookupsPerSec != 0 {
		t.Errorf("BYPASS counted as a lookup: %+v", snap.Totals)
	}
	// Drawn in the instant it started, a page divides by a second, not by
	// nothing.
	s2 := NewSampler(c.counters(), SamplerOptions{Routes: routeNames, Cache: testCacheLabels, Now: clock.Now})
	c.answer("tx", "200", "HIT", time.Millisecond, "")
	snap = fill(s2)
	if r := mustRoute(t, &snap, "tx"); !near(r.RequestsPerSec, 1) {
		t.Errorf("one request at once: %v/s, want 1 over the shortest span, a second", r.RequestsPerSec)
	}
}

// Without Run, the page still adds up: over the time since the newest
// reading, however old.
func TestSamplerWithoutReadings(t *testing.T) {
	c := newEdgeCounters()
	s, clock := newTestSampler(c)
	for range 240 {
		c.answer("tx", "200", "HIT", time.Millisecond, "")
	}
	clock.Advance(2 * time.Minute)
	snap := fill(s)
	if r := mustRoute(t, &snap, "tx"); !near(r.RequestsPerSec, 2) {
		t.Errorf("240 requests in two minutes, no reading between: %v/s, want 2", r.RequestsPerSec)
	}
}

// Run may take a reading while a page reads the counters: that reading,
// later than the page's, is not the page's base.
func TestSamplerBaseIsNeverLaterThanThePage(t *testing.T) {
	c := newEdgeCounters()
	s, clock := newTestSampler(c)
	for range 120 {
		c.answer("tx", "200", "HIT", time.Millisecond, "")
	}
	clock.Advance(2*time.Minute + time.Second)
	s.record(s.read()) // Run's reading, a second after the page's
	clock.Set(t0.Add(2 * time.Minute))
	snap := fill(s)
	if r := mustRoute(t, &snap, "tx"); !near(r.RequestsPerSec, 1) {
		t.Errorf("120 requests since the first reading, two minutes ago: %v/s, want 1", r.RequestsPerSec)
	}
}

func TestSamplerTopKeysAndRefusals(t *testing.T) {
	c := newEdgeCounters()
	s, clock := newTestSampler(c)
	c.refused.WithLabelValues("pro") // a plan that never refused: not listed
	advance(s, clock, 2*time.Minute)
	for i, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		for range i + 1 {
			c.answer("tx", "200", "HIT", time.Millisecond, id)
		}
	}
	for range 1000 { // anonymous: no key id
		c.answer("tx", "200", "HIT", time.Millisecond, "")
	}
	c.refused.WithLabelValues("free").Add(2)
	c.refused.WithLabelValues("anonymous").Inc()
	advance(s, clock, time.Second)
	snap := fill(s)
	want := []KeyLoad{{"g", 7}, {"f", 6}, {"e", 5}, {"d", 4}, {"c", 3}}
	if len(snap.Limits.TopKeys) != len(want) {
		t.Fatalf("top keys %+v, want %+v", snap.Limits.TopKeys, want)
	}
	for i := range want {
		if snap.Limits.TopKeys[i] != want[i] {
			t.Errorf("top keys %+v, want %+v", snap.Limits.TopKeys, want)
		}
	}
	// The oldest reading of the minute is 56 s old: readings every 5 s
	// since t0, the page drawn at 2 min 1 s.
	const span = 56.0
	wantRefused := []PlanRefusals{{Plan: "anonymous", PerSec: 1 / span, LastMinute: 1, Total: 1}, {Plan: "free", PerSec: 2 / span, LastMinute: 2, Total: 2}}
	if len(snap.Limits.Refused) != 2 || snap.Limits.Refused[0] != wantRefused[0] || snap.Limits.Refused[1] != wantRefused[1] {
		t.Errorf("refused %+v, want %+v", snap.Limits.Refused, wantRefused)
	}
	if !near(snap.Totals.RefusedPerSec, 3/span) {
		t.Errorf("refused %v/s", snap.Totals.RefusedPerSec)
	}
	advance(s, clock, time.Minute)
	snap = fill(s)
	if len(snap.Limits.Refused) != 2 || snap.Limits.Refused[1].LastMinute != 0 || snap.Limits.Refused[1].Total != 2 {
		t.Errorf("a minute later: %+v", snap.Limits.Refused)
	}
}

func TestSamplerUpstreamFailures(t *testing.T) {
	c := newEdgeCounters()
	s, clock := newTestSampler(c)
	for _, code := range []string{"200", "404", "error", "503", "429"} {
		c.upstream.WithLabelValues("tx", code).Inc()
	}
	advance(s, clock, 10*time.Second)
	snap := fill(s)
	// No answer, a 5xx and the legacy host's 429 failed; a 404 is an
	// answer.
	if !near(snap.Upstream.ErrorRatio, 3.0/5) || !near(snap.Upstream.CallsPerSec, 0.5) {
		t.Errorf("upstream %+v", snap.Upstream)
	}
}

func TestSamplerKeepsBreakers(t *testing.T) {
	s, _ := newTestSampler(newEdgeCounters())
	snap := Snapshot{Routes: []Route{{Name: "tx", Breaker: breakerOpen}}}
	s.Fill(&snap)
	if r := mustRoute(t, &snap, "tx"); r.Breaker != breakerOpen {
		t.Errorf("Fill lost the breaker state: %+v", r)
	}
}

// The readings kept are bounded by the minute, however long Run runs.
func TestSamplerReadingsAreBounded(t *testing.T) {
	s, clock := newTestSampler(newEdgeCounters())
	advance(s, clock, time.Hour)
	if n, most := len(s.ring), int(windowSpan/s.o.Every)+2; n > most {
		t.Errorf("%d readings after an hour, want at most %d", n, most)
	}
}

func TestQuantileOverflowBucket(t *testing.T) {
	bounds := []float64{0.1, 1, 10}
	if q := quantile(0.99, bounds, []float64{0, 0, 0, 3}); q != 10 {
		t.Errorf("slower than every bound: %v, want the highest bound, 10", q)
	}
}
