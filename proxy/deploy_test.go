package proxy_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"tradergate/deploy"
	"tradergate/internal/testkit"
	"tradergate/internal/testkit/promtest"
	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/proxy/config"
)

// deploy/'s dashboard and alert rules, against a real Prometheus scraping
// a live edge (TLS on, so a certificate's expiry; a shared Redis, so the
// shared tier and its breaker) under scripted traffic: every
// expression must evaluate, and every series it names must be one the
// edge exports.
func TestDashboardAndAlertsAgainstALiveEdge(t *testing.T) {
	r := redistest.Start(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	testkit.SelfSigned(t, "edge", time.Now().Add(30*24*time.Hour), edgeName).Write(t, certFile, keyFile)
	te := startTLSEdge(t, tlsSetup{
		yaml: "mode: files\nhttp_listen: \"\"\ncert_file: " + strconv.Quote(certFile) + "\nkey_file: " + strconv.Quote(keyFile),
		edit: func(c *config.Config) {
			c.Admin.Listen = "127.0.0.1:0"
			c.Redis.Addrs, c.Redis.Timeout = []string{r.Addr()}, 2*time.Second
			c.Upstream.Breaker.MinRequests = 2
			c.Upstream.Retry.MaxAttempts = 1
		},
	})
	e := te.edge
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	for range 3 {
		e.get(tx) // a miss, then hits
	}
	for range 2 {
		e.do("GET", tx) // 401s
	}
	e.sim.SetFaults(legacysim.Faults{Route: "wallet_address", FailStatus: 500})
	for range 3 {
		e.get("/v1/trader/wallet-address/0xab12ab12ab12ab12ab12ab12ab12ab12ab12ab12") // 502s; the breaker opens
	}

	admin := waitAdmin(t, e)
	prom := promtest.Start(t, []string{admin}, promtest.WithRules(deploy.Rules()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := prom.WaitScraped(ctx, admin); err != nil {
		t.Fatalf("scrape of %s: %v", admin, err)
	}
	if err := prom.WaitEvaluated(ctx); err != nil {
		t.Fatalf("rules: %v", err)
	}
	exprs, err := deploy.Expressions()
	if err != nil {
		t.Fatal(err)
	}
	queries := make([]string, len(exprs))
	for i, x := range exprs {
		queries[i] = x.Query
		if _, err := prom.Query(ctx, x.Query); err != nil {
			t.Errorf("%s: %q: %v", x.Source, x.Query, err)
		}
	}
	missing, err := prom.MissingSeries(ctx, queries)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("the dashboard and alerts name series the edge does not export: %v", missing)
	}
	t.Logf("%d expressions evaluated against a live edge", len(exprs))
}

// waitAdmin is the admin listener's address once the edge has opened it.
func waitAdmin(t *testing.T, e *edge) string {
	t.Helper()
	scrape(t, e)
	return e.srv.AdminAddr()
}
