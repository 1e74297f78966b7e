package main

import (
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tradergate/bench/fixture"
	"tradergate/internal/testkit"
)

// fasthttp leaves two goroutines of its own behind
// (testkit.FasthttpGoroutines).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.FasthttpGoroutines...) }

// TestEnginesServeTheSameAnswer runs both engines on loopback and checks
// that, with -headers, each sends the page's bytes and tradergate's
// headers, and that the two differ in nothing but the Date.
func TestEnginesServeTheSameAnswer(t *testing.T) {
	src := fixture.Page{
		Target: "/v1/tx/0xabc?x=1", ContentType: "application/json",
		Identity: []byte(`{"data":{"id":"0xabc"}}`), Gzip: []byte("\x1f\x8bgz"),
		Header:     map[string][]string{"X-Cache": {"HIT"}, "X-Ratelimit-Remaining": {"99"}, "Etag": {`"e1"`}},
		GzipHeader: map[string][]string{"X-Cache": {"HIT"}, "X-Ratelimit-Remaining": {"99"}, "Etag": {`"e1-gz"`}},
	}
	type answer struct {
		status int
		header http.Header
		body   string
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(t *testing.T, addr, target string, gzip bool) answer {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+target, nil)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		resp.Header.Del("Date")
		return answer{resp.StatusCode, resp.Header, string(body)}
	}

	got := map[string][]answer{}
	for _, engine := range []string{"nethttp", "fasthttp"} {
		t.Run(engine, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			pages := map[string]*page{src.Target: newPage(&src, true)}
			go func() { done <- engines[engine](ctx, ln, pages) }()
			defer func() {
				cancel()
				client.CloseIdleConnections()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			addr := ln.Addr().String()
			id, gz := get(t, addr, src.Target, false), get(t, addr, src.Target, true)
			if id.status != 200 || id.body != string(src.Identity) || id.header.Get("Content-Encoding") != "" || id.header.Get("Etag") != `"e1"` {
				t.Fatalf("identity: %+v", id)
			}
			if gz.status != 200 || gz.body != string(src.Gzip) || gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("Etag") != `"e1-gz"` {
				t.Fatalf("gzip: %+v", gz)
			}
			for _, a := range []answer{id, gz} {
				if a.header.Get("Content-Type") != "application/json" || a.header.Get("Vary") != "Accept-Encoding" || a.header.Get("X-Ratelimit-Remaining") != "99" || a.header.Get("Server") != "" {
					t.Fatalf("headers %v", a.header)
				}
			}
			if nf := get(t, addr, "/v1/other", false); nf.status != 404 {
				t.Fatalf("unknown target: %d", nf.status)
			}
			got[engine] = []answer{id, gz}
		})
	}
	if len(got) == 2 {
		for i := range got["nethttp"] {
			n, f := got["nethttp"][i].header, got["fasthttp"][i].header
			keys := func(h http.Header) string { return strings.Join(slices.Sorted(maps.Keys(h)), ",") }
			if keys(n) != keys(f) {
				t.Errorf("answer %d: net/http sends %s, fasthttp %s", i, keys(n), keys(f))
			}
		}
	}
}

func TestHeadersOff(t *testing.T) {
	p := newPage(&fixture.Page{Identity: []byte("x"), Header: map[string][]string{"X-Cache": {"HIT"}}}, false)
	a, gz := p.choose(true)
	if gz || a.extra != nil || a.fields != nil || a.length != "1" {
		t.Fatalf("without -headers: %+v gzip %v", a, gz)
	}
}

// TestProfileHandler: -pprof serves a CPU profile the benchmark can read
// with go tool pprof (gzipped protobuf), and nothing else.
func TestProfileHandler(t *testing.T) {
	srv := httptest.NewServer(profileHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		t.Fatalf("profile: %d, %d bytes starting %q", resp.StatusCode, len(body), body[:min(len(body), 8)])
	}
	resp, err = http.Get(srv.URL + "/debug/pprof/heap")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/heap: %d, want 404", resp.StatusCode)
	}
}
