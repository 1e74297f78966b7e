package proxy_test

import (
	"net/url"
	"strconv"
	"testing"
	"time"
)

// TestFastHitAllocatesNothing: a cache hit through the HTTP/1.1 front's
// whole chain (auth, the limiter in memory, routing, validation, the
// cache lookup, the answer's headers) makes no allocation, identity or
// gzip, for a small page, a 20-item page and an order book page.
// BenchmarkHit reports the same figure; this holds it.
func TestFastHitAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	e := benchEdgeWith(t)
	// Settled ranges, as BenchmarkHit's: the pages stay fresh while the
	// test runs.
	settled := time.Now().Unix() - 3600
	pages := []struct{ name, path string }{
		{"tx", "/v1/tx/" + e.sim.TradeTxs()[0]},
		{"activity20", "/v1/trader/" + e.sim.Wallets()[0] + "/activity?toTimestamp=" + strconv.FormatInt(settled, 10)},
		{"orderbook1000", "/v1/orderbook/events?tokenId=" + url.QueryEscape(e.sim.Markets()[0].Tokens[0]) + "&limit=1000&to=" + strconv.FormatInt(settled*1000, 10)},
	}
	fast := e.srv.FastHandler()
	for _, p := range pages {
		for _, gz := range []bool{false, true} {
			ctx := fastRequest(p.path, gz)
			fast(ctx) // the miss (identity), or the first gzip hit, which makes the gzip form
			ctx.Response.Reset()
			fast(ctx)
			if got := string(ctx.Response.Header.Peek("X-Cache")); got != "HIT" {
				t.Fatalf("%s gzip=%v: X-Cache %q, status %d", p.name, gz, got, ctx.Response.StatusCode())
			}
			n := testing.AllocsPerRun(200, func() {
				ctx.Response.Reset()
				fast(ctx)
			})
			if n != 0 {
				t.Errorf("%s gzip=%v: %.1f allocations per hit, want 0", p.name, gz, n)
			}
		}
	}
}
