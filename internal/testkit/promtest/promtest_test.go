package promtest

import (
	"context"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
)

// exporter serves a real client_golang registry with a counter and a gauge
// on a loopback HTTP server, and returns its host:port.
func exporter(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "demo_requests_total", Help: "Requests.",
	}, []string{"route"})
	ready := prometheus.NewGauge(prometheus.GaugeOpts{Name: "demo_ready", Help: "1 when ready."})
	reg.MustRegister(requests, ready)
	requests.WithLabelValues("tx").Add(3)
	requests.WithLabelValues("activity").Add(5)
	ready.Set(1)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

const recording = `
groups:
  - name: demo
    rules:
      - record: job:demo_requests:sum
        expr: sum by (job) (demo_requests_total)
`

func TestScrapeQueryAndMissingSeries(t *testing.T) {
	t.Parallel()
	target := exporter(t)
	srv := Start(t, []string{target}, WithRules([]byte(recording)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.WaitScraped(ctx, target); err != nil {
		t.Fatal(err)
	}

	t.Run("query a scraped counter", func(t *testing.T) {
		v, err := srv.Query(ctx, `demo_requests_total{route="tx"}`)
		if err != nil {
			t.Fatal(err)
		}
		vec, ok := v.(model.Vector)
		if !ok || len(vec) != 1 || vec[0].Value != 3 {
			t.Fatalf("got %v, want one sample of 3", v)
		}
		if got := vec[0].Metric["job"]; got != JobName {
			t.Errorf("job = %q, want %q", got, JobName)
		}
	})

	t.Run("rate has two samples after WaitScraped", func(t *testing.T) {
		v, err := srv.Query(ctx, `rate(demo_requests_total[1m])`)
		if err != nil {
			t.Fatal(err)
		}
		if vec, ok := v.(model.Vector); !ok || len(vec) != 2 {
			t.Fatalf("got %v, want two series", v)
		}
	})

	t.Run("target names", func(t *testing.T) {
		names, err := srv.TargetNames(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"demo_requests_total", "demo_ready", "up"} {
			if !slices.Contains(names, want) {
				t.Errorf("TargetNames = %q, lacks %s", names, want)
			}
		}
	})

	t.Run("recorded series", func(t *testing.T) {
		if err := srv.WaitEvaluated(ctx); err != nil {
			t.Fatal(err)
		}
		v, err := srv.Query(ctx, `job:demo_requests:sum`)
		if err != nil {
			t.Fatal(err)
		}
		if vec, ok := v.(model.Vector); !ok || len(vec) != 1 || vec[0].Value != 8 {
			t.Fatalf("got %v, want one sample of 8", v)
		}
	})

	t.Run("missing series", func(t *testing.T) {
		missing, err := srv.MissingSeries(ctx, []string{
			`sum by (route) (rate(demo_requests_total[1m]))`,
			`min(demo_ready) and on () job:demo_requests:sum > 0`,
			`sum(rate(demo_absent_total[1m])) / sum(rate(demo_requests_total[1m]))`,
			`histogram_quantile(0.99, sum by (le) (rate(demo_duration_seconds_bucket[1m])))`,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"demo_absent_total", "demo_duration_seconds_bucket"}
		if !slices.Equal(missing, want) {
			t.Errorf("MissingSeries = %q, want %q", missing, want)
		}
	})

	t.Run("invalid expression is an error", func(t *testing.T) {
		if _, err := srv.MissingSeries(ctx, []string{`rate(demo_requests_total[$__rate_interval])`}); err == nil {
			t.Error("MissingSeries accepted an expression that does not parse")
		}
	})
}

func TestWaitScrapedTimesOutOnADeadTarget(t *testing.T) {
	t.Parallel()
	// A listener that never accepts: the kernel takes the connection and
	// nothing ever answers, so every scrape times out. The port stays
	// ours for the whole test: a port freed at once could be handed to
	// another server, this Prometheus's own included, whose /metrics
	// would then answer the scrape.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dead := ln.Addr().String()

	p := Start(t, []string{dead})
	// Prometheus hands new targets to its scrapers every 5s; give it time
	// to try this one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = p.WaitScraped(ctx, dead)
	if err == nil {
		t.Fatal("WaitScraped succeeded on a target that does not answer")
	}
	if !strings.Contains(err.Error(), "health down") {
		t.Errorf("error %q does not say the target is down", err)
	}
}
