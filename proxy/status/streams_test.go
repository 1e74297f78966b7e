package status

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/internal/testkit"
)

// streamSeries are collectors with the names and labels of
// proxy/stream's metrics, counted by hand.
type streamSeries struct {
	reg                   *prometheus.Registry
	events, polls, legacy *prometheus.CounterVec
	ended                 *prometheus.CounterVec
	open, pollers, most   *prometheus.GaugeVec
	leading               *prometheus.GaugeVec
	lag                   *prometheus.HistogramVec
}

func newStreamSeries(t *testing.T) *streamSeries {
	byRoute := []string{"route"}
	s := &streamSeries{
		reg:     prometheus.NewRegistry(),
		events:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_stream_events_total"}, byRoute),
		polls:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_stream_polls_total"}, byRoute),
		legacy:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_stream_legacy_calls_total"}, byRoute),
		ended:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_stream_ended_total"}, []string{"route", "reason"}),
		open:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tradergate_stream_open"}, byRoute),
		pollers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tradergate_stream_pollers"}, byRoute),
		most:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tradergate_stream_subscribers_max"}, byRoute),
		leading: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tradergate_stream_leading"}, byRoute),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tradergate_stream_delivery_lag_seconds",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 300}}, byRoute),
	}
	// A family of another package in the same registry is not read.
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_requests_total"}, byRoute)
	other.WithLabelValues("activity").Add(99)
	for _, c := range []prometheus.Collector{s.events, s.polls, s.legacy, s.ended, s.open, s.pollers, s.most, s.leading, s.lag, other} {
		s.reg.MustRegister(c)
	}
	// The stream package makes every route's series at start.
	for _, r := range []string{"deposits_withdrawals", "activity", "orderbook_events"} {
		s.events.WithLabelValues(r)
		s.ended.WithLabelValues(r, "client_closed")
		s.open.WithLabelValues(r)
	}
	return s
}

// The streams panel reads the stream package's series: gauges as they
// are, counters as the last minute's rates and totals since start, the
// lag's quantiles from its buckets, and lagging subscribers as the
// slow_consumer and too_far_behind ends only.
func TestSamplerStreams(t *testing.T) {
	ss := newStreamSeries(t)
	clock := testkit.NewClock(t0)
	s := NewSampler(Counters{Streams: ss.reg}, SamplerOptions{Routes: routeNames, Cache: testCacheLabels, Now: clock.Now})
	const book = "orderbook_events"
	ss.events.WithLabelValues(book).Add(1000) // before the window
	ss.ended.WithLabelValues(book, "slow_consumer").Inc()
	advance(s, clock, time.Minute)
	ss.events.WithLabelValues(book).Add(600)
	ss.polls.WithLabelValues(book).Add(60)
	ss.legacy.WithLabelValues(book).Add(30)
	ss.ended.WithLabelValues(book, "too_far_behind").Inc()
	ss.ended.WithLabelValues(book, "client_closed").Add(5)
	ss.open.WithLabelValues(book).Set(7)
	ss.pollers.WithLabelValues(book).Set(2)
	ss.most.WithLabelValues(book).Set(5)
	ss.leading.WithLabelValues(book).Set(1)
	for range 98 {
		ss.lag.WithLabelValues(book).Observe(0.3)
	}
	ss.lag.WithLabelValues(book).Observe(4)
	ss.lag.WithLabelValues(book).Observe(4)
	advance(s, clock, time.Minute)

	snap := fill(s)
	if snap.Streams == nil {
		t.Fatal("no streams panel")
	}
	var names []string
	for _, r := range snap.Streams.Routes {
		names = append(names, r.Name)
	}
	if want := []string{book, "activity", "deposits_withdrawals"}; len(names) != 3 || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Fatalf("routes %q, want %q", names, want)
	}
	r := snap.Streams.Routes[0]
	if r.Open != 7 || r.Shared != 2 || r.MostPerStream != 5 || r.Polling != 1 {
		t.Errorf("gauges %+v", r)
	}
	if !near(r.EventsPerSec, 10) || r.EventsTotal != 1600 {
		t.Errorf("events %v/s, %d total; want 10/s, 1600", r.EventsPerSec, r.EventsTotal)
	}
	if !near(r.PollsPerSec, 1) || !near(r.LegacyCallsPerSec, 0.5) || r.LegacyCallsTotal != 30 {
		t.Errorf("polls %v/s, legacy %v/s (%d total); want 1, 0.5, 30", r.PollsPerSec, r.LegacyCallsPerSec, r.LegacyCallsTotal)
	}
	if r.LaggingEndedTotal != 2 {
		t.Errorf("lagging ended %d, want 2 (client_closed is not lagging)", r.LaggingEndedTotal)
	}
	if r.LagP50Seconds <= 0.25 || r.LagP50Seconds > 0.5 || r.LagP99Seconds <= 3 || r.LagP99Seconds > 5 {
		t.Errorf("lag p50 %v, p99 %v; want within (0.25, 0.5] and (3, 5]", r.LagP50Seconds, r.LagP99Seconds)
	}
	if a := snap.Streams.Routes[1]; a.Open != 0 || a.EventsTotal != 0 || a.LagP99Seconds != 0 {
		t.Errorf("activity %+v, want nothing", a)
	}

	// Without the stream series, no panel.
	none := NewSampler(Counters{Streams: prometheus.NewRegistry()}, SamplerOptions{Routes: routeNames, Now: clock.Now})
	if snap := fill(none); snap.Streams != nil {
		t.Errorf("panel %+v without stream series", snap.Streams)
	}
	if snap := fill(newTestSamplerNoStreams(clock)); snap.Streams != nil {
		t.Errorf("panel %+v without a registry", snap.Streams)
	}
}

func newTestSamplerNoStreams(clock *testkit.Clock) *Sampler {
	return NewSampler(newEdgeCounters().counters(), SamplerOptions{Routes: routeNames, Cache: testCacheLabels, Now: clock.Now})
}
