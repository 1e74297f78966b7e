package proxy

import (
	"regexp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sony/gobreaker/v2"

	"tradergate/cache"
	"tradergate/limits"
	"tradergate/proxy/route"
)

// Prometheus metrics, on a registry passed in, never a global one. Labels
// are bounded: route names, status codes, cache results,
// plan names; never a key, an address or a cursor.

// cacheNone is the cache result of an answer made before the cache step
// (errors), in metrics and access log lines alike.
const cacheNone = "NONE"

// routeUnknown labels requests that matched no route (404s, and requests
// refused before routing).
const routeUnknown = "none"

type metrics struct {
	requests       *prometheus.CounterVec   // route, code, cache
	duration       *prometheus.HistogramVec // route, cache
	upstream       *prometheus.CounterVec   // route, code
	upstreamDur    *prometheus.HistogramVec // route
	refused        *prometheus.CounterVec   // plan
	breakerState   *prometheus.GaugeVec     // route
	breakerChanges *prometheus.CounterVec   // route, to

	// hot holds the series of the common answer, a 200, by route index and
	// cache result, resolved once: WithLabelValues hashes its labels on
	// every call, and this is every request's path.
	hot [][len(cacheResults)]hotSeries
}

// cacheResults are the cache's results, in the order of hot's columns;
// their names (cache.Status.String) are the cache label's values.
var cacheResults = [...]cache.Status{cache.Hit, cache.Miss, cache.Stale, cache.Bypass}

type hotSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// latencyBuckets span a cache hit to an upstream timeout.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_requests_total",
			Help: "Client requests answered, by route, HTTP status and cache result.",
		}, []string{"route", "code", "cache"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tradergate_request_duration_seconds",
			Help:    "Time to answer a client request, by route and cache result.",
			Buckets: latencyBuckets,
		}, []string{"route", "cache"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_upstream_requests_total",
			Help: `Calls to the legacy host, by route and its HTTP status ("error" when none came).`,
		}, []string{"route", "code"}),
		upstreamDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tradergate_upstream_duration_seconds",
			Help:    "Duration of calls to the legacy host, by route.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_ratelimit_refused_total",
			Help: `Requests refused with 429, by plan ("anonymous" for the per-address bucket).`,
		}, []string{"plan"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tradergate_breaker_state",
			Help: "Circuit breaker state by route: 0 closed, 1 half-open, 2 open.",
		}, []string{"route"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_breaker_transitions_total",
			Help: "Circuit breaker state changes, by route and the state entered.",
		}, []string{"route", "to"}),
	}
	cs := []prometheus.Collector{
		m.requests, m.duration, m.upstream, m.upstreamDur, m.refused, m.breakerState, m.breakerChanges,
		&cacheCollector{s: s},
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_ratelimit_store_errors_total",
			Help: "Rate limit checks the store (Redis) did not answer; limits.on_store_error decided them.",
		}, func() float64 { return float64(s.limiter.StoreErrors()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_upstream_retries_total",
			Help: "Retries of failed legacy calls.",
		}, func() float64 { r, _ := s.upstream.RetryStats(); return float64(r) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_upstream_retry_budget_refused_total",
			Help: "Retries the retry budget refused.",
		}, func() float64 { _, r := s.upstream.RetryStats(); return float64(r) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_upstream_in_flight",
			Help: "Legacy calls holding a slot of the upstream shield.",
		}, func() float64 { return float64(s.upstream.InFlight()) }),
		// The GC's CPU time (/cpu/classes/gc/...) beside the default set:
		// go_gc_duration_seconds counts only the stop-the-world pauses, and
		// a memory limit is judged by what the whole collector costs. The
		// scheduler's latencies (go_sched_latencies_seconds: how long a
		// runnable goroutine waited to run) and pauses are what a slow
		// answer's tail waited on when it was not the GC
		// (docs/BENCHMARKS.md, "Tail latency at a fixed rate").
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.MetricsGC, collectors.MetricsScheduler, collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/(gc|total)/`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	routes := s.routes.Routes()
	m.hot = make([][len(cacheResults)]hotSeries, len(routes))
	for _, r := range routes {
		for j, st := range cacheResults {
			c := st.String()
			m.hot[r.Index()][j] = hotSeries{m.requests.WithLabelValues(r.Name, "200", c), m.duration.WithLabelValues(r.Name, c)}
		}
	}
	// Every route's and plan's series exist from the start, so rate() and
	// alerts see a zero rather than nothing.
	for plan := range s.cfg.Plans {
		m.refused.WithLabelValues(plan)
	}
	m.refused.WithLabelValues(limits.AnonymousPolicy)
	for _, r := range routes {
		m.breakerState.WithLabelValues(r.Name).Set(0)
		for _, st := range []gobreaker.State{gobreaker.StateClosed, gobreaker.StateHalfOpen, gobreaker.StateOpen} {
			m.breakerChanges.WithLabelValues(r.Name, st.String())
		}
	}
	return m, nil
}

// observe records one answered request; rt is nil when no route matched,
// result 0 when the cache step did not run.
func (m *metrics) observe(rt *route.Route, status int, result cache.Status, took time.Duration) {
	if rt != nil && status == 200 {
		if j := hotColumns[result.Kind()]; j >= 0 {
			h := &m.hot[rt.Index()][j]
			h.requests.Inc()
			h.duration.Observe(took.Seconds())
			return
		}
	}
	route := routeUnknown
	if rt != nil {
		route = rt.Name
	}
	label := cacheLabel(result)
	m.requests.WithLabelValues(route, strconv.Itoa(status), label).Inc()
	m.duration.WithLabelValues(route, label).Observe(took.Seconds())
}

// hotColumns are the columns of hot by a result's Kind; -1: none.
var hotColumns = func() (c [cache.Bypass + 1]int) {
	for k := range c {
		c[k] = -1
	}
	for j, st := range cacheResults {
		c[st] = j
	}
	return c
}()

// cacheLabel is the cache label of a result: its name, or cacheNone when
// the cache step did not run.
func cacheLabel(result cache.Status) string {
	if result == 0 {
		return cacheNone
	}
	return result.String()
}

// observeUpstream records one legacy call; status 0 means no answer.
func (m *metrics) observeUpstream(route string, status int, took time.Duration) {
	code := "error"
	if status != 0 {
		code = strconv.Itoa(status)
	}
	m.upstream.WithLabelValues(route, code).Inc()
	m.upstreamDur.WithLabelValues(route).Observe(took.Seconds())
}

// breakerChanged sets the state gauge; gobreaker calls it under its lock,
// and that is all it does.
func (m *metrics) breakerChanged(route string, to gobreaker.State) {
	v := 0.0
	switch to {
	case gobreaker.StateHalfOpen:
		v = 1
	case gobreaker.StateOpen:
		v = 2
	}
	m.breakerState.WithLabelValues(route).Set(v)
	m.breakerChanges.WithLabelValues(route, to.String()).Inc()
}

// cacheCollector reads the cache's counters once per scrape (Stats walks
// the store, so not per request).
type cacheCollector struct{ s *Server }

var (
	descCacheRequests = prometheus.NewDesc("tradergate_cache_requests_total",
		"Cache lookups by result (HIT, MISS, STALE, BYPASS).", []string{"result"}, nil)
	descCacheCoalesced = prometheus.NewDesc("tradergate_cache_coalesced_total",
		"Requests answered by another request's upstream call.", nil, nil)
	descCacheFetches = prometheus.NewDesc("tradergate_cache_fetches_total",
		"Upstream fetches made by the cache (misses and refreshes).", nil, nil)
	descCacheEvictions = prometheus.NewDesc("tradergate_cache_evictions_total",
		"Entries evicted to make room.", nil, nil)
	descCacheRejected = prometheus.NewDesc("tradergate_cache_rejected_total",
		"Entries the store refused (admission policy, too large).", nil, nil)
	descCacheEntries = prometheus.NewDesc("tradergate_cache_entries",
		"Entries held.", nil, nil)
	descCacheBytes = prometheus.NewDesc("tradergate_cache_bytes",
		"Bytes held, against cache.max_bytes.", nil, nil)
	descCacheFiles = prometheus.NewDesc("tradergate_cache_files",
		"Page files open: large pages kept in unnamed files in cache.sendfile_dir, sent with sendfile (cache.sendfile_min_bytes).", nil, nil)
	descCacheFileBytes = prometheus.NewDesc("tradergate_cache_file_bytes",
		"Bytes held in page files, a part of tradergate_cache_bytes.", nil, nil)
	descCacheRunners = prometheus.NewDesc("tradergate_cache_flight_runners",
		"Goroutines kept to run cache misses' flights, busy or idle (each ends after 10s without one).", nil, nil)
	descL2Requests = prometheus.NewDesc("tradergate_l2_requests_total",
		"Lookups of the shared page cache (Redis) by result: hit, stale, miss, error (Redis failed: the replica worked alone), corrupt (a value that did not decode).", []string{"result"}, nil)
	descL2Stores = prometheus.NewDesc("tradergate_l2_stores_total",
		"Pages written to the shared page cache.", nil, nil)
	descL2Waits = prometheus.NewDesc("tradergate_l2_lock_waits_total",
		"Fetches that waited for another replica's fetch of the same page.", nil, nil)
	descL2WaitTimeouts = prometheus.NewDesc("tradergate_l2_lock_wait_timeouts_total",
		"Waits for another replica's fetch that ran out; the replica fetched itself.", nil, nil)
)

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCacheRequests, descCacheCoalesced, descCacheFetches,
		descCacheEvictions, descCacheRejected, descCacheEntries, descCacheBytes, descCacheFiles, descCacheFileBytes, descCacheRunners} {
		ch <- d
	}
	if c.s.fleet != nil {
		for _, d := range []*prometheus.Desc{descL2Requests, descL2Stores, descL2Waits, descL2WaitTimeouts} {
			ch <- d
		}
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.cache.Stats()
	for _, r := range [len(cacheResults)]struct {
		st cache.Status
		n  uint64
	}{{cache.Hit, st.Hits}, {cache.Miss, st.Misses}, {cache.Stale, st.Stale}, {cache.Bypass, st.Bypass}} {
		ch <- prometheus.MustNewConstMetric(descCacheRequests, prometheus.CounterValue, float64(r.n), r.st.String())
	}
	ch <- prometheus.MustNewConstMetric(descCacheCoalesced, prometheus.CounterValue, float64(st.Coalesced))
	ch <- prometheus.MustNewConstMetric(descCacheFetches, prometheus.CounterValue, float64(st.Fetches))
	ch <- prometheus.MustNewConstMetric(descCacheEvictions, prometheus.CounterValue, float64(st.Evictions))
	ch <- prometheus.MustNewConstMetric(descCacheRejected, prometheus.CounterValue, float64(st.Rejected))
	ch <- prometheus.MustNewConstMetric(descCacheEntries, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(descCacheBytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descCacheFiles, prometheus.GaugeValue, float64(st.Files))
	ch <- prometheus.MustNewConstMetric(descCacheFileBytes, prometheus.GaugeValue, float64(st.FileBytes))
	ch <- prometheus.MustNewConstMetric(descCacheRunners, prometheus.GaugeValue, float64(st.Runners))
	if c.s.fleet == nil {
		return // the shared tier's series exist only where there is one
	}
	for _, r := range []struct {
		name string
		n    uint64
	}{{"hit", st.L2Hits}, {"stale", st.L2Stale}, {"miss", st.L2Misses}, {"error", st.L2Errors}, {"corrupt", st.L2Corrupt}} {
		ch <- prometheus.MustNewConstMetric(descL2Requests, prometheus.CounterValue, float64(r.n), r.name)
	}
	ch <- prometheus.MustNewConstMetric(descL2Stores, prometheus.CounterValue, float64(st.L2Stores))
	ch <- prometheus.MustNewConstMetric(descL2Waits, prometheus.CounterValue, float64(st.L2LockWaits))
	ch <- prometheus.MustNewConstMetric(descL2WaitTimeouts, prometheus.CounterValue, float64(st.L2LockWaitTimeouts))
}
