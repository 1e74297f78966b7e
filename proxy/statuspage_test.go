package proxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/browsertest"
	"tradergate/legacysim"
	"tradergate/proxy"
	"tradergate/proxy/status"
)

// The status page of a live edge, in a real browser: after hits, misses,
// a 429 and a breaker opened by a failing legacy route, the page shows the
// breaker open on that route, a hit ratio above zero and the 429 counted.
func TestStatusPageOfALiveEdge(t *testing.T) {
	e := newEdge(t, withAdmin, withLimitedKey(3, time.Minute), withConfig(func(c *proxy.Config) {
		c.Upstream.Breaker.MinRequests = 2
		c.Upstream.Retry.MaxAttempts = 1
	}))
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	for range 4 {
		e.get(tx) // a miss, then hits
	}
	for range 5 { // the fourth and fifth are refused: 429s on plan "free"
		e.do("GET", tx, "Authorization", "Bearer "+keyLimited)
	}
	e.sim.SetFaults(legacysim.Faults{Route: "wallet_address", FailStatus: 500})
	for i := range 3 {
		e.get("/v1/trader/wallet-address/0x" + strings.Repeat("ab", 19) + "0" + string(rune('0'+i)))
	}
	if got := e.srv.BreakerState("wallet_address"); got != "open" {
		t.Fatalf("breaker %q, want open", got)
	}
	// The page's figures are the last minute's full seconds: a page drawn
	// within the second these requests ended in shows none of them. Wait
	// until the snapshot the page is drawn from holds them.
	testkit.Eventually(t, "the requests in /status.json", func() bool {
		resp, err := http.Get("http://" + e.srv.AdminAddr() + "/status.json")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var s status.Snapshot
		if json.NewDecoder(resp.Body).Decode(&s) != nil || s.Cache.HitRatio == 0 {
			return false
		}
		for _, p := range s.Limits.Refused {
			if p.Plan == "free" && p.LastMinute == 2 {
				return true
			}
		}
		return false
	})

	ctx := browsertest.Browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+e.srv.AdminAddr()+"/status"),
		chromedp.WaitVisible(chromedp.ID("routes")),
	); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.SaveArtifact(t, "status-live-edge.png", png)
	text := func(sel string) string { t.Helper(); return browsertest.Text(t, ctx, sel) }
	if got := text(`tr[data-route="wallet_address"] .breaker`); got != "open" {
		t.Errorf("wallet_address's breaker shows %q, want open", got)
	}
	if got := text(`tr[data-route="tx"] .breaker`); got != "closed" {
		t.Errorf("tx's breaker shows %q, want closed", got)
	}
	// The order book at T is built from orderbook_events' pages: that
	// route's breaker guards it, and it has none of its own.
	if got := text(`tr[data-route="orderbook_book"] .breaker`); got != "none" {
		t.Errorf("orderbook_book's breaker shows %q, want none", got)
	}
	if got := text("#cache-hit-ratio"); got == "0.0 %" || got == "" || !strings.HasSuffix(got, "%") {
		t.Errorf("hit ratio shows %q, want above zero", got)
	}
	if got := text(`tr[data-plan="free"] .refused`); got != "2" {
		t.Errorf("429s of plan free show %q, want 2", got)
	}
	page := text("body")
	for _, secret := range []string{keyAll, keyLimited, legacyKey} {
		if strings.Contains(page, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}
}
