package stream

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the streams' series (docs/OPERATING.md lists them).
type metrics struct {
	m         *Manager
	openedC   *prometheus.CounterVec
	endedC    *prometheus.CounterVec
	events    *prometheus.CounterVec
	polls     *prometheus.CounterVec
	reads     *prometheus.CounterVec
	legacy    *prometheus.CounterVec
	failed    *prometheus.CounterVec
	gaps      *prometheus.CounterVec
	takeovers *prometheus.CounterVec
	// perEvent holds each route's delivered events and their lag, looked
	// up once: they count each event and subscriber, thousands a read on
	// a busy stream.
	perEvent map[string]eventSeries

	openD, hubsD, mostD, leadD, lagD *prometheus.Desc
}

// eventSeries are one route's series written for each delivered event.
type eventSeries struct {
	events prometheus.Counter
	lag    *lagHistogram
}

// lagBuckets are tradergate_stream_delivery_lag_seconds' buckets.
var lagBuckets = [...]float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 300}

// lagHistogram is one route's tradergate_stream_delivery_lag_seconds,
// collected as a const histogram. Unlike a prometheus.Histogram it takes
// many observations at once (add): a hand-off counts its thousands of
// subscribers' lags in a tally of its own and adds them with a few atomic
// operations, rather than two goroutines of a hand-off contending on the
// series' counters once per event and subscriber.
type lagHistogram struct {
	counts [len(lagBuckets) + 1]atomic.Uint64 // per bucket, +Inf last; not cumulative
	sum    atomic.Uint64                      // float64 seconds, as bits
}

func (h *lagHistogram) add(t *tally) {
	for i, c := range t.counts {
		if c > 0 {
			h.counts[i].Add(c)
		}
	}
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+t.sum)) {
			return
		}
	}
}

func (h *lagHistogram) metric(d *prometheus.Desc, route string) prometheus.Metric {
	var n uint64
	buckets := make(map[float64]uint64, len(lagBuckets))
	for i, le := range lagBuckets {
		n += h.counts[i].Load()
		buckets[le] = n
	}
	n += h.counts[len(lagBuckets)].Load()
	return prometheus.MustNewConstHistogram(d, n, math.Float64frombits(h.sum.Load()), buckets, route)
}

// tally counts delivered events and their lags for one route, to add to
// its series at once (metrics.add).
type tally struct {
	events uint64
	counts [len(lagBuckets) + 1]uint64
	sum    float64
}

// observe counts one event delivered lag after its time.
func (t *tally) observe(lag time.Duration) {
	v := max(lag, 0).Seconds()
	i := 0
	for i < len(lagBuckets) && v > lagBuckets[i] {
		i++
	}
	t.counts[i]++
	t.sum += v
	t.events++
}

func newMetrics(reg prometheus.Registerer, m *Manager) (*metrics, error) {
	byRoute := []string{"route"}
	x := &metrics{
		m: m,
		openedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_opened_total",
			Help: "Streams opened, by route.",
		}, byRoute),
		endedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_ended_total",
			Help: "Streams ended, by route and reason (client_closed, slow_consumer, too_far_behind, shutting_down, key_revoked, upstream_refused).",
		}, []string{"route", "reason"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_events_total",
			Help: "Events handed to subscribers' connections, by route (one per subscriber).",
		}, byRoute),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_polls_total",
			Help: "Polls of the streams' pollers on this replica, by route.",
		}, byRoute),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_page_reads_total",
			Help: "Pages the streams read through the page cache (polls, heads, catch-ups, repairs), by route.",
		}, byRoute),
		legacy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_legacy_calls_total",
			Help: "Of the streams' page reads, those that started a call to the legacy host, by route.",
		}, byRoute),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_read_errors_total",
			Help: "Polls and head reads that failed (retried at the next poll), by route.",
		}, byRoute),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_relay_gaps_total",
			Help: "Messages from the stream's poller on another replica that did not follow the last one received (a message Redis dropped), each mended from pages, by route.",
		}, byRoute),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_stream_leases_taken_total",
			Help: "Times this replica took a stream's poller lease, by route.",
		}, byRoute),
		lagD: prometheus.NewDesc("tradergate_stream_delivery_lag_seconds",
			"From an event's own time (indexedTimestamp of an order book event, blockTimestamp of an activity or transfer item) to its write to a subscriber's connection, by route.",
			byRoute, nil),
		openD:    prometheus.NewDesc("tradergate_stream_open", "Streams open on this replica, by route.", byRoute, nil),
		hubsD:    prometheus.NewDesc("tradergate_stream_pollers", "Canonical streams with subscribers on this replica (each shares one poller, here or on the replica holding its lease), by route.", byRoute, nil),
		mostD:    prometheus.NewDesc("tradergate_stream_subscribers_max", "The most subscribers one canonical stream has on this replica, by route.", byRoute, nil),
		leadD:    prometheus.NewDesc("tradergate_stream_leading", "Canonical streams this replica polls (alone, or holding the fleet's lease), by route.", byRoute, nil),
		perEvent: make(map[string]eventSeries, len(Routes)),
	}
	for _, r := range Routes {
		for _, c := range []*prometheus.CounterVec{x.openedC, x.events, x.polls, x.reads, x.legacy, x.failed, x.gaps, x.takeovers} {
			c.WithLabelValues(r)
		}
		for _, reason := range Reasons {
			x.endedC.WithLabelValues(r, string(reason))
		}
		x.perEvent[r] = eventSeries{x.events.WithLabelValues(r), &lagHistogram{}}
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{x.openedC, x.endedC, x.events, x.polls, x.reads, x.legacy, x.failed, x.gaps, x.takeovers, x} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return x, nil
}

// Describe and Collect make metrics the collector of the gauges read
// from the manager at scrape time.
func (x *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- x.openD
	ch <- x.hubsD
	ch <- x.mostD
	ch <- x.leadD
	ch <- x.lagD
}

func (x *metrics) Collect(ch chan<- prometheus.Metric) {
	open, hubs, most, lead := x.m.counts()
	for _, r := range Routes {
		ch <- prometheus.MustNewConstMetric(x.openD, prometheus.GaugeValue, float64(open[r]), r)
		ch <- prometheus.MustNewConstMetric(x.hubsD, prometheus.GaugeValue, float64(hubs[r]), r)
		ch <- prometheus.MustNewConstMetric(x.mostD, prometheus.GaugeValue, float64(most[r]), r)
		ch <- prometheus.MustNewConstMetric(x.leadD, prometheus.GaugeValue, float64(lead[r]), r)
		ch <- x.perEvent[r].lag.metric(x.lagD, r)
	}
}

func (x *metrics) opened(route string) { x.openedC.WithLabelValues(route).Inc() }

func (x *metrics) ended(route string, r Reason) { x.endedC.WithLabelValues(route, string(r)).Inc() }

// delivered counts one event handed to a subscriber lag after its time.
func (x *metrics) delivered(route string, lag time.Duration) {
	var t tally
	t.observe(lag)
	x.add(route, &t)
}

// add counts a tally's events. The lag has series for Routes only, as
// the gauges Collect reads.
func (x *metrics) add(route string, t *tally) {
	if t.events == 0 {
		return
	}
	es, ok := x.perEvent[route]
	if !ok {
		x.events.WithLabelValues(route).Add(float64(t.events))
		return
	}
	es.events.Add(float64(t.events))
	es.lag.add(t)
}

func (x *metrics) polled(route string) { x.polls.WithLabelValues(route).Inc() }

func (x *metrics) read(route string, fetched bool) {
	x.reads.WithLabelValues(route).Inc()
	if fetched {
		x.legacy.WithLabelValues(route).Inc()
	}
}

func (x *metrics) readFailed(route string) { x.failed.WithLabelValues(route).Inc() }

func (x *metrics) gap(route string) { x.gaps.WithLabelValues(route).Inc() }

func (x *metrics) tookLease(route string) { x.takeovers.WithLabelValues(route).Inc() }
