package proxy_test

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"tradergate/proxy/config"
)

// shortTimeouts makes every server timeout far shorter than the streams
// the tests below keep open: a stream is a response that never ends, so
// none of them may cut it while it delivers events and heartbeats.
func shortTimeouts(c *config.Config) {
	c.Server.ReadHeaderTimeout = 500 * time.Millisecond
	c.Server.ReadTimeout = 500 * time.Millisecond
	c.Server.IdleTimeout = 500 * time.Millisecond
	c.Server.WriteTimeout = time.Second
	c.Upstream.Timeout = 900 * time.Millisecond
	c.Streams.Heartbeat = time.Second
}

// follow reads events from r for d and returns them; the test fails if
// the stream ends or stays silent past the stream write timeout.
func follow(t *testing.T, r *sseReader, d time.Duration) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("the stream ended after %d events: %v", len(got), err)
		}
		if ev.event == "error" {
			t.Fatalf("the stream was ended: %s", ev.data)
		}
		if ev.id != "" {
			got = append(got, ev)
		}
	}
	return got
}

// inOrder fails unless the events' ids are distinct and in the order the
// events endpoint pages them.
func inOrder(t *testing.T, e *edge, token string, got []sseEvent) {
	t.Helper()
	if len(got) < 2 {
		t.Fatalf("%d events in the stream's life; want a live book's worth", len(got))
	}
	want := eventsAfter(t, e, "tokenId="+token, got[0].id, len(got)-1)
	if len(want) < len(got)-1 {
		t.Fatalf("the events endpoint has %d events after %s, the stream gave %d", len(want), got[0].id, len(got)-1)
	}
	for i, ev := range got[1:] {
		if ev.data != string(want[i]) {
			t.Fatalf("event %d: %s\nwant %s", i+1, ev.data, want[i])
		}
	}
}

// A plain HTTP/1.1 stream outlives the read, idle and write timeouts.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	e := newEdge(t, withSim(liveSim()), withConfig(shortTimeouts))
	token := e.sim.Markets()[0].Tokens[0]
	resp, r := openStream(t, e, "/v1/orderbook/stream?tokenId="+token)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := follow(t, r, 4*time.Second)
	inOrder(t, e, token, got)
}

// HTTP/1.1 over TLS (a client that does not offer h2): the connection is
// taken over from the TLS front as from the plain one, and the stream
// outlives the server timeouts there too.
func TestStreamOverTLSHTTP1(t *testing.T) {
	te, kp := liveTLSEdge(t, shortTimeouts)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: kp.Pool(), ServerName: edgeName},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1 only
	}
	t.Cleanup(tr.CloseIdleConnections)
	token := te.sim.Markets()[0].Tokens[0]
	req, _ := http.NewRequest(http.MethodGet, te.url("/v1/orderbook/stream?tokenId="+token), nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s %d %v", resp.Proto, resp.StatusCode, resp.Header)
	}
	got := follow(t, newSSEReader(resp.Body), 3*time.Second)
	inOrder(t, te.edge, token, got)
}
