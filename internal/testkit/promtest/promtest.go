// Package promtest runs a throwaway Prometheus server for tests, the way
// net/http/httptest runs an HTTP server: Start launches the real prometheus
// binary (Debian's prometheus package) with a temporary configuration and
// storage on a free loopback port, scraping the given targets every second,
// and the test's cleanup stops it.
//
// It exists to check the dashboard's and the alerts' PromQL against what an
// edge really exports: MissingSeries reports the metric names expressions
// use that Prometheus does not hold.
//
// prometheus must be on PATH. When it is not, Start skips the test, unless
// the environment variable CI is set (to anything non-empty): CI installs
// it, so there a missing binary fails the test.
package promtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"tradergate/internal/testkit"
)

const (
	// startTimeout bounds how long a starting server may take to be ready.
	startTimeout = 20 * time.Second
	// pollEvery is how often the Wait methods ask again.
	pollEvery = 100 * time.Millisecond
	// JobName is the job label of every target's series.
	JobName = "promtest"
)

// Option changes what Start runs.
type Option func(*options)

type options struct {
	rules       [][]byte
	metricsPath string
	interval    time.Duration
}

// WithRules loads a rule file (recording and alerting rules, Prometheus's
// YAML format), evaluated at the scrape interval. It may be given more than
// once.
func WithRules(data []byte) Option {
	return func(o *options) { o.rules = append(o.rules, data) }
}

// WithMetricsPath scrapes this path instead of /metrics.
func WithMetricsPath(path string) Option {
	return func(o *options) { o.metricsPath = path }
}

// WithInterval scrapes and evaluates rules at this interval instead of
// every second.
func WithInterval(d time.Duration) Option {
	return func(o *options) { o.interval = d }
}

// Server is one prometheus process. Its methods may be called from any
// goroutine; they return errors rather than fail the test.
type Server struct {
	dir     string
	logPath string
	url     string
	api     v1.API
	tr      *http.Transport

	proc testkit.Process
}

// Start launches prometheus scraping targets (host:port each, over plain
// HTTP) and waits until it is ready. t.Cleanup stops it; when the test has
// failed, the end of Prometheus's log goes to the test's log first.
func Start(tb testing.TB, targets []string, opts ...Option) *Server {
	tb.Helper()
	bin := testkit.Binary(tb, "prometheus", "prometheus")
	o := options{metricsPath: "/metrics", interval: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	dir := tb.TempDir()
	cfg, err := writeConfig(dir, targets, o)
	if err != nil {
		tb.Fatalf("promtest: %v", err)
	}
	s := &Server{dir: dir, logPath: filepath.Join(dir, "prometheus.log"), tr: &http.Transport{}}
	tb.Cleanup(func() {
		s.Stop()
		s.tr.CloseIdleConnections()
		if tb.Failed() {
			tb.Logf("promtest: end of the prometheus log:\n%s", testkit.Tail(s.logPath))
		}
	})
	// The free port is found by binding :0 and releasing it, so another
	// process may take it before prometheus binds; try a few.
	for range 5 {
		var port int
		if port, err = testkit.FreePort(); err != nil {
			continue
		}
		if err = s.start(bin, cfg, port); err == nil {
			return s
		}
	}
	tb.Fatalf("promtest: start prometheus: %v", err)
	return nil
}

// writeConfig writes prometheus.yml and the rule files into dir.
func writeConfig(dir string, targets []string, o options) (string, error) {
	var ruleFiles []string
	for i, r := range o.rules {
		p := filepath.Join(dir, fmt.Sprintf("rules-%d.yml", i))
		if err := os.WriteFile(p, r, 0o600); err != nil {
			return "", err
		}
		ruleFiles = append(ruleFiles, p)
	}
	every := model.Duration(o.interval).String()
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     every,
			"scrape_timeout":      every,
			"evaluation_interval": every,
		},
		"rule_files": ruleFiles,
		"scrape_configs": []any{map[string]any{
			"job_name":       JobName,
			"metrics_path":   o.metricsPath,
			"static_configs": []any{map[string]any{"targets": targets}},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "prometheus.yml")
	return p, os.WriteFile(p, b, 0o600)
}

func (s *Server) start(bin, cfg string, port int) error {
	tsdb := filepath.Join(s.dir, "data")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.url = "http://" + addr
	c, err := api.NewClient(api.Config{Address: s.url, Client: &http.Client{Transport: s.tr}})
	if err != nil {
		return err
	}
	s.api = v1.NewAPI(c)
	cmd := exec.Command(bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+tsdb,
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	return s.proc.Start(cmd, s.logPath, startTimeout, func(ctx context.Context, _ int) bool {
		// Ask for the storage path, not just /-/ready: if another process
		// took the port, its server must not pass for ours.
		flags, err := s.api.Flags(ctx)
		return err == nil && flags["storage.tsdb.path"] == tsdb && s.ready(ctx)
	})
}

// ready is whether /-/ready answers 200 (storage and rules loaded).
func (s *Server) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Transport: s.tr}).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// URL is the server's base URL, http://127.0.0.1:port.
func (s *Server) URL() string { return s.url }

// API is a client of the server's HTTP API, for what the methods below do
// not cover.
func (s *Server) API() v1.API { return s.api }

// Stop kills the server and waits for it to exit. Stopping a stopped server
// does nothing.
func (s *Server) Stop() { s.proc.Stop() }

// Query evaluates expr at the current time through /api/v1/query.
func (s *Server) Query(ctx context.Context, expr string) (model.Value, error) {
	v, _, _, err := s.api.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	return v, nil
}

// WaitScraped waits until target (host:port, as given to Start) has been
// scraped successfully twice, so that rate() over its counters has two
// samples, or until ctx ends. Prometheus hands new targets to its scrapers
// every 5 seconds, so the first scrape comes up to 5s after Start: give ctx
// 10s or more.
func (s *Server) WaitScraped(ctx context.Context, target string) error {
	q := fmt.Sprintf(`count_over_time(up{job=%q,instance=%q}[1h]) >= 2 and up{job=%[1]q,instance=%[2]q} == 1`, JobName, target)
	for {
		v, err := s.Query(ctx, q)
		if err == nil {
			if vec, ok := v.(model.Vector); ok && len(vec) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("target %s not scraped twice: %w (%s)", target, ctx.Err(), s.targetState(target))
		case <-time.After(pollEvery):
		}
	}
}

// targetState is what Prometheus says of a target, for error messages.
func (s *Server) targetState(target string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ts, err := s.api.Targets(ctx)
	if err != nil {
		return "targets: " + err.Error()
	}
	for _, t := range ts.Active {
		if string(t.Labels["instance"]) == target {
			return fmt.Sprintf("health %s, last error %q", t.Health, t.LastError)
		}
	}
	return "not among the active targets"
}

// WaitEvaluated waits until every loaded rule has been evaluated after the
// call, or until ctx ends. Called after WaitScraped, the recorded series
// then reflect the scraped ones.
func (s *Server) WaitEvaluated(ctx context.Context) error {
	since := time.Now()
	for {
		rs, err := s.api.Rules(ctx, nil)
		if err == nil && evaluatedSince(rs, since) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rules not all evaluated: %w", errors.Join(ctx.Err(), err))
		case <-time.After(pollEvery):
		}
	}
}

func evaluatedSince(rs v1.RulesResult, since time.Time) bool {
	for _, g := range rs.Groups {
		for _, r := range g.Rules {
			var last time.Time
			switch r := r.(type) {
			case v1.RecordingRule:
				last = r.LastEvaluation
			case v1.AlertingRule:
				last = r.LastEvaluation
			}
			if !last.After(since) {
				return false
			}
		}
	}
	return true
}

// Names is every metric name the server holds: the targets' series, those
// Prometheus adds per target (up, scrape_*), and those the loaded rules
// record.
func (s *Server) Names(ctx context.Context) ([]string, error) {
	return s.labelValues(ctx, nil)
}

// TargetNames is the metric names of the series scraped from target
// (host:port), including up and scrape_*.
func (s *Server) TargetNames(ctx context.Context, target string) ([]string, error) {
	return s.labelValues(ctx, []string{fmt.Sprintf(`{job=%q,instance=%q}`, JobName, target)})
}

func (s *Server) labelValues(ctx context.Context, match []string) ([]string, error) {
	vs, _, _, err := s.api.LabelValues(ctx, model.MetricNameLabel, match, time.Time{}, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("metric names: %w", err)
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = string(v)
	}
	return names, nil
}

// MissingSeries returns, sorted and once each, the metric names that exprs
// use and the server does not hold (see Names): an expression naming one
// shows nothing or never fires. A name found only in a label_values-style
// regular expression on __name__ is not checked. An expression that does
// not parse is an error.
func (s *Server) MissingSeries(ctx context.Context, exprs []string) ([]string, error) {
	held, err := s.Names(ctx)
	if err != nil {
		return nil, err
	}
	have := make(map[string]bool, len(held))
	for _, n := range held {
		have[n] = true
	}
	missing := map[string]bool{}
	for _, e := range exprs {
		names, err := MetricNames(e)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if !have[n] {
				missing[n] = true
			}
		}
	}
	return sortedKeys(missing), nil
}
