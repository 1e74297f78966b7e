package proxy_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
