package load

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunLoopback drives a loopback httptest server briefly in every mode
// and checks the counts add up; it exercises the whole client without
// /proc (CPUs not read).
func TestRunLoopback(t *testing.T) {
	var served, upstream atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if strings.Contains(r.URL.RawQuery, "bad") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Cache", "HIT")
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	})
	var seen sync.Map // bounded sequence targets
	mux.HandleFunc("/v1/once", func(w http.ResponseWriter, r *http.Request) {
		if _, dup := seen.LoadOrStore(r.URL.RawQuery, true); dup {
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.Header().Set("X-Cache", "HIT")
	})
	var scrapes atomic.Int64
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		n := scrapes.Add(1)
		fmt.Fprintf(w, "# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds{quantile=\"0.5\"} 1e-05\ngo_gc_duration_seconds_sum %d.5\ngo_gc_duration_seconds_count %d\n", n, 10*n)
	})
	mux.HandleFunc("/__stats", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"requests":` + strconv.FormatInt(upstream.Add(1), 10) + `}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	base := Spec{
		Addr: addr, Headers: []string{"Authorization: Bearer k"}, Connections: 4,
		Duration: 150 * time.Millisecond, ServerCPU: -1, LoadCPU: -1, StatsURL: srv.URL + "/__stats",
	}

	t.Run("list", func(t *testing.T) {
		s := base
		s.Mode, s.URLs, s.CheckCache, s.SampleEvery = ModeList, []string{"/v1/a", "/v1/b"}, "HIT", 1
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests == 0 || res.Errors != 0 || res.Status[200] != res.Requests || res.BodyBytes != 100*res.Requests {
			t.Fatalf("requests %d errors %d status %v body %d", res.Requests, res.Errors, res.Status, res.BodyBytes)
		}
		if res.CacheSampled != res.Requests || res.CacheUnexpected != 0 || !res.UpstreamMeasured || res.Upstream != 1 {
			t.Fatalf("cache %d/%d unexpected %d, upstream %d", res.CacheSampled, res.Requests, res.CacheUnexpected, res.Upstream)
		}
		if res.Latency.P50 <= 0 || res.Latency.P99 < res.Latency.P50 || res.RPS <= 0 {
			t.Fatalf("latency %+v rps %v", res.Latency, res.RPS)
		}
	})
	t.Run("errors are counted", func(t *testing.T) {
		s := base
		s.Mode, s.URLs = ModeZipf, []string{"/v1/a?bad", "/v1/b"}
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors == 0 || res.Errors != res.Status[400] || res.Status[200]+res.Status[400] != res.Requests {
			t.Fatalf("errors %d status %v requests %d", res.Errors, res.Status, res.Requests)
		}
	})
	t.Run("sequence", func(t *testing.T) {
		s := base
		s.Mode, s.Templates, s.SeqStart, s.SeqStep = ModeSequence, []string{"/v1/x?to={n}", "/v1/y?to={n}"}, 1000, 1
		res, err := Run(context.Background(), s)
		if err != nil || res.Requests == 0 || res.Errors != 0 {
			t.Fatalf("err %v requests %d errors %d", err, res.Requests, res.Errors)
		}
	})
	t.Run("bounded sequence ends early, each target once", func(t *testing.T) {
		s := base
		s.Mode, s.Templates, s.SeqStart, s.SeqStep, s.SeqCount = ModeSequence, []string{"/v1/once?a={n}", "/v1/once?b={n}"}, 1000, 1, 301
		s.Duration, s.CheckCache, s.SampleEvery = time.Minute, "HIT", 1
		s.MetricsURL, s.Metrics = srv.URL+"/metrics", []string{"go_gc_duration_seconds", "absent_total"}
		start := time.Now()
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 301 || res.Errors != 0 || res.CacheUnexpected != 0 || time.Since(start) > 30*time.Second {
			t.Fatalf("requests %d errors %d (%v) unexpected cache %d after %v", res.Requests, res.Errors, res.Status, res.CacheUnexpected, time.Since(start))
		}
		b, a := res.MetricsBefore, res.MetricsAfter
		if a["go_gc_duration_seconds_sum"]-b["go_gc_duration_seconds_sum"] != 1 || a["go_gc_duration_seconds_count"]-b["go_gc_duration_seconds_count"] != 10 {
			t.Fatalf("metrics before %v after %v", b, a)
		}
		if _, ok := a["absent_total"]; ok || len(a) != 2 {
			t.Fatalf("metrics after %v", a)
		}
	})
	t.Run("stampede", func(t *testing.T) {
		s := base
		s.Mode, s.URLs, s.Connections = ModeStampede, []string{"/v1/c1", "/v1/c2", "/v1/c3"}, 8
		before := served.Load()
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 24 || served.Load()-before != 24 || len(res.UpstreamPerRound) != 3 {
			t.Fatalf("requests %d served %d rounds %v", res.Requests, served.Load()-before, res.UpstreamPerRound)
		}
	})
}

func TestSpecRefusesBoundOutsideSequence(t *testing.T) {
	_, err := Run(context.Background(), Spec{Addr: "127.0.0.1:9", Mode: ModeList, URLs: []string{"/"}, Duration: time.Second, SeqCount: 5})
	if err == nil || !strings.Contains(err.Error(), "SeqCount") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_cpu_classes_gc_total_cpu_seconds_total GC CPU.
# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter
go_cpu_classes_gc_total_cpu_seconds_total 1.25
go_gc_gomemlimit_bytes 9.223372036854776e+18
tradergate_cache_bytes 2.68e+08 1700000000000
tradergate_requests_total{route="tx"} 5
`
	got := ParseMetrics([]byte(text), []string{"go_cpu_classes_gc_total_cpu_seconds_total", "go_gc_gomemlimit_bytes", "tradergate_cache_bytes", "tradergate_requests_total"})
	want := map[string]float64{"go_cpu_classes_gc_total_cpu_seconds_total": 1.25, "go_gc_gomemlimit_bytes": 9.223372036854776e+18, "tradergate_cache_bytes": 2.68e+08}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestSpecRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:80", "example.com:80", "0.0.0.0:80"} {
		_, err := Run(context.Background(), Spec{Addr: addr, Mode: ModeList, URLs: []string{"/"}, Duration: time.Second})
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: err = %v, want a loopback refusal", addr, err)
		}
	}
}

func TestSequenceTargets(t *testing.T) {
	s := newSequence([]string{"/a?to={n}&l=20", "/b?to={n}"}, 1000, 5, 0, "")
	var got []string
	for i := range int64(5) {
		got = append(got, string(s.appendTarget(nil, i)))
	}
	want := []string{"/a?to=1000&l=20", "/b?to=1000", "/a?to=995&l=20", "/b?to=995", "/a?to=990&l=20"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
	if list := SequenceTargets([]string{"/a?to={n}&l=20", "/b?to={n}"}, 1000, 5, 5); strings.Join(list, " ") != strings.Join(want, " ") {
		t.Fatalf("SequenceTargets %v, want %v", list, want)
	}
}

func TestParseHistogramsAndQuantile(t *testing.T) {
	exposition := func(a, b, c, inf int) string {
		return fmt.Sprintf(`# HELP go_sched_latencies_seconds Distribution.
# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="6.399999999999999e-08"} %d
go_sched_latencies_seconds_bucket{le="1.0239999999999999e-06"} %d
go_sched_latencies_seconds_bucket{le="0.001048576"} %d
go_sched_latencies_seconds_bucket{le="+Inf"} %d
go_sched_latencies_seconds_sum NaN
go_sched_latencies_seconds_count %d
go_other_seconds_bucket{le="1"} 7
tradergate_request_duration_seconds_bucket{route="tx",le="1"} 9
`, a, b, c, inf, inf)
	}
	names := []string{"go_sched_latencies_seconds", "go_gc_pauses_seconds"}
	before := ParseHistograms([]byte(exposition(10, 20, 30, 30)), names)
	after := ParseHistograms([]byte(exposition(110, 920, 1020, 1030)), names)
	if len(before) != 1 || len(before["go_sched_latencies_seconds"]) != 4 {
		t.Fatalf("parsed %v", before)
	}
	d := HistogramDelta(before["go_sched_latencies_seconds"], after["go_sched_latencies_seconds"])
	// The window: 100 values up to 64ns, 800 to 1µs, 100 to 1ms, 10 above.
	if len(d) != 4 || d[0].Count != 100 || d[3].Count != 1000 || d[3].Le != InfBound {
		t.Fatalf("delta %v", d)
	}
	for _, tc := range []struct{ q, want float64 }{{0.05, 6.399999999999999e-08}, {0.5, 1.0239999999999999e-06}, {0.95, 0.001048576}, {0.999, InfBound}} {
		if got := BucketQuantile(d, tc.q); got != tc.want {
			t.Errorf("q%v = %v, want %v", tc.q, got, tc.want)
		}
	}
	if BucketQuantile(nil, 0.5) != 0 || HistogramDelta(d[:2], d) != nil {
		t.Error("an empty histogram has no quantile; buckets that differ have no delta")
	}
}
