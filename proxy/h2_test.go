package proxy_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
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
