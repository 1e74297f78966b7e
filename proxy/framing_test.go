package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"tradergate/docs"
	"tradergate/internal/testkit"
)

// What the HTTP parser refuses is answered in the JSON envelope and ends
// the connection: a request sent after it on the same connection is never
// served, so a load balancer in front and the edge cannot read one byte
// stream as different requests.
func TestStrictFraming(t *testing.T) {
	e := newEdge(t)
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	auth := "Authorization: Bearer " + keyAll + "\r\n"
	next := "GET " + tx + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"
	for _, tc := range []struct {
		name, req string
		status    string
	}{
		{"bare CR in a header", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n" + auth + "\r\n", "400"},
		{"NUL in a header", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n" + auth + "\r\n", "400"},
		{"no Host", "GET " + tx + " HTTP/1.1\r\n" + auth + "\r\n", "400"},
		{"two Hosts", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nHost: y\r\n" + auth + "\r\n", "400"},
		{"HTTP/0.9", "GET " + tx + "\r\n\r\n", "400"},
		{"Content-Length and Transfer-Encoding", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n" + auth + "\r\n0\r\n\r\n", "400"},
		{"two Content-Lengths", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n" + auth + "\r\n", "400"},
		{"obs-fold", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n" + auth + "\r\n", "400"},
		{"bare LF", "GET " + tx + " HTTP/1.1\nHost: x\n" + strings.TrimSuffix(auth, "\r\n") + "\n\n", "400"},
		{"space before the colon", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nX-A : b\r\n" + auth + "\r\n", "400"},
		{"headers too large", "GET " + tx + " HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 20000) + "\r\n" + auth + "\r\n", "431"},
		{"URL too long", "GET " + tx + "?q=" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", "414"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte(tc.req + next))
			b, _ := io.ReadAll(c) // to the end: the edge must close
			got := string(b)
			if !strings.HasPrefix(got, "HTTP/1.1 "+tc.status+" ") {
				t.Fatalf("answer %.60q, want %s", got, tc.status)
			}
			if !strings.Contains(got, `"status_code":"0"`) || !strings.Contains(got, "Content-Type: application/json") {
				t.Errorf("not a JSON failure: %.300q", got)
			}
			if n := strings.Count(got, "HTTP/1.1 "); n != 1 {
				t.Errorf("%d answers on the connection: the request after a framing error was served", n)
			}
		})
	}
}

// Routes match the raw path: an escaped slash is part of a segment, never
// a separator, so what a firewall in front reads is what the edge routes.
func TestRawPathRouting(t *testing.T) {
	e := newEdge(t)
	w := e.sim.Wallets()[0]
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/trader/" + w + "%2Factivity", 404},
		{"/v1/trader%2F" + w + "/activity", 404},
		{"/v1/tx%2F" + e.sim.TradeTxs()[0], 404},
		{"/v1/trader/" + w + "/activity", 200},
	} {
		resp, _ := e.get(tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
	}
}

// The HTTP/1.1 front writes header names as the edge spelled them,
// without fasthttp's rewriting of their case: a name docs/openapi.json
// names goes out as the document spells it (X-RateLimit-Limit, ETag,
// WWW-Authenticate), every other in canonical form, the form net/http's
// textproto gives. The answers below carry every field the edge writes:
// a gzip hit (cache and encoding fields), a 401, a 405, a 429 and a
// legacy path (deprecation fields).
func TestHeaderNamesCanonical(t *testing.T) {
	contract := contractHeaderNames(t)
	e := newEdge(t, withLegacy(), withLimitedKey(1, time.Hour))
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	activity := "/v1/trader/" + e.sim.Wallets()[0] + "/activity"
	for _, tc := range []struct{ name, req string }{
		{"miss", "GET " + tx + " HTTP/1.1\r\nAuthorization: Bearer " + keyAll + "\r\nAccept-Encoding: gzip\r\n"},
		{"gzip hit", "GET " + tx + " HTTP/1.1\r\nAuthorization: Bearer " + keyAll + "\r\nAccept-Encoding: gzip\r\n"},
		{"no key", "GET " + tx + " HTTP/1.1\r\n"},
		{"method", "DELETE " + tx + " HTTP/1.1\r\nAuthorization: Bearer " + keyAll + "\r\n"},
		{"allowed", "GET " + tx + " HTTP/1.1\r\nAuthorization: Bearer " + keyLimited + "\r\n"},
		{"limited", "GET " + tx + " HTTP/1.1\r\nAuthorization: Bearer " + keyLimited + "\r\n"},
		{"legacy", "GET /open-api" + activity + "?limit=2 HTTP/1.1\r\nAuthorization: Bearer " + keyAll + "\r\n"},
	} {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, tc.req+"Host: edge.test\r\nX-Request-Id: canonical-names-1\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(c)
		c.Close()
		head, _, ok := strings.Cut(string(b), "\r\n\r\n")
		if !ok {
			t.Fatalf("%s: no header block in %.200q", tc.name, b)
		}
		lines := strings.Split(head, "\r\n")
		t.Logf("%s: %s", tc.name, lines[0])
		if len(lines) < 4 {
			t.Errorf("%s: only %q", tc.name, lines)
		}
		for _, l := range lines[1:] {
			name, _, _ := strings.Cut(l, ":")
			want, ok := contract[strings.ToLower(name)]
			if !ok {
				want = textproto.CanonicalMIMEHeaderKey(name)
			}
			if name != want {
				t.Errorf("%s: header %q, want %q", tc.name, name, want)
			}
		}
	}
}

// contractHeaderNames is every response header name docs/openapi.json
// gives, by its lower case.
func contractHeaderNames(t *testing.T) map[string]string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(docs.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if h, ok := v["headers"].(map[string]any); ok {
				for name, spec := range h {
					// A component's key may name a variant
					// (Retry-After-Optional); the field's name is the key
					// of a response's headers, which refer to it.
					if _, ref := spec.(map[string]any)["$ref"]; ref || !strings.Contains(name, "-Optional") && !strings.HasSuffix(name, "-Legacy") && !strings.HasSuffix(name, "-No-Store") {
						names[strings.ToLower(name)] = name
					}
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if names["x-ratelimit-limit"] != "X-RateLimit-Limit" {
		t.Fatalf("docs/openapi.json names no X-RateLimit-Limit: %v", names)
	}
	return names
}

// A refused request's answer is the client's to read, however much of the
// request the client is still sending: the edge reads (and drops) what
// follows before it closes, so that its close is a FIN, not a reset that
// would fail the client's next write and could drop the answer (a Go
// client then reports "broken pipe" instead of the 431). The client here
// sends a header block past server.max_header_bytes, reads the start of
// the 431, then sends 256 KiB more: every write must succeed, and the
// answer end in a clean EOF. The edge counts the close as the client's.
func TestRefusedRequestLingers(t *testing.T) {
	e := newEdge(t)
	lingered := func() float64 {
		return seriesValue(t, e.srv.Registry(), "tradergate_client_lingering_closes_total", "end", "client_closed")
	}
	before := lingered()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := "GET /v1/tx/" + e.sim.TradeTxs()[0] + " HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 20000)
	if _, err := c.Write([]byte(start)); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, len("HTTP/1.1 431 "))
	if _, err := io.ReadFull(c, head); err != nil || string(head) != "HTTP/1.1 431 " {
		t.Fatalf("answer %q, %v; want a 431", head, err)
	}
	// The edge closes right after its answer: give it the time to.
	time.Sleep(100 * time.Millisecond)
	more := []byte(strings.Repeat("a", 16<<10))
	for i := range 16 {
		if _, err := c.Write(more); err != nil {
			t.Fatalf("write %d after the answer: %v (the edge reset the connection)", i, err)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answer: %v (the edge reset the connection)", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(bytes.NewReader(head), bytes.NewReader(rest))), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 431 || !strings.Contains(string(body), `"status_code":"0"`) {
		t.Fatalf("answer %d %q, %v", resp.StatusCode, body, err)
	}
	testkit.Eventually(t, "the lingering close counted as the client's", func() bool { return lingered() == before+1 })
}
