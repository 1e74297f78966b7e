package status

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tradergate/internal/testkit/browsertest"
)

// text is the text of the first element sel selects, once it is visible.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

// eval is the value of a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	browsertest.SaveArtifact(t, name, png)
}

func TestPageInBrowser(t *testing.T) {
	var snap atomic.Pointer[Snapshot]
	s := fixture()
	snap.Store(&s)
	srv := httptest.NewServer(Handler(func() Snapshot { return *snap.Load() }, Options{Refresh: 300 * time.Millisecond}))
	t.Cleanup(srv.Close)
	ctx := browsertest.Browser(t)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/status"),
		chromedp.WaitVisible(chromedp.ID("routes")),
	); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "status-page.png")
	if got := text(t, ctx, `tr[data-route="activity"] .breaker`); got != "open" {
		t.Errorf("activity's breaker shows %q, want open", got)
	}
	if !eval[bool](t, ctx, `document.querySelector('tr[data-route="activity"] .breaker').classList.contains("st-bad")`) {
		t.Error("activity's open breaker is not shown red")
	}
	if got := text(t, ctx, "#cache-hit-ratio"); got != "91.2 %" {
		t.Errorf("hit ratio shows %q, want 91.2 %%", got)
	}
	if got := text(t, ctx, `tr[data-plan="anonymous"] .refused`); got != "72" {
		t.Errorf("anonymous 429s show %q, want 72", got)
	}
	if got := text(t, ctx, "#verdict"); got != "Failing" {
		t.Errorf("verdict %q, want Failing", got)
	}
	if got := text(t, ctx, `tr[data-stream="orderbook_events"] .open`); got != "1,840" {
		t.Errorf("open order book streams show %q, want 1,840", got)
	}
	if !eval[bool](t, ctx, `document.querySelector('tr[data-stream="orderbook_events"] .lagging').classList.contains("st-warn")`) {
		t.Error("order book streams ended lagging are not shown amber")
	}

	// The script refreshes the figures in place: change the snapshot and
	// wait for the page to show it, without a reload.
	eval[bool](t, ctx, `window.notReloaded = true`)
	next := fixture()
	next.Cache.HitRatio = 0.5
	next.Route("activity").Breaker = BreakerClosed
	next.Route("positions_open").Breaker = BreakerClosed
	next.TLS[1].NotAfter = taken.AddDate(0, 2, 0)
	next.Fleet.Replicas[2].Ready = true
	next.Totals.ErrorsPerSec = 0
	next.Native = &Native{Routes: slices.Clone(next.Native.Routes)}
	next.Native.Routes[1].RolledBack, next.Native.Routes[1].Reason = false, "" // a reload re-armed tx
	next.Streams = &Streams{Routes: slices.Clone(next.Streams.Routes)}
	next.Streams.Routes[0].Open = 1900
	snap.Store(&next)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(pctx, chromedp.Poll[bool](
		`document.getElementById("cache-hit-ratio").textContent === "50.0 %"`,
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("the hit ratio did not refresh: %v", err)
	}
	if !eval[bool](t, ctx, `window.notReloaded === true`) {
		t.Error("the page reloaded instead of refreshing in place")
	}
	if got := text(t, ctx, `tr[data-route="activity"] .breaker`); got != "closed" {
		t.Errorf("after the refresh, activity's breaker shows %q", got)
	}
	if got := text(t, ctx, `tr[data-route="orderbook_book"] .breaker`); got != "none" {
		t.Errorf("after the refresh, orderbook_book's breaker shows %q, want none", got)
	}
	if eval[bool](t, ctx, `/\bst-/.test(document.querySelector('tr[data-route="orderbook_book"] .breaker').className)`) {
		t.Error("after the refresh, orderbook_book's missing breaker is coloured")
	}
	if got := text(t, ctx, "#verdict"); got != "Healthy" {
		t.Errorf("after the refresh, the verdict is %q", got)
	}
	if got := text(t, ctx, `tr[data-stream="orderbook_events"] .open`); got != "1,900" {
		t.Errorf("after the refresh, open order book streams show %q, want 1,900", got)
	}
	if got := text(t, ctx, `[data-f="native.routes.1.rolled_back"]`); got != "no" {
		t.Errorf("after the refresh, tx shows rolled back %q, want no", got)
	}
	if !eval[bool](t, ctx, `document.querySelector(".tile[data-s='totals.open_breakers']").classList.contains("st-ok")`) {
		t.Error("after the refresh, the open-breakers figure is still red")
	}
	if !eval[bool](t, ctx, `document.getElementById("health").classList.contains("h-green")`) {
		t.Error("after the refresh, the header is not green")
	}
	screenshot(t, ctx, "status-page-refreshed.png")

	// A change of the page's shape (a replica more) reloads it.
	more := next
	more.Fleet = newFleetView(append(slices.Clone(next.Fleet.Replicas), replica{ID: "edge-4", Ready: true}))
	snap.Store(&more)
	if _, err := chromedp.Run(pctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-replica="edge-4"]`))); err != nil {
		t.Fatalf("the new replica did not appear: %v", err)
	}
}

// TestScriptFormatsLikeTheServer checks that static/status.js formats every
// figure as format.go does: the page's first refresh, from an unchanged
// snapshot, must not change a single character.
func TestScriptFormatsLikeTheServer(t *testing.T) {
	srv := httptest.NewServer(Handler(fixture, Options{Refresh: time.Second}))
	t.Cleanup(srv.Close)
	ctx := browsertest.Browser(t)
	const texts = `Array.from(document.querySelectorAll("[data-f], [data-s]"), e => e.textContent + " | " + e.className)`
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	before := eval[[]string](t, ctx, texts)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(pctx, chromedp.Poll[bool](`document.getElementById("live").textContent.startsWith("live")`,
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("the page did not refresh: %v", err)
	}
	after := eval[[]string](t, ctx, texts)
	if len(before) < 50 || len(before) != len(after) {
		t.Fatalf("%d figures before the refresh, %d after", len(before), len(after))
	}
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("server %q, script %q", before[i], after[i])
		}
	}
}
