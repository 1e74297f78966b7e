package status

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// windowSpan is the span of every "last minute" figure.
const windowSpan = time.Minute

// topKeys is how many key ids Limits.TopKeys lists.
const topKeys = 5

// Counters are the edge's Prometheus collectors the page reads its figures
// from: the counts the metrics export are the only counts of a request.
// A nil collector reads as no series.
type Counters struct {
	// Requests counts answers: tradergate_requests_total, labels route,
	// code and cache.
	Requests prometheus.Collector
	// Durations is tradergate_request_duration_seconds, a histogram
	// labelled route (and cache, summed over).
	Durations prometheus.Collector
	// Upstream counts legacy calls: tradergate_upstream_requests_total,
	// labels route and code (a status, or a word when no answer came).
	Upstream prometheus.Collector
	// Refused counts 429s: tradergate_ratelimit_refused_total, label plan.
	Refused prometheus.Collector
	// KeyRequests counts each key's valid requests:
	// tradergate_migration_requests_total, label key_id (and api, summed
	// over).
	KeyRequests prometheus.Collector
	// Streams is the registry holding the streams' tradergate_stream_*
	// series (proxy/stream), for the streams panel; nil: no panel.
	Streams prometheus.Gatherer
}

// CacheLabels are the values of the cache label that are cache lookups: a
// hit, a miss, an answer served stale (cache.Status's names in the edge).
// Answers with another value (BYPASS, or none when the cache was not
// asked) are not lookups.
type CacheLabels struct{ Hit, Miss, Stale string }

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	// Routes are the route label's values listed apart, in the page's
	// order; requests on other routes count in the totals only.
	Routes []string
	// Cache names the lookups among the cache label's values.
	Cache CacheLabels
	// Every is how often Run takes a reading; zero: five seconds.
	Every time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Sampler turns the edge's counters into the page's last-minute figures.
// Run reads them every few seconds and keeps the readings of the last
// minute; Fill reads them once more and writes what changed since the
// oldest of those readings, as rates over the time between the two. It
// adds nothing to a request's work: the counters are the metrics'.
// A Sampler is safe for concurrent use.
type Sampler struct {
	c    Counters
	o    SamplerOptions
	mu   sync.Mutex // guards ring
	ring []reading  // oldest first
}

// reading is the counters' values at one moment.
type reading struct {
	at     time.Time
	routes []tally // by Routes, then one for every other route
	// bounds are the latency histogram's upper bounds, in seconds.
	bounds  []float64
	refused map[string]float64 // by plan
	keys    map[string]float64 // by key id
	// streams are the streamed routes' figures (streams.go), nil
	// without stream series; lagBounds their lag histogram's bounds.
	streams   map[string]*streamTally
	lagBounds []float64
}

// tally is one route's counts since the counters began.
type tally struct {
	requests, errors5xx, upstream, upErrors float64
	hits, misses, stale                     float64
	// latency counts answers per bucket of bounds (not cumulative), then
	// those slower than the last bound; nil: none yet.
	latency []float64
}

// NewSampler returns a Sampler of c, with a first reading taken now.
func NewSampler(c Counters, o SamplerOptions) *Sampler {
	o.Every = cmp.Or(o.Every, 5*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Routes = slices.Clone(o.Routes)
	s := &Sampler{c: c, o: o}
	s.record(s.read())
	return s
}

// Run takes a reading every Every until ctx ends. The caller owns the
// goroutine that runs it.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.record(s.read())
		}
	}
}

// record keeps r with the readings of the last minute before it, and the
// newest one older than that: the base of a page drawn while no reading
// is younger than a minute (Run not running).
func (s *Sampler) record(r reading) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring = append(s.ring, r)
	cut := r.at.Add(-windowSpan)
	old := 0
	for old+1 < len(s.ring) && !s.ring[old+1].at.After(cut) {
		old++
	}
	s.ring = slices.Delete(s.ring, 0, old)
}

// base is the reading figures at now are counted from: the oldest of the
// last minute, or the newest before it. A reading Run took after now
// (while Fill read the counters) is never the base.
func (s *Sampler) base(now time.Time) reading {
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := now.Add(-windowSpan)
	b := s.ring[0]
	for _, r := range s.ring {
		if r.at.After(now) {
			break
		}
		if b = r; !r.at.Before(cut) {
			break
		}
	}
	return b
}

// read takes a reading of the counters.
func (s *Sampler) read() reading {
	r := reading{at: s.o.Now(), routes: make([]tally, len(s.o.Routes)+1), refused: map[string]float64{}, keys: map[string]float64{}}
	routeOf := func(m *dto.Metric) *tally {
		name := label(m, "route")
		for i, n := range s.o.Routes {
			if n == name {
				return &r.routes[i]
			}
		}
		return &r.routes[len(s.o.Routes)]
	}
	collect(s.c.Requests, func(m *dto.Metric) {
		t, n := routeOf(m), m.GetCounter().GetValue()
		t.requests += n
		if code, err := strconv.Atoi(label(m, "code")); err == nil && code >= 500 {
			t.errors5xx += n
		}
		switch label(m, "cache") {
		case s.o.Cache.Hit:
			t.hits += n
		case s.o.Cache.Miss:
			t.misses += n
		case s.o.Cache.Stale:
			t.stale += n
		}
	})
	collect(s.c.Durations, func(m *dto.Metric) {
		if h := m.GetHistogram(); h != nil {
			routeOf(m).addHistogram(&r.bounds, h)
		}
	})
	collect(s.c.Upstream, func(m *dto.Metric) {
		t, n := routeOf(m), m.GetCounter().GetValue()
		t.upstream += n
		if upstreamFailed(label(m, "code")) {
			t.upErrors += n
		}
	})
	collect(s.c.Refused, func(m *dto.Metric) { r.refused[label(m, "plan")] += m.GetCounter().GetValue() })
	collect(s.c.KeyRequests, func(m *dto.Metric) { r.keys[label(m, "key_id")] += m.GetCounter().GetValue() })
	r.readStreams(s.c.Streams)
	return r
}

// upstreamFailed reports whether a legacy call with this code label
// failed: no answer (a word, not a status), a 5xx, or a 429 (the legacy
// host shedding load).
func upstreamFailed(code string) bool {
	n, err := strconv.Atoi(code)
	return err != nil || n >= 500 || n == 429
}

// addHistogram adds h's buckets to t's. The bounds are the first
// histogram's; every series of one histogram has the same.
func (t *tally) addHistogram(bounds *[]float64, h *dto.Histogram) {
	bs := h.GetBucket()
	if *bounds == nil {
		for _, b := range bs {
			if !math.IsInf(b.GetUpperBound(), +1) {
				*bounds = append(*bounds, b.GetUpperBound())
			}
		}
	}
	n := len(*bounds)
	if t.latency == nil {
		t.latency = make([]float64, n+1)
	}
	var below uint64
	for i, b := range bs[:min(n, len(bs))] {
		c := b.GetCumulativeCount()
		t.latency[i] += float64(c - below)
		below = c
	}
	t.latency[n] += float64(h.GetSampleCount() - below)
}

// collect reads every series of c.
func collect(c prometheus.Collector, f func(*dto.Metric)) {
	if c == nil {
		return
	}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		defer close(ch)
		c.Collect(ch)
	}()
	for pm := range ch {
		var m dto.Metric
		if pm.Write(&m) == nil {
			f(&m)
		}
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Fill writes the counters' figures into snap: Routes (breakers left as
// they are, or closed for a route snap did not list), Totals' rates, the
// cache's hit ratios and stale counts, the upstream's rates, the limits'
// refusals and busiest keys, and Streams. Figures "of the last minute" are
// the differences between a reading taken now and the oldest reading of the
// last minute, over the time between them (at least a second); "total"
// figures are since the counters began. The other fields are the edge's
// to fill.
func (s *Sampler) Fill(snap *Snapshot) {
	cur := s.read()
	base := s.base(cur.at)
	span := max(cur.at.Sub(base.at), time.Second).Seconds()
	perSec := func(n float64) float64 { return n / span }

	var tot, all tally
	routes := make([]Route, len(s.o.Routes))
	for i, name := range s.o.Routes {
		r := cur.routes[i].minus(base.routes[i])
		tot.add(r)
		routes[i] = Route{
			Name: name, Breaker: BreakerClosed,
			RequestsPerSec: perSec(r.requests),
			ErrorRatio:     ratio(r.errors5xx, r.requests),
			P50Seconds:     quantile(0.5, cur.bounds, r.latency),
			P99Seconds:     quantile(0.99, cur.bounds, r.latency),
		}
		if old := snap.Route(name); old != nil && old.Breaker != "" {
			routes[i].Breaker = old.Breaker
		}
	}
	tot.add(cur.routes[len(s.o.Routes)].minus(base.routes[len(s.o.Routes)]))
	for _, t := range cur.routes {
		all.add(t)
	}
	snap.Routes = routes

	snap.Totals.RequestsPerSec = perSec(tot.requests)
	snap.Totals.ErrorsPerSec = perSec(tot.errors5xx)
	snap.Totals.CacheLookupsPerSec = perSec(tot.lookups())
	snap.Totals.CacheHitsPerSec = perSec(tot.hits)
	snap.Totals.UpstreamCallsPerSec = perSec(tot.upstream)

	snap.Cache.HitRatio = snap.Totals.HitRatio()
	snap.Cache.HitRatioTotal = ratio(all.hits, all.lookups())
	snap.Cache.StalePerSec = perSec(tot.stale)
	snap.Cache.StaleTotal = int64(math.Round(all.stale))

	snap.Upstream.CallsPerSec = snap.Totals.UpstreamCallsPerSec
	snap.Upstream.LegacyCallsPerRequest = snap.Totals.LegacyCallsPerRequest()
	snap.Upstream.ErrorRatio = ratio(tot.upErrors, tot.upstream)

	snap.Limits.Refused = nil
	var refused float64
	for plan, total := range cur.refused {
		if total == 0 {
			continue // a plan's series is there from the start: list those that refused
		}
		n := total - base.refused[plan]
		refused += n
		snap.Limits.Refused = append(snap.Limits.Refused, PlanRefusals{
			Plan: plan, PerSec: perSec(n), LastMinute: int64(math.Round(n)), Total: int64(math.Round(total)),
		})
	}
	slices.SortFunc(snap.Limits.Refused, func(a, b PlanRefusals) int { return cmp.Compare(a.Plan, b.Plan) })
	snap.Totals.RefusedPerSec = perSec(refused)

	snap.Limits.TopKeys = nil
	for id, total := range cur.keys {
		if n := int64(math.Round(total - base.keys[id])); n > 0 {
			snap.Limits.TopKeys = append(snap.Limits.TopKeys, KeyLoad{KeyID: id, LastMinute: n})
		}
	}
	slices.SortFunc(snap.Limits.TopKeys, func(a, b KeyLoad) int {
		return cmp.Or(cmp.Compare(b.LastMinute, a.LastMinute), cmp.Compare(a.KeyID, b.KeyID))
	})
	snap.Limits.TopKeys = snap.Limits.TopKeys[:min(len(snap.Limits.TopKeys), topKeys)]

	snap.Streams = fillStreams(cur, base, span)
}

func (t tally) lookups() float64 { return t.hits + t.misses + t.stale }

// minus is what t counted since o.
func (t tally) minus(o tally) tally {
	d := tally{
		requests: t.requests - o.requests, errors5xx: t.errors5xx - o.errors5xx,
		upstream: t.upstream - o.upstream, upErrors: t.upErrors - o.upErrors,
		hits: t.hits - o.hits, misses: t.misses - o.misses, stale: t.stale - o.stale,
		latency: slices.Clone(t.latency),
	}
	for i := range min(len(d.latency), len(o.latency)) {
		d.latency[i] -= o.latency[i]
	}
	return d
}

// add adds o's counts to t's, latency buckets included.
func (t *tally) add(o tally) {
	t.requests += o.requests
	t.errors5xx += o.errors5xx
	t.upstream += o.upstream
	t.upErrors += o.upErrors
	t.hits += o.hits
	t.misses += o.misses
	t.stale += o.stale
	if t.latency == nil && o.latency != nil {
		t.latency = make([]float64, len(o.latency))
	}
	for i := range min(len(t.latency), len(o.latency)) {
		t.latency[i] += o.latency[i]
	}
}

// quantile estimates the q-quantile, in seconds, from per-bucket counts
// with upper bounds bounds (and a last, unbounded bucket) the way
// Prometheus's histogram_quantile does: linearly within the bucket that
// holds it. In the unbounded bucket it answers the highest bound.
func quantile(q float64, bounds, counts []float64) float64 {
	var total float64
	for _, c := range counts {
		total += c
	}
	if total <= 0 || len(bounds) == 0 || len(counts) != len(bounds)+1 {
		return 0
	}
	rank := q * total
	var cum float64
	for i, c := range counts {
		if c > 0 && cum+c >= rank {
			if i == len(bounds) {
				return bounds[i-1]
			}
			lower := 0.0
			if i > 0 {
				lower = bounds[i-1]
			}
			return lower + (bounds[i]-lower)*(rank-cum)/c
		}
		cum += c
	}
	return bounds[len(bounds)-1]
}
