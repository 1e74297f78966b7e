package proxy_test

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"tradergate/proxy/config"

	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
func benchEdge(b *testing.B) *edge { return benchEdgeWith(b) }

func benchEdgeWith(tb testing.TB, opts ...edgeOption) *edge {
	return newEdge(tb, append([]edgeOption{withLimitedKey(1<<50, time.Hour), withConfig(func(c *config.Config) {
		c.Upstream.PerSecond = 1e9
		c.Upstream.MaxConcurrent = 1 << 20
	})}, opts...)...)
}

func benchRequest(e *edge, path string, gzip bool) *http.Request {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+keyLimited)
	if gzip {
		r.Header.Set("Accept-Encoding", "gzip")
	}
	return r
}

// hitPage is a page the hit benchmark and test ask, by name.
type hitPage struct{ name, path string }

// hitPages are a transaction, a 20-item page and a 1,000-event order book
// page of e's legacy host, over settled ranges (an hour back, well past
// the 5 minute settle window), as the load harness uses: the pages are
// immutable, so a long run never sees them go stale (a fresh page's TTL
// is a second).
func hitPages(e *edge) []hitPage {
	settled := time.Now().Unix() - 3600
	return []hitPage{
		{"tx", "/v1/tx/" + e.sim.TradeTxs()[0]},
		{"activity20", "/v1/trader/" + e.sim.Wallets()[0] + "/activity?toTimestamp=" + strconv.FormatInt(settled, 10)},
		{"orderbook1000", "/v1/orderbook/events?tokenId=" + url.QueryEscape(e.sim.Markets()[0].Tokens[0]) + "&limit=1000&to=" + strconv.FormatInt(settled*1000, 10)},
	}
}

// BenchmarkHit serves cached pages through the whole chain (auth, limiter
// in memory, routing, validation, cache lookup, headers), on each front:
// "fast" is the HTTP/1.1 front (fasthttp, driven in-process with a
// RequestCtx), "std" the net/http one HTTP/2 uses.
func BenchmarkHit(b *testing.B) {
	e := benchEdge(b)
	pages := hitPages(e)
	// The same edge with tracing on at a 1% ratio (spans to a discarding
	// exporter): what tracing costs a hit. Tracing off is "fast".
	traced := benchEdgeWith(b, func(s *edgeSetup) {
		s.spans = sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())
	}, withConfig(func(c *config.Config) { c.Tracing.SamplingRatio = 0.01 })).srv.FastHandler()
	fast, std := e.srv.FastHandler(), e.srv.Handler()
	for _, p := range pages {
		for _, gz := range []bool{false, true} {
			enc := "identity"
			if gz {
				enc = "gzip"
			}
			b.Run("fast/"+p.name+"/"+enc, func(b *testing.B) {
				ctx := fastRequest(p.path, gz)
				fast(ctx) // fills the cache (the identity run did for gzip)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					ctx.Response.Reset()
					fast(ctx)
				}
				b.StopTimer()
				if got := string(ctx.Response.Header.Peek("X-Cache")); got != "HIT" {
					b.Fatalf("X-Cache %q", got)
				}
				b.SetBytes(int64(len(ctx.Response.Body())))
			})
			b.Run("fast-traced1pct/"+p.name+"/"+enc, func(b *testing.B) {
				ctx := fastRequest(p.path, gz)
				traced(ctx)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					ctx.Response.Reset()
					traced(ctx)
				}
				b.StopTimer()
				if got := string(ctx.Response.Header.Peek("X-Cache")); got != "HIT" {
					b.Fatalf("X-Cache %q", got)
				}
			})
			b.Run("std/"+p.name+"/"+enc, func(b *testing.B) {
				r := benchRequest(e, p.path, gz)
				w := &discard{h: http.Header{}}
				std.ServeHTTP(w, r)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					clear(w.h)
					w.n = 0
					std.ServeHTTP(w, r)
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

// fastRequest is a GET of path as the HTTP/1.1 front receives it, with
// the benchmark key and, when gzip, Accept-Encoding: gzip.
func fastRequest(path string, gzip bool) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	if gzip {
		readFastRequest(ctx, path, "Accept-Encoding: gzip")
	} else {
		readFastRequest(ctx, path)
	}
	return ctx
}

// readFastRequest makes ctx a GET of path with the benchmark key and the
// given header lines, parsed from the bytes a client sends: the front
// reads the raw header block, which fasthttp keeps only for a request it
// parsed. A RequestCtx read again has its bytes written over, as fasthttp
// does with a connection's next request.
func readFastRequest(ctx *fasthttp.RequestCtx, path string, fields ...string) {
	raw := "GET " + path + " HTTP/1.1\r\n" + benchFields
	for _, f := range fields {
		raw += f + "\r\n"
	}
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw + "\r\n"))); err != nil {
		panic("readFastRequest: " + err.Error())
	}
	// Init copies req into ctx.Request, over the bytes of the last one.
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
}

// fastRequests makes the GETs of a benchmark's loop in one RequestCtx, as
// fasthttp's server serves a connection's requests in one: each parsed
// from the bytes a client sends into the buffers of the last, so that the
// loop's allocations are the edge's own. A fresh RequestCtx and request
// per miss made 65 of the 146 allocations a transaction miss counted
// (docs/BENCHMARKS.md), which the front's pooled contexts never make.
type fastRequests struct {
	ctx  fasthttp.RequestCtx
	conn net.Conn // Init's stand-in connection, for the remote address
	raw  []byte
	src  bytes.Reader
	br   *bufio.Reader
}

func newFastRequests() *fastRequests {
	f := &fastRequests{}
	readFastRequest(&f.ctx, "/")
	f.conn = f.ctx.Conn()
	f.br = bufio.NewReader(&f.src)
	return f
}

// benchFields are the header fields of every benchmark request: the host
// and the benchmark key.
const benchFields = "Host: edge.test\r\nAuthorization: Bearer " + keyLimited + "\r\n"

// get makes the context a GET of path, as a connection's next request.
func (f *fastRequests) get(path []byte) *fasthttp.RequestCtx {
	f.raw = append(append(f.raw[:0], "GET "...), path...)
	f.raw = append(append(f.raw, " HTTP/1.1\r\n"+benchFields...), "\r\n"...)
	f.src.Reset(f.raw)
	f.br.Reset(&f.src)
	f.ctx.Init2(f.conn, discardLogger{}, true) // the request's own time and id
	f.ctx.Request.Reset()
	f.ctx.Response.Reset()
	if err := f.ctx.Request.Read(f.br); err != nil {
		panic("fastRequests: " + err.Error())
	}
	return &f.ctx
}

// txPath appends the transaction path of a hash that is n in hex, padded
// to the 64 digits a hash has.
func txPath(dst []byte, n uint64) []byte {
	var digits [16]byte
	hex := strconv.AppendUint(digits[:0], n, 16)
	dst = append(dst, "/v1/tx/0x"...)
	for range 64 - len(hex) {
		dst = append(dst, '0')
	}
	return append(dst, hex...)
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// BenchmarkMiss makes every request a new page: the legacy call over
// loopback (legacysim answering), the rewrite, the insert.
func BenchmarkMiss(b *testing.B) {
	e := benchEdge(b)
	token := url.QueryEscape(e.sim.Markets()[0].Tokens[0])
	pages := []struct{ name, path string }{
		{"tx", ""},
		{"activity20", "/v1/trader/" + e.sim.Wallets()[0] + "/activity?toTimestamp="},
		{"orderbook1000", "/v1/orderbook/events?tokenId=" + token + "&limit=1000&from="},
	}
	fast := e.srv.FastHandler()
	// One count for every run of every page: the framework may run a
	// sub-benchmark more than once on this edge (-count), and a key seen
	// before would be a hit.
	i := 0
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			reqs := newFastRequests()
			var path []byte
			b.ReportAllocs()
			for b.Loop() {
				i++
				if p.name == "tx" {
					// Distinct hashes: unknown ones are null lookups, still
					// one legacy call and one rewrite each.
					path = txPath(path[:0], uint64(i))
				} else {
					path = strconv.AppendInt(append(path[:0], p.path...), int64(4000000000-i), 10)
				}
				ctx := reqs.get(path)
				fast(ctx)
				if got := string(ctx.Response.Header.Peek("X-Cache")); got != "MISS" {
					b.Fatalf("X-Cache %q for %s", got, path)
				}
			}
		})
	}
}
