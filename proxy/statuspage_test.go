package proxy_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/browsertest"
	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/proxy/config"
	"tradergate/proxy/status"
)

// The status page of a live edge, in a real browser: after hits, misses,
// a 429 and a breaker opened by a failing legacy route, the page shows the
// breaker open on that route, a hit ratio above zero and the 429 counted.
func TestStatusPageOfALiveEdge(t *testing.T) {
	e := newEdge(t, withAdmin, withLimitedKey(3, time.Minute), withConfig(func(c *config.Config) {
		c.Upstream.Breaker.MinRequests = 2
		// Open until the page is read: a browser starting on a busy
		// machine can take longer than the default 5s.
		c.Upstream.Breaker.OpenTimeout = time.Minute
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
	// The page reads the metrics' counters as it is drawn, and they
	// counted each answer before it was sent.
	s := statusJSON(t, e)
	if s.Cache.HitRatio == 0 {
		t.Errorf("hit ratio %v after hits", s.Cache.HitRatio)
	}
	if i := slices.IndexFunc(s.Limits.Refused, func(p status.PlanRefusals) bool { return p.Plan == "free" }); i < 0 || s.Limits.Refused[i].LastMinute != 2 {
		t.Errorf("refused %+v, want 2 of plan free", s.Limits.Refused)
	}

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

// statusJSON reads the edge's GET /status.json.
func statusJSON(t *testing.T, e *edge) status.Snapshot {
	t.Helper()
	resp, err := http.Get("http://" + e.srv.AdminAddr() + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s status.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// One fact, one answer: with a breaker open on a replica that serves, the
// page's header, its reasons and its fleet row agree that the replica is
// ready, from the first page on.
func TestStatusPageReadyIsOneFact(t *testing.T) {
	r := redistest.Start(t)
	e := newEdge(t, withAdmin, withRedis(r.Addr()), withConfig(func(c *config.Config) {
		c.Upstream.Breaker.MinRequests = 2
		c.Upstream.Retry.MaxAttempts = 1
	}))
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	e.sim.SetFaults(legacysim.Faults{Route: "wallet_address", FailStatus: 500})
	for i := range 3 {
		e.get("/v1/trader/wallet-address/0x" + strings.Repeat("ab", 19) + "0" + string(rune('0'+i)))
	}
	if got := e.srv.BreakerState("wallet_address"); got != "open" {
		t.Fatalf("breaker %q, want open", got)
	}
	s := statusJSON(t, e)
	if !s.Ready {
		t.Fatalf("a serving replica is not ready: %+v", s.Health)
	}
	found := false
	for _, rep := range s.Fleet.Replicas {
		if rep.ID == s.Replica {
			found = true
			if !rep.Ready {
				t.Errorf("the header says ready, the fleet row of %s says not", rep.ID)
			}
		}
	}
	if !found {
		t.Errorf("the fleet lists %+v, not this replica %s", s.Fleet.Replicas, s.Replica)
	}
	for _, reason := range s.Health.Reasons {
		if strings.Contains(reason, "not ready") {
			t.Errorf("reason %q for a ready replica", reason)
		}
	}
	if want := "breaker open: wallet_address"; !slices.Contains(s.Health.Reasons, want) {
		t.Errorf("reasons %q, want %q among them", s.Health.Reasons, want)
	}
}

// The streams panel of a live edge, with a real order book stream open
// against a live legacy host: status.json and the page, in a browser,
// show the stream open and the events it was sent.
func TestStatusPageShowsStreams(t *testing.T) {
	e := newEdge(t, withAdmin, withSim(liveSim()))
	testkit.Eventually(t, "the admin listener", func() bool { return e.srv.AdminAddr() != "" })
	token := e.sim.Markets()[0].Tokens[0]
	_, r := openStream(t, e, "/v1/orderbook/stream?tokenId="+token)
	got := readEvents(t, r, 3)

	// The panel's event count (tradergate_stream_events_total) is added
	// after the edge's write returns, which can be a moment after the
	// subscriber has read the event.
	var book status.StreamRoute
	testkit.Eventually(t, "the streams panel counting the events read", func() bool {
		s := statusJSON(t, e)
		if s.Streams == nil {
			t.Fatal("no streams panel with a stream open")
		}
		i := slices.IndexFunc(s.Streams.Routes, func(r status.StreamRoute) bool { return r.Name == "orderbook_events" })
		if i < 0 {
			t.Fatalf("streams %+v, no orderbook_events", s.Streams.Routes)
		}
		book = s.Streams.Routes[i]
		return book.EventsTotal >= int64(len(got))
	})
	if book.Open != 1 || book.Shared != 1 || book.MostPerStream != 1 || book.Polling != 1 {
		t.Errorf("order book streams %+v, want one open, shared by one, polled here", book)
	}
	if book.EventsTotal < int64(len(got)) || book.LegacyCallsTotal == 0 || book.PollsPerSec <= 0 {
		t.Errorf("order book streams %+v, want at least %d events, legacy calls and polls", book, len(got))
	}

	ctx := browsertest.Browser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+e.srv.AdminAddr()+"/status"),
		chromedp.WaitVisible(chromedp.ID("streams")),
	); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string { t.Helper(); return browsertest.Text(t, ctx, sel) }
	if got := text(`tr[data-stream="orderbook_events"] .open`); got != "1" {
		t.Errorf("open order book streams show %q, want 1", got)
	}
	if got := text(`tr[data-stream="orderbook_events"] .events`); got == "0" || got == "" {
		t.Errorf("order book events show %q, want some", got)
	}
	if got := text(`tr[data-stream="activity"] .open`); got != "0" {
		t.Errorf("open activity streams show %q, want 0", got)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.SaveArtifact(t, "status-streams.png", png)
}
