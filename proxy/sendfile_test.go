//go:build linux

package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
)

// wireAnswer is what a test compares of an answer read off the wire.
type wireAnswer struct {
	status                        int
	length, encoding, etag, cache string
	body                          []byte
}

// exchangeOn sends requests one after another on one keep-alive
// connection and reads each answer as the bytes frame it.
func exchangeOn(t *testing.T, addr string, reqs []string) []wireAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	var out []wireAnswer
	for _, req := range reqs {
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		method := "GET"
		if req[:4] == "HEAD" {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(r, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%.60q: %v", req, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%.60q: body: %v", req, err)
		}
		out = append(out, wireAnswer{resp.StatusCode, resp.Header.Get("Content-Length"),
			resp.Header.Get("Content-Encoding"), resp.Header.Get("Etag"), resp.Header.Get("X-Cache"), body})
	}
	return out
}

// TestPageFilesOnTheWire: the large page's answers sent from the cache's
// page files (sendfile) are, byte for byte and field for field, those of
// an edge that writes them from memory, over one keep-alive connection
// that mixes them with HEAD and small answers; and clients that hang up
// in the middle of a page leave no descriptor behind.
func TestPageFilesOnTheWire(t *testing.T) {
	// A clock that stands still: every answer after the first is a hit,
	// however long the test runs under -race.
	clk := testkit.NewClock(time.Now())
	// No upper bound: the ~500 KB identity page is sent from its file too,
	// in several sendfile calls (it is longer than the socket's buffer).
	files := newEdge(t, withClock(clk.Now), withConfig(func(c *config.Config) { c.Cache.SendfileMaxBytes = -1 }))
	heap := newEdge(t, withClock(clk.Now), withUpstreamOf(files), withConfig(func(c *config.Config) { c.Cache.SendfileMinBytes = -1 }))
	token := files.sim.Markets()[0].Tokens[0]
	big := "/v1/orderbook/events?tokenId=" + url.QueryEscape(token) + "&limit=1000"
	small := "/v1/trader/wallet-address/" + files.sim.Wallets()[0]
	req := func(method, target string, fields ...string) string {
		s := method + " " + target + " HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyAll + "\r\n"
		for _, f := range fields {
			s += f + "\r\n"
		}
		return s + "\r\n"
	}
	gz := "Accept-Encoding: gzip"
	reqs := []string{
		req("GET", big), req("GET", big), req("GET", big, gz), req("HEAD", big), req("GET", small),
		req("GET", big, gz), req("HEAD", big, gz), req("GET", big),
	}
	// Warm both caches first, so that both answer the same reqs as hits.
	exchangeOn(t, files.addr, reqs)
	exchangeOn(t, heap.addr, reqs)
	a, b := exchangeOn(t, files.addr, reqs), exchangeOn(t, heap.addr, reqs)
	if st := files.srv.CacheStats(); st.Files != 2 {
		t.Errorf("the sending edge holds %d page files, want 2 (identity and gzip)", st.Files)
	}
	if st := heap.srv.CacheStats(); st.Files != 0 {
		t.Errorf("sendfile_min_bytes -1: %d page files", st.Files)
	}
	for i := range reqs {
		x, y := a[i], b[i]
		what := fmt.Sprintf("answer %d (%.40q)", i, reqs[i])
		if x.status != y.status || x.length != y.length || x.encoding != y.encoding || x.etag != y.etag || x.cache != y.cache {
			t.Errorf("%s: %d %s %q %s %s; from memory %d %s %q %s %s", what,
				x.status, x.length, x.encoding, x.etag, x.cache, y.status, y.length, y.encoding, y.etag, y.cache)
		}
		if !bytes.Equal(x.body, y.body) {
			t.Errorf("%s: %d bytes differ from memory's %d", what, len(x.body), len(y.body))
		}
		if x.status != 200 || x.cache != "HIT" {
			t.Errorf("%s: %d %s, want a 200 hit", what, x.status, x.cache)
		}
	}
	if len(a[1].body) < 256<<10 || a[2].encoding != "gzip" || len(a[2].body) < 64<<10 {
		t.Fatalf("pages of %d and %d (%s) bytes: too small to be sent from files", len(a[1].body), len(a[2].body), a[2].encoding)
	}

	// Clients that leave mid-page, with some of it unread in their socket:
	// their connections close, and no descriptor is left behind.
	before := openFiles(t)
	for i := range 20 {
		c, err := net.Dial("tcp", files.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, reqs[1+i%2])
		_, _ = c.Read(make([]byte, 100))
		_ = c.Close()
	}
	if got := exchangeOn(t, files.addr, reqs[1:3]); !bytes.Equal(got[0].body, a[1].body) || !bytes.Equal(got[1].body, a[2].body) {
		t.Error("after clients hung up, the page changed")
	}
	testkit.Eventually(t, "the descriptors of the clients that left closed", func() bool { return openFiles(t) <= before })
	if n := openFiles(t); n > before {
		t.Errorf("%d descriptors open after the clients left, %d before", n, before)
	}
	if st := files.srv.CacheStats(); st.Files != 2 {
		t.Errorf("%d page files after the clients left, want 2", st.Files)
	}
}

// openFiles counts the process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}
