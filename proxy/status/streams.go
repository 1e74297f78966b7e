package status

import (
	"math"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// The streams panel: the server-sent event streams (proxy/stream) as
// their own metrics count them. The sampler reads the tradergate_stream_*
// families from the registry they are in (Counters.Streams): the stream
// package keeps its collectors to itself, and the registry is where the
// metrics endpoint reads them too.

// streamPrefix names the stream package's families.
const streamPrefix = "tradergate_stream_"

// Streams are the streams open on this replica, per streamed route.
type Streams struct {
	Routes []StreamRoute `json:"routes"`
}

// StreamRoute is one streamed route (orderbook_events, activity,
// deposits_withdrawals): its streams now, and the last minute's
// deliveries and legacy calls.
type StreamRoute struct {
	Name string `json:"name"`
	// Open is the streams open (tradergate_stream_open); Shared the
	// canonical streams they share, one poller each, here or on the
	// replica holding its lease (tradergate_stream_pollers); MostPerStream
	// the most subscribers one of them has; Polling those this replica
	// polls for (tradergate_stream_leading).
	Open          int64 `json:"open"`
	Shared        int64 `json:"shared"`
	MostPerStream int64 `json:"most_per_stream"`
	Polling       int64 `json:"polling"`
	// EventsPerSec and EventsTotal count events written to subscribers,
	// one per subscriber (tradergate_stream_events_total).
	EventsPerSec float64 `json:"events_per_second"`
	EventsTotal  int64   `json:"events_total"`
	// PollsPerSec counts this replica's polls; LegacyCallsPerSec those of
	// the streams' page reads that called the legacy host (a page another
	// request had cached costs none).
	PollsPerSec       float64 `json:"polls_per_second"`
	LegacyCallsPerSec float64 `json:"legacy_calls_per_second"`
	LegacyCallsTotal  int64   `json:"legacy_calls_total"`
	// LagP50Seconds and LagP99Seconds are the last minute's delivery lag,
	// from an event's own time to its write
	// (tradergate_stream_delivery_lag_seconds).
	LagP50Seconds float64 `json:"lag_p50_seconds"`
	LagP99Seconds float64 `json:"lag_p99_seconds"`
	// LaggingEndedTotal counts streams ended because their client fell
	// behind (reasons slow_consumer and too_far_behind), since start.
	LaggingEndedTotal int64 `json:"lagging_ended_total"`
}

// streamTally is one streamed route's counters and gauges in a reading.
type streamTally struct {
	events, polls, legacy, lagging float64
	open, shared, most, polling    float64
	lag                            []float64 // per bucket of lagBounds, as tally.latency
}

// laggingReasons are the tradergate_stream_ended_total reasons of a
// client that fell behind.
var laggingReasons = []string{"slow_consumer", "too_far_behind"}

// readStreams reads the stream families of g into r; nil g: none.
func (r *reading) readStreams(g prometheus.Gatherer) {
	if g == nil {
		return
	}
	fams, err := g.Gather()
	if err != nil && len(fams) == 0 {
		return
	}
	for _, f := range fams {
		name, ok := strings.CutPrefix(f.GetName(), streamPrefix)
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			route := label(m, "route")
			if route == "" {
				continue
			}
			if r.streams == nil {
				r.streams = map[string]*streamTally{}
			}
			t := r.streams[route]
			if t == nil {
				t = &streamTally{}
				r.streams[route] = t
			}
			switch name {
			case "events_total":
				t.events += m.GetCounter().GetValue()
			case "polls_total":
				t.polls += m.GetCounter().GetValue()
			case "legacy_calls_total":
				t.legacy += m.GetCounter().GetValue()
			case "ended_total":
				if slices.Contains(laggingReasons, label(m, "reason")) {
					t.lagging += m.GetCounter().GetValue()
				}
			case "open":
				t.open += m.GetGauge().GetValue()
			case "pollers":
				t.shared += m.GetGauge().GetValue()
			case "subscribers_max":
				t.most = max(t.most, m.GetGauge().GetValue())
			case "leading":
				t.polling += m.GetGauge().GetValue()
			case "delivery_lag_seconds":
				if h := m.GetHistogram(); h != nil {
					lt := tally{latency: t.lag}
					lt.addHistogram(&r.lagBounds, h)
					t.lag = lt.latency
				}
			}
		}
	}
}

// fillStreams writes the streams panel from the reading cur and its base,
// span seconds apart; nil when the edge has no stream series.
func fillStreams(cur, base reading, span float64) *Streams {
	if len(cur.streams) == 0 {
		return nil
	}
	names := make([]string, 0, len(cur.streams))
	for n := range cur.streams {
		names = append(names, n)
	}
	// The stream package's order: the order book first, then a trader's
	// activity and transfers, as the route table lists them.
	order := []string{"orderbook_events", "activity", "deposits_withdrawals"}
	slices.SortFunc(names, func(a, b string) int {
		ia, ib := slices.Index(order, a), slices.Index(order, b)
		if ia < 0 {
			ia = len(order)
		}
		if ib < 0 {
			ib = len(order)
		}
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a, b)
	})
	v := &Streams{}
	for _, n := range names {
		c, b := cur.streams[n], base.streams[n]
		if b == nil {
			b = &streamTally{}
		}
		lag := slices.Clone(c.lag)
		for i := range min(len(lag), len(b.lag)) {
			lag[i] -= b.lag[i]
		}
		v.Routes = append(v.Routes, StreamRoute{
			Name: n, Open: int64(c.open), Shared: int64(c.shared), MostPerStream: int64(c.most), Polling: int64(c.polling),
			EventsPerSec: (c.events - b.events) / span, EventsTotal: int64(math.Round(c.events)),
			PollsPerSec: (c.polls - b.polls) / span, LegacyCallsPerSec: (c.legacy - b.legacy) / span,
			LegacyCallsTotal: int64(math.Round(c.legacy)),
			LagP50Seconds:    quantile(0.5, cur.lagBounds, lag), LagP99Seconds: quantile(0.99, cur.lagBounds, lag),
			LaggingEndedTotal: int64(math.Round(c.lagging)),
		})
	}
	return v
}
