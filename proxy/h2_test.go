package proxy_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
)

// Many streams on one HTTP/2 connection, answered at once, small pages
// and a ~500 KB one: every answer arrives whole and equal, byte for byte,
// to the same request's answer over HTTP/1.1. The edge frames a burst of
// answers into shared TLS records (h2edge); this is where an answer cut
// short, or two answers' frames out of order, would show.
func TestH2ManyStreamsOneConnection(t *testing.T) {
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	settled := strconv.FormatInt(time.Now().Unix()-3600, 10)
	paths := []string{
		"/v1/tx/" + te.sim.TradeTxs()[0],
		"/v1/trader/" + te.sim.Wallets()[0] + "/activity?toTimestamp=" + settled,
		"/v1/orderbook/events?tokenId=" + url.QueryEscape(te.sim.Markets()[0].Tokens[0]) + "&limit=1000&to=" + settled + "000",
	}
	h1tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: first.Pool(), ServerName: edgeName, NextProtos: []string{"http/1.1"}}}
	t.Cleanup(h1tr.CloseIdleConnections)
	// One connection for every stream: http2.Transport opens a second
	// only past the server's stream limit.
	h2tr := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: first.Pool(), ServerName: edgeName}}
	t.Cleanup(h2tr.CloseIdleConnections)

	get := func(rt http.RoundTripper, path string, gzip bool) (int, string, []byte, error) {
		req, _ := http.NewRequest(http.MethodGet, te.url(path), nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Proto, b, err
	}
	want := map[string][]byte{}
	for _, p := range paths {
		for _, gz := range []bool{false, true} {
			status, proto, b, err := get(h1tr, p, gz)
			if err != nil || status != 200 || proto != "HTTP/1.1" {
				t.Fatalf("HTTP/1.1 %s: %d %s %v", p, status, proto, err)
			}
			want[p+strconv.FormatBool(gz)] = b
		}
	}

	const rounds = 40
	var wg sync.WaitGroup
	errs := make(chan string, rounds*len(paths)*2)
	for i := range rounds {
		for _, p := range paths {
			for _, gz := range []bool{false, true} {
				wg.Go(func() {
					status, proto, b, err := get(h2tr, p, gz)
					switch {
					case err != nil:
						errs <- err.Error()
					case status != 200 || proto != "HTTP/2.0":
						errs <- p + ": " + strconv.Itoa(status) + " " + proto
					case !bytes.Equal(b, want[p+strconv.FormatBool(gz)]):
						errs <- p + " gzip " + strconv.FormatBool(gz) + ": " + strconv.Itoa(len(b)) + " bytes differ from HTTP/1.1's, round " + strconv.Itoa(i)
					}
				})
			}
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// An HTTP/2 client that holds unfinished requests past the connection's
// budget gets the edge's JSON 431 on the request past it, and one that
// then floods PINGs is cut off with ENHANCE_YOUR_CALM; the metrics count
// both, and a log line names the client's address.
func TestH2AbuseIsCutAndCounted(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	kp := testkit.SelfSigned(t, "first", time.Now().Add(24*time.Hour), edgeName)
	kp.Write(t, certFile, keyFile)
	te := startTLSEdge(t, tlsSetup{
		yaml: "mode: files\ncert_file: " + strconv.Quote(certFile) + "\nkey_file: " + strconv.Quote(keyFile) + "\nhttp_listen: \"\"",
		edit: func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" },
	})
	if err := te.serving(t, httpsClient(t, kp.Pool(), edgeName)); err != nil {
		t.Fatal(err)
	}
	nc, err := tls.Dial("tcp", te.addr, &tls.Config{RootCAs: kp.Pool(), ServerName: edgeName, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	io.WriteString(nc, http2.ClientPreface)
	fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	// Lists of about 20 KB: 256 KiB (16 x max_header_bytes) holds 12.
	const lists = 13
	for i := range lists {
		block.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", edgeName}, {":path", "/v1/tx/" + te.sim.TradeTxs()[0]}, {"authorization", "Bearer " + keyAll}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("p", 10000), Sensitive: true})
		enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("q", 10000), Sensitive: true})
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(1 + 2*i), BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	var status string
	var body []byte
	for status == "" || body == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID != 2*lists-1 {
				t.Fatalf("an answer on stream %d", f.StreamID)
			}
			status = f.PseudoValue("status")
		case *http2.DataFrame:
			body = append(body, f.Data()...)
		}
	}
	if status != "431" || !bytes.Contains(body, []byte("Request header fields too large")) {
		t.Errorf("past the budget: %s %s", status, body)
	}
	var ga *http2.GoAwayFrame
	go func() {
		for i := 0; i < 1000; i++ {
			if fr.WritePing(false, [8]byte{byte(i)}) != nil {
				return
			}
		}
	}()
	for ga == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY: %v", err)
		}
		ga, _ = f.(*http2.GoAwayFrame)
	}
	if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("GOAWAY %v", ga.ErrCode)
	}
	nc.Close()
	testkit.Eventually(t, "the admin listener", func() bool { return te.srv.AdminAddr() != "" })
	want := map[string]string{
		`tradergate_h2_connections_closed_total{reason="flood"}`:       "1",
		`tradergate_h2_streams_cut_total{reason="header_budget"}`:      "1",
		`tradergate_h2_streams_cut_total{reason="request_timeout"}`:    "0",
		`tradergate_h2_connections_closed_total{reason="rapid_reset"}`: "0",
	}
	testkit.Eventually(t, "the metrics", func() bool {
		_, text := getText(t, "http://"+te.srv.AdminAddr()+"/metrics")
		for series, v := range want {
			if metricValue(text, series) != v {
				return false
			}
		}
		return true
	})
	if !strings.Contains(te.logs.String(), `"msg":"h2edge: connection cut","remote":"127.0.0.1","reason":"flood"`) {
		t.Errorf("no log line for the cut:\n%s", te.logs)
	}
}

// An idle HTTP/2 connection on the TLS front is served on a goroutine of
// its own, not under fasthttp's frames: the stack a connection keeps
// while it idles is its deepest wait's (docs/BENCHMARKS.md, "Idle
// connections").
func TestH2ConnServedOffFasthttpGoroutine(t *testing.T) {
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	tr := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: first.Pool(), ServerName: edgeName}}
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, te.url("/v1/tx/"+te.sim.TradeTxs()[0]), nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Proto)
	}
	var serving int
	for _, g := range testkit.Goroutines() {
		if !strings.Contains(g, "h2edge.(*conn).serve(") {
			continue
		}
		serving++
		if strings.Contains(g, "fasthttp") {
			t.Errorf("an HTTP/2 connection served under fasthttp's goroutine:\n%s", g)
		}
	}
	if serving == 0 {
		t.Fatal("no HTTP/2 connection served while the client keeps one open")
	}
}

// An HTTP/2 connection through the TLS front that goes quiet parks its
// read loop (proxy/h2edge, park.go): the front hands h2edge a TLS
// connection whose socket it can wait on, and a request after the park
// is answered.
func TestH2IdleConnParksThroughTLSFront(t *testing.T) {
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	path := "/v1/tx/" + te.sim.TradeTxs()[0]
	cfg := &tls.Config{RootCAs: first.Pool(), ServerName: edgeName}
	const n = 4
	ccs := make([]*http2.ClientConn, n)
	get := func(cc *http2.ClientConn) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, te.url(path), nil)
		req.Header.Set("Authorization", "Bearer "+keyAll)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	for i := range ccs {
		cc, err := (&http2.Transport{}).NewClientConn(dialTLS(t, te.addr, cfg, "h2"))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ccs[i] = cc
		get(cc)
	}
	parked := func() int {
		k := 0
		for _, g := range testkit.Goroutines() {
			if strings.Contains(g, "h2edge.(*conn).serveParked") && strings.Contains(g, "net.(*rawConn).Read") {
				k++
			}
		}
		return k
	}
	testkit.Eventually(t, "the idle connections parked", func() bool { return parked() == n })
	for _, cc := range ccs {
		get(cc)
	}
}
