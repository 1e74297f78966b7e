package proxy_test

import "testing"

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
	fast := e.srv.FastHandler()
	for _, p := range hitPages(e) {
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
