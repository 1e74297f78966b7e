package proxy_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"tradergate/internal/testkit"
)

// The TLS listener serves both fronts: a client that negotiates h2 gets
// net/http's HTTP/2 server, one that offers only http/1.1 gets fasthttp,
// and both get the same answer, byte for byte, with the same headers.
func TestTLSServesHTTP1AndHTTP2(t *testing.T) {
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	h2 := httpsClient(t, first.Pool(), edgeName)
	te.waitHTTPS(t, h2)
	h1tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: first.Pool(), ServerName: edgeName, NextProtos: []string{"http/1.1"}}}
	t.Cleanup(h1tr.CloseIdleConnections)
	h1 := &http.Client{Transport: h1tr, Timeout: 10 * time.Second}

	path := "/v1/tx/" + te.sim.TradeTxs()[0]
	get := func(c *http.Client) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, te.url(path), nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	r2, b2 := get(h2)
	r1, b1 := get(h1)
	if r2.ProtoMajor != 2 || r1.ProtoMajor != 1 {
		t.Fatalf("protocols %s and %s, want HTTP/2 and HTTP/1.1", r2.Proto, r1.Proto)
	}
	if r1.StatusCode != 200 || r2.StatusCode != 200 || !bytes.Equal(b1, b2) {
		t.Fatalf("answers differ: %d %.80s / %d %.80s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	for _, h := range []string{"Content-Type", "Etag", "Vary", "X-Ratelimit-Limit", "Ratelimit-Policy"} {
		if r1.Header.Get(h) != r2.Header.Get(h) || r1.Header.Get(h) == "" {
			t.Errorf("%s: HTTP/1.1 %q, HTTP/2 %q", h, r1.Header.Get(h), r2.Header.Get(h))
		}
	}
	if r1.Header.Get("X-Cache") != "HIT" || r1.Header.Get("Server") != "" {
		t.Errorf("HTTP/1.1: X-Cache %q, Server %q", r1.Header.Get("X-Cache"), r1.Header.Get("Server"))
	}
}

// fasthttp reuses a request's memory once its handler returns. A page's
// background refresh outlives the request that started it and keeps that
// request's canonical query and id; this test holds such a reference on
// purpose: it lets a stale hit start a refresh, holds the refresh's first
// legacy call, sends a different request on the same RequestCtx (so
// fasthttp writes over the first one's bytes), then fails the held call
// with a 503, so that the retry builds its request again from what the
// refresh kept. The retry must carry the first request's path and id;
// under -race, any read of the reused memory is a reported race. The
// front's exchanges are pooled too: the stale hit's exchange goes back to
// the pool while its refresh runs, and the other request takes it and
// writes over its buffers, so the retry must read the refresh's own
// copies (exchange.handOn, route.Request.Own); under the poison tag the
// pool overwrites them first (poison_test.go leaves the copies out).
func TestFastFrontKeepsNothingOfTheRequest(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	var (
		mu    sync.Mutex
		gate  = make(chan struct{})
		held  bool
		calls []string
	)
	e := newEdge(t, withLimitedKey(1<<40, time.Hour), withClock(clk.Now), withUpstream(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			wait := held
			held = false // only the refresh's first call is held
			calls = append(calls, r.URL.Path+"?"+r.URL.RawQuery+" id="+r.Header.Get("X-Request-Id"))
			mu.Unlock()
			if wait {
				<-gate
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"success":false,"code":"503","message":"busy","data":null}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	wallet := e.sim.Wallets()[0]
	path := "/v1/trader/" + wallet + "/activity?limit=7"
	fast := e.srv.FastHandler()
	ctx := &fasthttp.RequestCtx{}
	readFastRequest(ctx, path, "X-Request-Id: first-request-0001")
	fast(ctx)
	if got := string(ctx.Response.Header.Peek("X-Cache")); got != "MISS" {
		t.Fatalf("first answer: X-Cache %q", got)
	}

	// Past the fresh TTL, inside stale-while-revalidate: served stale, and
	// a refresh starts in the background and waits at the gate.
	clk.Advance(1500 * time.Millisecond)
	mu.Lock()
	held = true
	mu.Unlock()
	ctx.Response.Reset()
	fast(ctx)
	if got := string(ctx.Response.Header.Peek("X-Cache")); got != "STALE" {
		t.Fatalf("second answer: X-Cache %q", got)
	}
	testkit.Eventually(t, "the refresh to reach the legacy host", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == 2
	})

	// The same RequestCtx, another request of the same length: fasthttp
	// writes its bytes where the first request's were.
	other := "/v1/trader/" + strings.Repeat("z", len(wallet)) + "/activity?limit=9"
	ctx.Response.Reset()
	readFastRequest(ctx, other, "X-Request-Id: other-request-0002")
	fast(ctx)
	if ctx.Response.StatusCode() != 400 {
		t.Fatalf("other request: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	close(gate)
	testkit.Eventually(t, "the refresh's retry", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == 3
	})
	testkit.Eventually(t, "the refresh to be stored", func() bool { return e.srv.CacheStats().Entries == 1 && e.srv.CacheStats().Fetches == 2 })

	mu.Lock()
	defer mu.Unlock()
	want := "/open-api/v1/trader/" + wallet + "/activity?limit=7 id=first-request-0001"
	if len(calls) != 3 || calls[0] != want || calls[1] != want || calls[2] != want {
		t.Errorf("legacy calls %q, want three of %q", calls, want)
	}
}
