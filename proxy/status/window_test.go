package status

import (
	"math"
	"testing"
	"time"

	"tradergate/cache"
	"tradergate/internal/testkit"
)

func near(a, b float64) bool      { return math.Abs(a-b) < 1e-9 }
func fill(w *Window) (s Snapshot) { w.Fill(&s); return s }
func mustRoute(t *testing.T, s *Snapshot, name string) *Route {
	t.Helper()
	r := s.Route(name)
	if r == nil {
		t.Fatalf("no route %q in %+v", name, s.Routes)
	}
	return r
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 500e6, time.UTC)

// newTestWindow returns a Window that started two minutes before t0, so the
// minute is full, and its clock, at t0.
func newTestWindow() (*Window, *testkit.Clock) {
	c := testkit.NewClock(t0.Add(-2 * time.Minute))
	w := NewWindow(WindowOptions{Now: c.Now})
	c.Set(t0)
	return w, c
}

func TestWindowRatesRatiosPercentiles(t *testing.T) {
	w, c := newTestWindow()
	// One minute of two requests a second on activity: a fast hit and a
	// slow 503 miss.
	for range 60 {
		w.ObserveRequest(Request{Route: "activity", Status: 200, Duration: 3 * time.Millisecond, Cache: cache.Hit, KeyID: "k1"})
		w.ObserveRequest(Request{Route: "activity", Status: 503, Duration: 30 * time.Millisecond, Cache: cache.Miss, KeyID: "k1"})
		w.ObserveUpstream(Call{Route: "activity", Status: 503})
		c.Advance(time.Second)
	}
	// And a route the page does not list: totals only.
	w.ObserveRequest(Request{Route: "none", Status: 404})
	s := fill(w)

	r := mustRoute(t, &s, "activity")
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
	if o := mustRoute(t, &s, "tx"); o.RequestsPerSec != 0 || o.P99Seconds != 0 {
		t.Errorf("idle route tx: %+v", o)
	}
	if len(s.Routes) != 9 || s.Route("orderbook_book") == nil {
		t.Errorf("routes: %+v", s.Routes)
	}
	if !near(s.Totals.RequestsPerSec, 2) { // the 404 came in the current second
		t.Errorf("totals %v/s", s.Totals.RequestsPerSec)
	}
	if !near(s.Cache.HitRatio, 0.5) || !near(s.Cache.HitRatioTotal, 0.5) {
		t.Errorf("hit ratio %v, total %v", s.Cache.HitRatio, s.Cache.HitRatioTotal)
	}
	if !near(s.Upstream.CallsPerSec, 1) || !near(s.Upstream.LegacyCallsPerRequest, 0.5) || !near(s.Upstream.ErrorRatio, 1) {
		t.Errorf("upstream %+v", s.Upstream)
	}
	if s.Upstream.LastError != "HTTP 503" || !s.Upstream.LastErrorAt.Equal(t0.Add(59*time.Second)) {
		t.Errorf("last error %q at %v", s.Upstream.LastError, s.Upstream.LastErrorAt)
	}
	if len(s.Limits.TopKeys) != 1 || s.Limits.TopKeys[0] != (KeyLoad{KeyID: "k1", LastMinute: 120}) {
		t.Errorf("top keys %+v", s.Limits.TopKeys)
	}

	// Half a minute later, half the figures have left the window; a
	// minute later, all of them, but the since-start ratio stays.
	c.Advance(30 * time.Second)
	s = fill(w)
	if r := mustRoute(t, &s, "activity"); !near(r.RequestsPerSec, 1) {
		t.Errorf("30 s later: %v/s, want 30 of 60 seconds at 2/s", r.RequestsPerSec)
	}
	c.Advance(31 * time.Second)
	s = fill(w)
	if r := mustRoute(t, &s, "activity"); r.RequestsPerSec != 0 || r.P50Seconds != 0 || s.Totals.RequestsPerSec != 0 {
		t.Errorf("a minute later: %+v, totals %+v", r, s.Totals)
	}
	if s.Cache.HitRatio != 0 || !near(s.Cache.HitRatioTotal, 0.5) || len(s.Limits.TopKeys) != 0 {
		t.Errorf("a minute later: cache %+v, top keys %+v", s.Cache, s.Limits.TopKeys)
	}
}

func TestWindowYoungerThanAMinute(t *testing.T) {
	c := testkit.NewClock(t0)
	w := NewWindow(WindowOptions{Now: c.Now})
	for range 10 {
		w.ObserveRequest(Request{Route: "tx", Status: 200, Cache: cache.Bypass})
	}
	c.Advance(5 * time.Second)
	s := fill(w)
	if r := mustRoute(t, &s, "tx"); !near(r.RequestsPerSec, 2) {
		t.Errorf("10 requests in the first of 5 seconds: %v/s, want 2", r.RequestsPerSec)
	}
	if s.Totals.CacheLookupsPerSec != 0 {
		t.Errorf("BYPASS counted as a lookup: %+v", s.Totals)
	}
}

func TestWindowTopKeysAndRefusals(t *testing.T) {
	w, c := newTestWindow()
	for i, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		for range i + 1 {
			w.ObserveRequest(Request{Route: "tx", Status: 200, KeyID: id})
		}
	}
	for range 1000 { // anonymous: never a key id
		w.ObserveRequest(Request{Route: "tx", Status: 200})
	}
	w.ObserveRefused("free")
	w.ObserveRefused("free")
	w.ObserveRefused("anonymous")
	c.Advance(time.Second)
	s := fill(w)
	want := []KeyLoad{{"g", 7}, {"f", 6}, {"e", 5}, {"d", 4}, {"c", 3}}
	if len(s.Limits.TopKeys) != len(want) {
		t.Fatalf("top keys %+v, want %+v", s.Limits.TopKeys, want)
	}
	for i := range want {
		if s.Limits.TopKeys[i] != want[i] {
			t.Errorf("top keys %+v, want %+v", s.Limits.TopKeys, want)
		}
	}
	wantRefused := []PlanRefusals{{Plan: "anonymous", PerSec: 1.0 / 60, LastMinute: 1, Total: 1}, {Plan: "free", PerSec: 2.0 / 60, LastMinute: 2, Total: 2}}
	if len(s.Limits.Refused) != 2 || s.Limits.Refused[0] != wantRefused[0] || s.Limits.Refused[1] != wantRefused[1] {
		t.Errorf("refused %+v, want %+v", s.Limits.Refused, wantRefused)
	}
	if !near(s.Totals.RefusedPerSec, 3.0/60) {
		t.Errorf("refused %v/s", s.Totals.RefusedPerSec)
	}
	c.Advance(time.Minute)
	s = fill(w)
	if s.Limits.Refused[1].LastMinute != 0 || s.Limits.Refused[1].Total != 2 {
		t.Errorf("a minute later: %+v", s.Limits.Refused)
	}
}

func TestWindowKeepsBreakers(t *testing.T) {
	w, _ := newTestWindow()
	s := Snapshot{Routes: []Route{{Name: "tx", Breaker: breakerOpen}}}
	w.Fill(&s)
	if r := mustRoute(t, &s, "tx"); r.Breaker != breakerOpen {
		t.Errorf("Fill lost the breaker state: %+v", r)
	}
}

func TestWindowUpstreamLastError(t *testing.T) {
	w, c := newTestWindow()
	w.ObserveUpstream(Call{Route: "tx", Status: 200})
	if s := fill(w); s.Upstream.LastError != "" || !s.Upstream.LastErrorAt.IsZero() {
		t.Errorf("no failure, yet last error %q", s.Upstream.LastError)
	}
	w.ObserveUpstream(Call{Route: "tx", Err: "timeout"})
	c.Advance(time.Second)
	w.ObserveUpstream(Call{Route: "tx", Status: 404}) // an answer: not an error
	if s := fill(w); s.Upstream.LastError != "timeout" || !s.Upstream.LastErrorAt.Equal(t0) {
		t.Errorf("last error %q at %v", s.Upstream.LastError, s.Upstream.LastErrorAt)
	}
}

func TestNamedIsBounded(t *testing.T) {
	n := newNamed(2)
	if n.get("a") == nil || n.get("b") == nil {
		t.Fatal("room for two names")
	}
	if n.get("c") != nil {
		t.Error("a third name was added past the bound")
	}
	if n.get("a") != n.get("a") {
		t.Error("a name's series changed")
	}
}

func TestQuantileOverflowBucket(t *testing.T) {
	var counts [len(latencyBounds) + 1]uint64
	counts[len(latencyBounds)] = 3
	if q := quantile(0.99, counts[:]); q != 10 {
		t.Errorf("slower than every bound: %v, want the highest bound, 10", q)
	}
}
