package status_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"tradergate/cache"
	"tradergate/proxy/status"
)

func ExampleWindow() {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	w := status.NewWindow(status.WindowOptions{Now: func() time.Time { return now }})
	// The edge, once per answered request and once per upstream call:
	w.ObserveRequest(status.Request{Route: "tx", Status: 200, Duration: 2 * time.Millisecond, Cache: cache.Hit, KeyID: "acme"})
	w.ObserveRequest(status.Request{Route: "tx", Status: 200, Duration: 40 * time.Millisecond, Cache: cache.Miss, KeyID: "acme"})
	w.ObserveUpstream(status.Call{Route: "tx", Status: 200})

	// The page, a second later:
	now = now.Add(time.Second)
	var s status.Snapshot
	w.Fill(&s)
	tx := s.Route("tx")
	fmt.Printf("tx: %.0f/s, p50 %.4fs, hit ratio %.2f, legacy calls per request %.2f, busiest %s\n",
		tx.RequestsPerSec, tx.P50Seconds, s.Cache.HitRatio, s.Upstream.LegacyCallsPerRequest, s.Limits.TopKeys[0].KeyID)
	// Output: tx: 2/s, p50 0.0025s, hit ratio 0.50, legacy calls per request 0.50, busiest acme
}

func ExampleHandler() {
	w := status.NewWindow(status.WindowOptions{})
	src := func() status.Snapshot {
		s := status.Snapshot{Replica: "edge-1", Taken: time.Now(), Ready: true, Config: status.Config{ReloadOK: true}}
		w.Fill(&s)
		s.Route("activity").Breaker = "open" // as the upstream package reports it
		return s
	}
	h := status.Handler(src, status.Options{Secrets: func() []string { return []string{"the-upstream-token"} }})

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status.json", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 application/json
}
