package proxy_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
)

// seriesValue reads one series of reg: the metric name with the labels
// given (name, value pairs); 0 when there is none.
func seriesValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// liveTLSEdge is a TLS edge (HTTP/2 and HTTP/1.1) in front of a live
// simulated host.
func liveTLSEdge(t *testing.T, edit func(*config.Config)) (*tlsEdge, testkit.KeyPair) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	kp := testkit.SelfSigned(t, "first", time.Now().Add(24*time.Hour), edgeName)
	kp.Write(t, certFile, keyFile)
	sim := liveSim()
	te := startTLSEdge(t, tlsSetup{
		yaml: "mode: files\ncert_file: " + strconv.Quote(certFile) + "\nkey_file: " + strconv.Quote(keyFile) + "\nhttp_listen: \"\"",
		edit: edit,
		sim:  &sim,
	})
	if err := te.serving(t, httpsClient(t, kp.Pool(), edgeName)); err != nil {
		t.Fatal(err)
	}
	return te, kp
}

// Go's HTTP/2 client follows a stream over TLS, and the same connection
// serves other requests meanwhile.
func TestStreamOverH2(t *testing.T) {
	te, kp := liveTLSEdge(t, nil)
	tr := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: kp.Pool(), ServerName: edgeName}}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	token := te.sim.Markets()[0].Tokens[0]
	req, _ := http.NewRequest(http.MethodGet, te.url("/v1/orderbook/stream?tokenId="+token), nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Proto != "HTTP/2.0" || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s %d %v", resp.Proto, resp.StatusCode, resp.Header)
	}
	r := newSSEReader(resp.Body)
	got := readEvents(t, r, 3)
	// Another request on the same connection while the stream is open.
	tx, _ := http.NewRequest(http.MethodGet, te.url("/v1/tx/"+te.sim.TradeTxs()[0]), nil)
	tx.Header.Set("Authorization", "Bearer "+keyAll)
	txResp, err := client.Do(tx)
	if err != nil || txResp.StatusCode != 200 {
		t.Fatalf("a request beside the stream: %v %v", txResp, err)
	}
	txResp.Body.Close()
	got = append(got, readEvents(t, r, 2)...)
	want := eventsAfter(t, te.edge, "tokenId="+token, got[0].id, len(got)-1)
	for i, item := range want {
		if got[i+1].data != string(item) {
			t.Fatalf("event %d: %s\nwant %s", i+1, got[i+1].data, item)
		}
	}
}

// h2conn is a bare HTTP/2 client: the test decides its windows.
type h2conn struct {
	t   *testing.T
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

func dialH2(t *testing.T, te *tlsEdge, kp testkit.KeyPair, settings ...http2.Setting) *h2conn {
	t.Helper()
	nc, err := tls.Dial("tcp", te.addr, &tls.Config{RootCAs: kp.Pool(), ServerName: edgeName, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	c := &h2conn{t: t, fr: http2.NewFramer(nc, nc)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.buf)
	io.WriteString(nc, http2.ClientPreface)
	c.fr.WriteSettings(settings...)
	return c
}

func (c *h2conn) get(id uint32, path string) {
	c.buf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", edgeName}, {":path", path}, {"authorization", "Bearer " + keyAll}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.buf.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
		c.t.Fatal(err)
	}
}

// A subscriber whose HTTP/2 window stays closed is held to
// streams.buffer_bytes: past it the stream ends as slow_consumer, its
// last event an `error` naming the reason and the last id queued; and
// the closed window never holds up the connection's other streams.
func TestStreamSlowConsumerH2(t *testing.T) {
	te, kp := liveTLSEdge(t, func(c *config.Config) {
		c.Streams.BufferBytes = 16 << 10
		c.Streams.WriteTimeout = 20 * time.Second
	})
	var tokens []string
	for _, m := range te.sim.Markets() {
		tokens = append(tokens, m.Tokens...)
	}
	c := dialH2(t, te, kp, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.get(1, "/v1/orderbook/stream?tokenId="+url.QueryEscape(strings.Join(tokens, ",")))
	// Another request, whose window the client opens: answered whole.
	c.get(3, "/v1/tx/"+te.sim.TradeTxs()[0])
	c.fr.WriteWindowUpdate(3, 1<<20)
	var txBody []byte
	for done := false; !done; {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 3 {
			txBody = append(txBody, d.Data()...)
			done = d.StreamEnded()
		}
	}
	if !bytes.Contains(txBody, []byte(`"status_code":"1"`)) {
		t.Fatalf("the other stream's answer: %s", txBody)
	}
	testkit.Eventually(t, "the stream ended as slow", func() bool {
		return seriesValue(t, te.srv.Registry(), "tradergate_stream_ended_total", "route", "orderbook_events", "reason", "slow_consumer") == 1
	})
	// Now the client reads: everything queued, then the error event.
	c.fr.WriteWindowUpdate(1, 1<<24)
	c.fr.WriteWindowUpdate(0, 1<<24)
	var body []byte
	for done := false; !done; {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			if f.StreamID == 1 {
				body = append(body, f.Data()...)
				done = f.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset (%v) before its end was read", f.StreamID, f.ErrCode)
		}
	}
	r := newSSEReader(bytes.NewReader(body))
	var last, final sseEvent
	for {
		ev, err := r.next()
		if err != nil {
			break
		}
		if ev.event == "error" {
			final = ev
			continue
		}
		if ev.id != "" {
			last = ev
		}
	}
	var end struct{ Reason, LastEventID string }
	if err := json.Unmarshal([]byte(final.data), &end); err != nil || end.Reason != "slow_consumer" || end.LastEventID != last.id || last.id == "" {
		t.Fatalf("final event %+v (%v), last event id %q", final, err, last.id)
	}
}
