package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"tradergate/proxy"
)

// discard is a ResponseWriter that keeps nothing, so a benchmark measures
// the edge and not a recorder.
type discard struct {
	h http.Header
	n int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// benchEdge is an edge whose benchmark key is never refused and whose
// shield lets every miss through at once.
func benchEdge(b *testing.B) *edge {
	return newEdge(b, withLimitedKey(1<<50, time.Hour), withConfig(func(c *proxy.Config) {
		c.Upstream.PerSecond = 1e9
		c.Upstream.MaxConcurrent = 1 << 20
	}))
}

func benchRequest(e *edge, path string, gzip bool) *http.Request {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+keyLimited)
	if gzip {
		r.Header.Set("Accept-Encoding", "gzip")
	}
	return r
}

// BenchmarkHit serves cached pages through the whole handler chain: auth,
// limiter (memory), routing, validation, cache lookup, headers.
func BenchmarkHit(b *testing.B) {
	e := benchEdge(b)
	// Settled ranges (an hour back, well past the 5 minute settle window),
	// as the load harness uses: the pages are immutable, so a long run
	// never sees them go stale (a fresh page's TTL is a second).
	settled := time.Now().Unix() - 3600
	pages := []struct{ name, path string }{
		{"tx", "/v1/tx/" + e.sim.TradeTxs()[0]},
		{"activity20", "/v1/trader/" + e.sim.Wallets()[0] + "/activity?toTimestamp=" + strconv.FormatInt(settled, 10)},
		{"orderbook1000", "/v1/orderbook/events?tokenId=" + url.QueryEscape(e.sim.Markets()[0].Tokens[0]) + "&limit=1000&to=" + strconv.FormatInt(settled*1000, 10)},
	}
	h := e.srv.Handler()
	for _, p := range pages {
		for _, gz := range []bool{false, true} {
			name := p.name + "/identity"
			if gz {
				name = p.name + "/gzip"
			}
			b.Run(name, func(b *testing.B) {
				r := benchRequest(e, p.path, gz)
				w := &discard{h: http.Header{}}
				h.ServeHTTP(w, r) // fills the cache (the identity run did for gzip)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					clear(w.h)
					w.n = 0
					h.ServeHTTP(w, r)
				}
				b.StopTimer()
				if w.h.Get("X-Cache") != "HIT" {
					b.Fatalf("X-Cache %q", w.h.Get("X-Cache"))
				}
				b.SetBytes(int64(w.n))
			})
		}
	}
}

// BenchmarkMiss makes every request a new page: the legacy call over
// loopback (legacysim answering), the rewrite, the insert with its gzip copy.
func BenchmarkMiss(b *testing.B) {
	e := benchEdge(b)
	token := url.QueryEscape(e.sim.Markets()[0].Tokens[0])
	pages := []struct{ name, path string }{
		{"tx", ""},
		{"activity20", "/v1/trader/" + e.sim.Wallets()[0] + "/activity?toTimestamp="},
		{"orderbook1000", "/v1/orderbook/events?tokenId=" + token + "&limit=1000&from="},
	}
	h := e.srv.Handler()
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				path := p.path + strconv.Itoa(4000000000-i)
				if p.name == "tx" {
					// Distinct hashes: unknown ones are null lookups, still
					// one legacy call and one rewrite each.
					path = fmt.Sprintf("/v1/tx/0x%064x", i)
				}
				clear(w.h)
				w.n = 0
				h.ServeHTTP(w, benchRequest(e, path, false))
				if w.h.Get("X-Cache") != "MISS" {
					b.Fatalf("X-Cache %q for %s", w.h.Get("X-Cache"), path)
				}
			}
		})
	}
}
