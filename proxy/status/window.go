package status

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"tradergate/cache"
)

// Routes are the route names the page shows, in the order of the edge's
// route table, and orderbook_book.
func Routes() []string {
	return []string{
		"orderbook_events", "activity", "deposits_withdrawals", "combo_positions_closed",
		"positions_closed", "positions_open", "tx", "wallet_address", "orderbook_book",
	}
}

// latencyBounds are the upper bounds of the latency histogram, those of
// tradergate_request_duration_seconds, so the page's percentiles and a
// dashboard's histogram_quantile agree. A last bucket holds the slower
// answers. It is never written.
var latencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// countedResults are the cache results a Window counts apart, by index:
// cacheHit, cacheMiss, cacheStale.
var countedResults = [...]cache.Status{cache.Hit, cache.Miss, cache.Stale}

const (
	cacheHit = iota
	cacheMiss
	cacheStale
	cacheKinds
)

// Bounds on the names a Window tracks; see named.
const (
	maxKeyIDs = 4096
	maxPlans  = 64
	// topKeys is how many key ids Limits.TopKeys lists.
	topKeys = 5
)

// Window keeps the last minute of what the edge did, per second, from which
// Fill computes rates, ratios and latency percentiles. The edge calls
// ObserveRequest once per answered request, ObserveUpstream once per call to
// the legacy host and ObserveRefused once per 429; each is a handful of
// atomic operations, takes no lock and does not allocate. A Window is safe
// for concurrent use.
type Window struct {
	now   func() time.Time
	start uint32 // Unix second of creation

	names  []string
	routes []routeCounts // one per name, then one for any other route
	keys   *named
	plans  *named

	lastErr struct {
		mu     sync.Mutex // guards the fields below
		text   string
		status int
		at     time.Time
	}
}

// routeCounts are one route's counters.
type routeCounts struct {
	requests, errors5xx ring
	cache               [cacheKinds]ring
	latency             [len(latencyBounds) + 1]ring
	upstream, upErrors  ring
	cacheTotal          [cacheKinds]atomic.Int64
}

// WindowOptions configure a Window.
type WindowOptions struct {
	// Routes are the route names to count apart; nil: Routes(). Requests
	// on other routes (or none) count in the totals only.
	Routes []string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// NewWindow returns an empty Window.
func NewWindow(o WindowOptions) *Window {
	w := &Window{now: o.Now, names: o.Routes, keys: newNamed(maxKeyIDs), plans: newNamed(maxPlans)}
	if w.now == nil {
		w.now = time.Now
	}
	if w.names == nil {
		w.names = Routes()
	}
	w.names = slices.Clone(w.names)
	w.routes = make([]routeCounts, len(w.names)+1)
	w.start = uint32(w.now().Unix())
	return w
}

// Request is one answered client request.
type Request struct {
	// Route is the route name; unknown names count in the totals only.
	Route string
	// Status is the HTTP status sent.
	Status int
	// Duration is from the request's arrival to the answer's last byte.
	Duration time.Duration
	// Cache is the cache's result; 0 for an answer the cache did not
	// give.
	Cache cache.Status
	// KeyID is the API key's id; "" for anonymous requests, which are not
	// listed among the busiest keys (their bucket is a client address).
	KeyID string
	// At is when the answer was sent, for a caller that has read the clock
	// already (a reading is not free on every machine, and this runs for
	// every request); zero: the window reads its own clock.
	At time.Time
}

// ObserveRequest counts one answered request.
func (w *Window) ObserveRequest(r Request) {
	at := r.At
	if at.IsZero() {
		at = w.now()
	}
	sec := uint32(at.Unix())
	rc := &w.routes[w.route(r.Route)]
	rc.requests.add(sec)
	if r.Status >= 500 {
		rc.errors5xx.add(sec)
	}
	if k := cacheKind(r.Cache); k < cacheKinds {
		rc.cache[k].add(sec)
		rc.cacheTotal[k].Add(1)
	}
	i := 0
	for i < len(latencyBounds) && r.Duration > latencyBounds[i] {
		i++
	}
	rc.latency[i].add(sec)
	if r.KeyID != "" {
		if s := w.keys.get(r.KeyID); s != nil {
			s.add(sec)
		}
	}
}

// Call is one call to the legacy host.
type Call struct {
	Route string
	// Status is the legacy host's HTTP status; 0 when no answer came.
	Status int
	// Err describes a failure for operators, e.g. "timeout" or
	// "connection refused". It is shown on the page: it must not hold a
	// credential (the URL's query, a header).
	Err string
}

// ObserveUpstream counts one call to the legacy host. A call without an
// answer, or with a 5xx, is an error and becomes the last error.
func (w *Window) ObserveUpstream(c Call) {
	now := w.now()
	sec := uint32(now.Unix())
	rc := &w.routes[w.route(c.Route)]
	rc.upstream.add(sec)
	if c.Status != 0 && c.Status < 500 && c.Err == "" {
		return
	}
	rc.upErrors.add(sec)
	w.lastErr.mu.Lock()
	w.lastErr.text, w.lastErr.status, w.lastErr.at = c.Err, c.Status, now
	w.lastErr.mu.Unlock()
}

// ObserveRefused counts one 429 of plan ("anonymous" for the per-IP
// bucket).
func (w *Window) ObserveRefused(plan string) {
	if s := w.plans.get(plan); s != nil {
		s.add(uint32(w.now().Unix()))
	}
}

func (w *Window) route(name string) int {
	for i, n := range w.names {
		if n == name {
			return i
		}
	}
	return len(w.names)
}

// cacheKind is the index of a result among countedResults, whichever
// tier gave it, or cacheKinds for one not counted apart.
func cacheKind(result cache.Status) int {
	for k, st := range countedResults {
		if st == result.Kind() {
			return k
		}
	}
	return cacheKinds
}

// Fill writes the Window's figures into s: Routes (breakers left as they
// are, or closed for a route s did not list), Totals' rates, the cache's hit
// ratios and stale counts, the upstream's rate, legacy calls per request and last error,
// and the limits' refusals and busiest keys. The other fields are the
// edge's to fill.
func (w *Window) Fill(s *Snapshot) {
	now := w.now()
	cur := uint32(now.Unix())
	// The minute is the 60 full seconds before the current one, or the full
	// seconds since the Window started, if fewer.
	last := cur - 1
	span := min(windowSeconds, max(1, int64(cur)-int64(w.start)))
	first := cur - uint32(span)
	perSec := func(n uint64) float64 { return float64(n) / float64(span) }

	var tot routeSums
	routes := make([]Route, len(w.names))
	for i, name := range w.names {
		r := w.routes[i].sums(first, last)
		tot.add(r)
		routes[i] = Route{
			Name: name, Breaker: BreakerClosed,
			RequestsPerSec: perSec(r.requests),
			ErrorRatio:     ratio(float64(r.errors5xx), float64(r.requests)),
			P50Seconds:     quantile(0.5, r.latency[:]),
			P99Seconds:     quantile(0.99, r.latency[:]),
		}
		if old := s.Route(name); old != nil && old.Breaker != "" {
			routes[i].Breaker = old.Breaker
		}
	}
	tot.add(w.routes[len(w.names)].sums(first, last))
	s.Routes = routes

	lookups := tot.cache[cacheHit] + tot.cache[cacheMiss] + tot.cache[cacheStale]
	s.Totals.RequestsPerSec = perSec(tot.requests)
	s.Totals.ErrorsPerSec = perSec(tot.errors5xx)
	s.Totals.CacheLookupsPerSec = perSec(lookups)
	s.Totals.CacheHitsPerSec = perSec(tot.cache[cacheHit])
	s.Totals.UpstreamCallsPerSec = perSec(tot.upstream)

	var hits, allLookups int64
	for i := range w.routes {
		t := &w.routes[i].cacheTotal
		hits += t[cacheHit].Load()
		allLookups += t[cacheHit].Load() + t[cacheMiss].Load() + t[cacheStale].Load()
		s.Cache.StaleTotal += t[cacheStale].Load()
	}
	s.Cache.HitRatio = s.Totals.HitRatio()
	s.Cache.HitRatioTotal = ratio(float64(hits), float64(allLookups))
	s.Cache.StalePerSec = perSec(tot.cache[cacheStale])

	s.Upstream.CallsPerSec = s.Totals.UpstreamCallsPerSec
	s.Upstream.LegacyCallsPerRequest = s.Totals.LegacyCallsPerRequest()
	s.Upstream.ErrorRatio = ratio(float64(tot.upErrors), float64(tot.upstream))
	w.lastErr.mu.Lock()
	if !w.lastErr.at.IsZero() {
		s.Upstream.LastError, s.Upstream.LastErrorAt = w.lastErr.text, w.lastErr.at
		if s.Upstream.LastError == "" {
			s.Upstream.LastError = "HTTP " + strconv.Itoa(w.lastErr.status)
		}
	}
	w.lastErr.mu.Unlock()
	w.fillLimits(s, first, last, perSec)
}

// fillLimits writes the refusals per plan and the busiest keys of the
// seconds first to last into s.
func (w *Window) fillLimits(s *Snapshot, first, last uint32, perSec func(uint64) float64) {
	s.Limits.Refused = nil
	var refused uint64
	w.plans.each(func(plan string, ser *series) {
		n := ser.ring.sum(first, last)
		refused += n
		s.Limits.Refused = append(s.Limits.Refused, PlanRefusals{
			Plan: plan, PerSec: perSec(n), LastMinute: int64(n), Total: ser.total.Load(),
		})
	})
	slices.SortFunc(s.Limits.Refused, func(a, b PlanRefusals) int { return cmp.Compare(a.Plan, b.Plan) })
	s.Totals.RefusedPerSec = perSec(refused)

	s.Limits.TopKeys = nil
	w.keys.each(func(id string, ser *series) {
		if n := ser.ring.sum(first, last); n > 0 {
			s.Limits.TopKeys = append(s.Limits.TopKeys, KeyLoad{KeyID: id, LastMinute: int64(n)})
		}
	})
	slices.SortFunc(s.Limits.TopKeys, func(a, b KeyLoad) int {
		return cmp.Or(cmp.Compare(b.LastMinute, a.LastMinute), cmp.Compare(a.KeyID, b.KeyID))
	})
	s.Limits.TopKeys = s.Limits.TopKeys[:min(len(s.Limits.TopKeys), topKeys)]
}

// routeSums are a route's counts over a span of seconds.
type routeSums struct {
	requests, errors5xx, upstream, upErrors uint64
	cache                                   [cacheKinds]uint64
	latency                                 [len(latencyBounds) + 1]uint64
}

func (rc *routeCounts) sums(first, last uint32) routeSums {
	r := routeSums{
		requests:  rc.requests.sum(first, last),
		errors5xx: rc.errors5xx.sum(first, last),
		upstream:  rc.upstream.sum(first, last),
		upErrors:  rc.upErrors.sum(first, last),
	}
	for k := range rc.cache {
		r.cache[k] = rc.cache[k].sum(first, last)
	}
	for b := range rc.latency {
		r.latency[b] = rc.latency[b].sum(first, last)
	}
	return r
}

func (r *routeSums) add(o routeSums) {
	r.requests += o.requests
	r.errors5xx += o.errors5xx
	r.upstream += o.upstream
	r.upErrors += o.upErrors
	for k := range r.cache {
		r.cache[k] += o.cache[k]
	}
	for b := range r.latency {
		r.latency[b] += o.latency[b]
	}
}

// quantile estimates the q-quantile, in seconds, from histogram counts the
// way Prometheus's histogram_quantile does: linearly within the bucket that
// holds it. In the last, unbounded bucket it answers the highest bound.
func quantile(q float64, counts []uint64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var cum uint64
	for i, c := range counts {
		if c > 0 && float64(cum+c) >= rank {
			if i == len(latencyBounds) {
				return latencyBounds[i-1].Seconds()
			}
			lower := 0.0
			if i > 0 {
				lower = latencyBounds[i-1].Seconds()
			}
			upper := latencyBounds[i].Seconds()
			return lower + (upper-lower)*(rank-float64(cum))/float64(c)
		}
		cum += c
	}
	return latencyBounds[len(latencyBounds)-1].Seconds()
}
