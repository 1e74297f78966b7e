package status

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkSamplerFill is what a page costs in reading the counters, on a
// busy edge's series: every route with four cache results and three
// codes, and a thousand keys. Run takes the same reading every Every.
func BenchmarkSamplerFill(b *testing.B) {
	c := newEdgeCounters()
	for _, r := range routeNames {
		for _, cache := range []string{"HIT", "MISS", "STALE", "BYPASS"} {
			for _, code := range []string{"200", "400", "503"} {
				c.answer(r, code, cache, time.Millisecond, "")
			}
		}
		c.upstream.WithLabelValues(r, "200").Inc()
	}
	for i := range 1000 {
		c.keys.WithLabelValues("key-"+strconv.Itoa(i), "v1").Inc()
	}
	s, clock := newTestSampler(c)
	advance(s, clock, time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		var snap Snapshot
		s.Fill(&snap)
	}
}
