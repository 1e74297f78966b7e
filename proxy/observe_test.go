package proxy_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// withAdmin opens the admin listener on a free loopback port.
var withAdmin = withConfig(func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" })

func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue finds one sample line of the text exposition.
func metricValue(exposition, series string) string {
	for line := range strings.SplitSeq(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

func TestMetricsCountWhatWasSent(t *testing.T) {
	e := newEdge(t, withAdmin, withLimitedKey(2, time.Minute))
	serveEdge(t, e)
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	act := "/v1/trader/" + e.sim.Wallets()[0] + "/activity"
	for range 3 {
		e.get(tx) // MISS, HIT, HIT
	}
	for range 2 {
		e.get(act) // MISS, HIT
	}
	e.get("/v1/nothing")
	e.do(http.MethodGet, tx) // no key: 401
	for range 3 {
		e.do(http.MethodGet, tx, "Authorization", "Bearer "+keyLimited) // HIT, HIT, 429
	}

	code, text := getText(t, "http://"+e.srv.AdminAddr()+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	want := map[string]string{
		`tradergate_requests_total{cache="MISS",code="200",route="tx"}`:       "1",
		`tradergate_requests_total{cache="HIT",code="200",route="tx"}`:        "4",
		`tradergate_requests_total{cache="MISS",code="200",route="activity"}`: "1",
		`tradergate_requests_total{cache="HIT",code="200",route="activity"}`:  "1",
		`tradergate_requests_total{cache="NONE",code="404",route="none"}`:     "1",
		`tradergate_requests_total{cache="NONE",code="401",route="none"}`:     "1",
		`tradergate_requests_total{cache="NONE",code="429",route="none"}`:     "1",
		`tradergate_upstream_requests_total{code="200",route="tx"}`:           "1",
		`tradergate_upstream_requests_total{code="200",route="activity"}`:     "1",
		`tradergate_ratelimit_refused_total{plan="free"}`:                     "1",
		`tradergate_cache_requests_total{result="HIT"}`:                       "5",
		`tradergate_cache_requests_total{result="MISS"}`:                      "2",
		`tradergate_cache_entries`:                                            "2",
		`tradergate_breaker_state{route="tx"}`:                                "0",
		`tradergate_request_duration_seconds_count{cache="HIT",route="tx"}`:   "4",
	}
	for series, v := range want {
		if got := metricValue(text, series); got != v {
			t.Errorf("%s = %q, want %s", series, got, v)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "tradergate_ratelimit_store_errors_total",
		"tradergate_upstream_retries_total", "tradergate_upstream_retry_budget_refused_total", "tradergate_cache_bytes",
		"tradergate_cache_evictions_total", "tradergate_cache_coalesced_total", "tradergate_breaker_transitions_total"} {
		if !strings.Contains(text, "# TYPE "+name+" ") {
			t.Errorf("no metric %s", name)
		}
	}
	// Labels are bounded: no key, no address, no cursor. Key ids, which
	// come from the configuration, label the migration counts only.
	if got := metricValue(text, `tradergate_migration_requests_total{api="v1",key_id="limited"}`); got == "" {
		t.Error("no migration series for the key limited")
	}
	for _, secret := range []string{keyAll, keyLimited, e.sim.Wallets()[0], e.sim.TradeTxs()[0]} {
		if strings.Contains(text, secret) {
			t.Errorf("/metrics contains %q", secret)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not installed (.ci/run installs Debian's prometheus package)")
		}
		t.Skip("promtool not installed; apt-get install prometheus")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestHealthAndReadinessThroughShutdown(t *testing.T) {
	e := newEdge(t, withAdmin, withConfig(func(c *config.Config) { c.Server.DrainDelay = 400 * time.Millisecond }))
	addr, stop, wait := serveEdge(t, e)
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	admin := "http://" + e.srv.AdminAddr()
	testkit.Eventually(t, "ready", func() bool { code, _ := getText(t, admin+"/readyz"); return code == 200 })
	if code, body := getText(t, admin+"/healthz"); code != 200 || body != `{"status":"ok"}` {
		t.Errorf("/healthz: %d %s", code, body)
	}

	stop() // SIGTERM: draining for drain_delay, then shutdown
	testkit.Eventually(t, "not ready", func() bool { code, _ := getText(t, admin+"/readyz"); return code == 503 })
	if code, _ := getText(t, admin+"/healthz"); code != 200 {
		t.Errorf("/healthz while draining: %d", code)
	}
	// Still answering clients while draining.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/tx/"+e.sim.TradeTxs()[0], nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("client request while draining: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	if err := wait(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := http.Get(admin + "/healthz"); err == nil {
		t.Error("admin listener still open after shutdown")
	}
}

func TestAccessLogLines(t *testing.T) {
	var logs testkit.LogBuffer
	e := newEdge(t, func(s *edgeSetup) {
		s.logger = slog.New(slog.NewJSONHandler(&logs, nil))
		s.accessLog = true
	})
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	e.get(tx, "X-Request-Id", "client-trace-0001")
	e.get(tx)
	e.do(http.MethodGet, tx, "Authorization", "Bearer wrong-key-value")

	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %s", sc.Text())
		}
		if l["msg"] == "request" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d access lines for 3 requests:\n%s", len(lines), logs.String())
	}
	for _, f := range []string{"request_id", "client", "method", "path", "route", "status", "cache", "duration", "bytes", "upstream_status", "upstream_duration", "key_id"} {
		if _, ok := lines[0][f]; !ok {
			t.Errorf("access line lacks %s: %v", f, lines[0])
		}
	}
	first, second, third := lines[0], lines[1], lines[2]
	if first["request_id"] != "client-trace-0001" || first["route"] != "tx" || first["status"] != 200.0 ||
		first["cache"] != "MISS" || first["upstream_status"] != 200.0 || first["key_id"] != "all" {
		t.Errorf("first line: %v", first)
	}
	if second["cache"] != "HIT" || second["upstream_status"] != 0.0 {
		t.Errorf("second line: %v", second)
	}
	if third["status"] != 401.0 || third["key_id"] != "" || third["cache"] != "NONE" {
		t.Errorf("third line: %v", third)
	}
	if first["client"] != "127.0.0.1" || first["path"] != tx || first["method"] != "GET" {
		t.Errorf("who and what: %v", first)
	}
	for _, secret := range []string{keyAll, "wrong-key-value", legacyKey, proxy.HashKey(keyAll)} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs contain %q", secret)
		}
	}
}

// Shutdown says what it does, stage by stage.
func TestShutdownLogLines(t *testing.T) {
	var logs testkit.LogBuffer
	e := newEdge(t, func(s *edgeSetup) { s.logger = logs.Logger() })
	e.stop()
	if err := e.wait(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shutdown: not ready; draining", "shutdown: closing listeners", "shutdown: stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q line:\n%s", want, logs.String())
		}
	}
}
