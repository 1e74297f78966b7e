package proxy_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
	"tradergate/proxy/config"

	"golang.org/x/net/http2"
)

// rawExchange sends req on a new connection and reads the whole answer
// (the edge closes the connection after a refusal), within 5 seconds.
func rawExchange(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// headerBlock splits a raw answer into its status line and its fields by
// name as sent (case kept).
func headerBlock(t *testing.T, answer string) (status string, fields map[string]string, body string) {
	t.Helper()
	head, body, ok := strings.Cut(answer, "\r\n\r\n")
	if !ok {
		t.Fatalf("no header block in %.200q", answer)
	}
	lines := strings.Split(head, "\r\n")
	fields = map[string]string{}
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		fields[name] = strings.TrimSpace(value)
	}
	return lines[0], fields, body
}

// What the fasthttp front refuses before the chain runs (a header block
// over server.max_header_bytes, a bare LF, another HTTP version) is
// answered like every 4XX (docs/openapi.json): the rate limit fields,
// spelled as the document spells them, the JSON envelope, and on a
// legacy path variant B with Deprecation, Sunset and the successor Link.
func TestFrontRefusalsFollowTheContract(t *testing.T) {
	e := newEdge(t, withLegacy(), withConfig(func(c *config.Config) {
		// Longer than the test waits: a refusal must not wait for it.
		c.Server.ReadHeaderTimeout, c.Server.ReadTimeout = time.Minute, time.Minute
	}))
	tx := e.sim.TradeTxs()[0]
	auth := "Authorization: Bearer " + keyAll + "\r\n"
	pad := "X-Pad: " + strings.Repeat("a", 20<<10) + "\r\n"
	for _, tc := range []struct {
		name, req, status string
		legacy            bool
	}{
		{"431", "GET /v1/tx/" + tx + " HTTP/1.1\r\nHost: x\r\n" + auth + pad + "\r\n", "431", false},
		{"legacy 431", "GET /open-api/v1/tx/" + tx + " HTTP/1.1\r\nHost: x\r\n" + auth + pad + "\r\n", "431", true},
		{"request line over the buffer", "GET /v1/tx/" + tx + "?q=" + strings.Repeat("a", 20<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", "414", false},
		{"bare LF", "GET /v1/tx/" + tx + " HTTP/1.1\nHost: x\n" + strings.TrimSuffix(auth, "\r\n") + "\n\n", "400", false},
		{"legacy bare LF", "GET /open-api/v1/tx/" + tx + " HTTP/1.1\nHost: x\n\n", "400", true},
		{"HTTP/9.9", "GET /v1/tx/" + tx + " HTTP/9.9\r\nHost: x\r\n" + auth + "\r\n", "505", false},
		{"HTTP/2.0", "GET /v1/tx/" + tx + " HTTP/2.0\r\nHost: x\r\n" + auth + "\r\n", "505", false},
		{"legacy HTTP/2.0", "GET /open-api/v1/tx/" + tx + " HTTP/2.0\r\nHost: x\r\n" + auth + "\r\n", "505", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := rawExchange(t, e.addr, tc.req)
			status, h, body := headerBlock(t, answer)
			if !strings.HasPrefix(status, "HTTP/1.1 "+tc.status+" ") {
				t.Fatalf("status line %q, want %s; %.300q", status, tc.status, answer)
			}
			for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit", "X-Request-Id"} {
				if h[name] == "" {
					t.Errorf("no %s (as spelled) in %v", name, h)
				}
			}
			if h["RateLimit-Policy"] != "" && !strings.Contains(h["RateLimit-Policy"], "anonymous") {
				t.Errorf("charged to %q, want the client address's anonymous allowance", h["RateLimit-Policy"])
			}
			if h["Content-Type"] != "application/json" || h["Connection"] != "close" {
				t.Errorf("Content-Type %q, Connection %q", h["Content-Type"], h["Connection"])
			}
			if tc.legacy {
				if !strings.HasPrefix(body, `{"success":false,"code":"`+tc.status+`"`) {
					t.Errorf("legacy body %q, want variant B", body)
				}
				if h["Deprecation"] == "" || h["Sunset"] == "" ||
					!strings.Contains(h["Link"], `</v1/tx/`+tx+`>; rel="successor-version"`) {
					t.Errorf("legacy fields: Deprecation %q, Sunset %q, Link %q", h["Deprecation"], h["Sunset"], h["Link"])
				}
			} else if !strings.Contains(body, `"status_code":"0"`) {
				t.Errorf("body %q, want variant A", body)
			}
		})
	}
}

// A URL over 8 KiB is 414 with or without a key (docs/CONTRACT.md
// "Errors"): the length is checked before a missing key's 401.
func TestLongURLIs414BeforeAuth(t *testing.T) {
	e := newEdge(t)
	long := "/v1/tx/" + e.sim.TradeTxs()[0] + "?pad=" + strings.Repeat("a", 9000)
	for _, key := range []string{"", "Bearer not-a-key", "Bearer " + keyAll} {
		resp, body := e.do(http.MethodGet, long, "Authorization", key)
		failure(t, resp, body, 414, "URI too long")
	}
	resp, body := e.do(http.MethodGet, "/v1/nowhere?pad="+strings.Repeat("a", 9000))
	failure(t, resp, body, 414, "URI too long")
}

// /v1/openapi.json follows the rules of every /v1 path, and is charged to
// the client's address whatever key it carries (docs/CONTRACT.md "Routes").
func TestOpenAPIDocumentFollowsTheRules(t *testing.T) {
	e := newEdge(t, withLimitedKey(1, time.Hour))
	for _, tc := range []struct {
		name, target, msg string
		status            int
		body              bool
	}{
		{"URI over 8 KiB", "/v1/openapi.json?pad=" + strings.Repeat("a", 9000), "URI too long", 414, false},
		{"semicolon", "/v1/openapi.json?a=1;b=2", "Invalid query string", 400, false},
		{"broken escape", "/v1/openapi.json?a=%zz", "Invalid query string", 400, false},
		{"body", "/v1/openapi.json", "Request body not allowed", 400, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rd io.Reader
			if tc.body {
				rd = strings.NewReader("a body")
			}
			req, _ := http.NewRequest(http.MethodGet, e.front.URL+tc.target, rd)
			resp, err := e.front.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			failure(t, resp, body, tc.status, tc.msg)
		})
	}
	// The limited key has one request: the document, asked for with it,
	// must not spend it.
	resp, _ := e.do(http.MethodGet, "/v1/openapi.json", "Authorization", "Bearer "+keyLimited)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("RateLimit-Policy"), "anonymous") {
		t.Fatalf("openapi.json with a key: %d, policy %q; want 200 charged to the address", resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
	resp, _ = e.do(http.MethodGet, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer "+keyLimited)
	if resp.StatusCode != 200 {
		t.Fatalf("the key's one request after the document: %d, want 200", resp.StatusCode)
	}
}

// Every answer on a legacy path links the /v1 request serving the same
// data (docs/CONTRACT.md "Legacy paths"): refusals included.
func TestLegacyRefusalsLinkTheSuccessor(t *testing.T) {
	e := newEdge(t, withLegacy(), withLimitedKey(1, time.Hour))
	tx := e.sim.TradeTxs()[0]
	w := e.sim.Wallets()[0]
	for _, tc := range []struct {
		name, path, key, successor string
		status                     int
	}{
		{"400", "/open-api/v1/trader/0x12/activity?limit=5", keyAll, "/v1/trader/0x12/activity", 400},
		{"403", "/open-api/v1/trader/" + w + "/activity", keyTxOnly, "/v1/trader/" + w + "/activity", 403},
		{"401", "/open-api/v1/tx/" + tx, "not-a-key", "/v1/tx/" + tx, 401},
		{"404", "/open-api/v1/nowhere", keyAll, "/v1/nowhere", 404},
		{"allowance", "/open-api/v1/tx/" + tx, keyLimited, "/v1/tx/" + tx, 200},
		{"429", "/open-api/v1/tx/" + tx, keyLimited, "/v1/tx/" + tx, 429},
		{"escaped", "/open-api/v1/trader/%3Cx%3E\"/activity", keyAll, "/v1/trader/%3Cx%3E%22/activity", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.do(http.MethodGet, tc.path, "Authorization", "Bearer "+tc.key)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			want := "<" + tc.successor + `>; rel="successor-version"`
			if link := resp.Header.Get("Link"); !strings.HasPrefix(link, want) || !strings.Contains(link, `rel="deprecation"`) {
				t.Errorf("Link %q, want it to start with %q and keep the guide", link, want)
			}
		})
	}
}

// A TLS client offering only ALPN http/1.0 is served by the HTTP/1.1
// front, not refused at the handshake.
func TestTLSServesALPNHTTP10(t *testing.T) {
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	te.waitHTTPS(t, httpsClient(t, first.Pool(), edgeName))
	c, err := tls.Dial("tcp", te.addr, &tls.Config{RootCAs: first.Pool(), ServerName: edgeName, NextProtos: []string{"http/1.0"}})
	if err != nil {
		t.Fatalf("handshake offering http/1.0: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.0" {
		t.Errorf("negotiated %q, want http/1.0", p)
	}
	_, _ = io.WriteString(c, "GET /v1/tx/"+te.sim.TradeTxs()[0]+" HTTP/1.0\r\nHost: "+edgeName+"\r\nAuthorization: Bearer "+keyAll+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// Over HTTP/2 a header list past server.max_header_bytes is answered by
// the edge on its own stream, a JSON 431 with the rate limit fields, and
// the connection goes on serving: x/net's own limit, which would answer
// an HTML 431 or end the connection, is set well above it.
func TestHTTP2HeaderLimitAnswersOneStream(t *testing.T) {
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	te.waitHTTPS(t, httpsClient(t, first.Pool(), edgeName))
	tr := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: first.Pool(), ServerName: edgeName, NextProtos: []string{"h2"}}}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var conns int
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if !info.Reused {
			conns++
		}
	}}
	get := func(pad int) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, te.url("/v1/tx/"+te.sim.TradeTxs()[0]), nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		if pad > 0 {
			req.Header.Set("X-Pad", strings.Repeat("a", pad))
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get(0); resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("first request: %s %d %.200s", resp.Proto, resp.StatusCode, body)
	}
	resp, body := get(20 << 10)
	if resp.StatusCode != 431 || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(body, `"message":"Request header fields too large"`) {
		t.Fatalf("a header list over the limit: %d %q %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit-Policy", "X-Request-Id"} {
		if resp.Header.Get(name) == "" {
			t.Errorf("the 431 carries no %s", name)
		}
	}
	if resp, body := get(0); resp.StatusCode != 200 {
		t.Fatalf("the request after the 431: %d %.200s", resp.StatusCode, body)
	}
	if conns != 1 {
		t.Errorf("%d connections, want 1: the 431 ended the connection", conns)
	}
}
