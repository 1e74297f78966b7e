package status_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/proxy/status"
)

func ExampleSampler() {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	// The edge's metrics, which count every answer once.
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_requests_total"}, []string{"route", "code", "cache"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tradergate_request_duration_seconds",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05}}, []string{"route", "cache"})
	upstream := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tradergate_upstream_requests_total"}, []string{"route", "code"})
	s := status.NewSampler(status.Counters{Requests: requests, Durations: duration, Upstream: upstream}, status.SamplerOptions{
		Routes: []string{"tx"},
		Cache:  status.CacheLabels{Hit: "HIT", Miss: "MISS", Stale: "STALE"},
		Now:    func() time.Time { return now },
	})
	requests.WithLabelValues("tx", "200", "HIT").Inc()
	duration.WithLabelValues("tx", "HIT").Observe(0.002)
	requests.WithLabelValues("tx", "200", "MISS").Inc()
	duration.WithLabelValues("tx", "MISS").Observe(0.040)
	upstream.WithLabelValues("tx", "200").Inc()

	// The page, two seconds later:
	now = now.Add(2 * time.Second)
	var snap status.Snapshot
	s.Fill(&snap)
	tx := snap.Route("tx")
	fmt.Printf("tx: %.0f/s, p50 %.4fs, hit ratio %.2f, legacy calls per request %.2f\n",
		tx.RequestsPerSec, tx.P50Seconds, snap.Cache.HitRatio, snap.Upstream.LegacyCallsPerRequest)
	// Output: tx: 1/s, p50 0.0025s, hit ratio 0.50, legacy calls per request 0.50
}

func ExampleHandler() {
	src := func() status.Snapshot {
		s := status.Snapshot{Replica: "edge-1", Taken: time.Now(), Ready: true, Config: status.Config{ReloadOK: true},
			Routes: []status.Route{{Name: "activity", Breaker: "open"}}} // as the upstream package reports it
		return s
	}
	h := status.Handler(src, status.Options{Secrets: func() []string { return []string{"the-upstream-token"} }})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status.json", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 application/json
}
