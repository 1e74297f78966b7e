package proxy_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"tradergate/internal/testkit"
	"tradergate/proxy/config"
)

// withConnCap sets server.max_connections and
// server.max_connections_per_address.
func withConnCap(total, perAddr int) edgeOption {
	return withConfig(func(c *config.Config) {
		c.Server.MaxConnections, c.Server.MaxConnectionsPerAddress = total, perAddr
	})
}

// gaugeValue reads an unlabelled gauge of the edge's registry.
func gaugeValue(t *testing.T, e *edge, name string) float64 {
	t.Helper()
	return onlyMetric(t, e, name).GetGauge().GetValue()
}

// rawConn is a client connection that sends requests by hand.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// send writes a keep-alive request for path with the all-routes key.
func (c *rawConn) send(t *testing.T, path string) {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyAll + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
}

// answer reads one answer within wait: its status, or an error.
func (c *rawConn) answer(wait time.Duration) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// get sends a request and wants its 200.
func (c *rawConn) get(t *testing.T, path string) {
	t.Helper()
	c.send(t, path)
	if st, err := c.answer(10 * time.Second); err != nil || st != 200 {
		t.Fatalf("GET %s: status %d, %v", path, st, err)
	}
}

// quiet is how long a connection waiting at the cap is watched for an
// answer that must not come.
const quiet = 300 * time.Millisecond

// At server.max_connections the listener stops accepting: a further
// client's request waits, unanswered, until a connection closes, and is
// then answered. The wait is counted, and the open connections are a
// gauge.
func TestConnectionCapPausesAccept(t *testing.T) {
	e := newEdge(t, withConnCap(3, -1))
	path := "/v1/tx/" + e.sim.TradeTxs()[0]
	held := []*rawConn{dialRaw(t, e.addr), dialRaw(t, e.addr), dialRaw(t, e.addr)}
	for _, c := range held {
		c.get(t, path)
	}
	if n := gaugeValue(t, e, "tradergate_client_connections"); n != 3 {
		t.Errorf("tradergate_client_connections = %v, want 3", n)
	}
	if n := gaugeValue(t, e, "tradergate_client_connections_max"); n != 3 {
		t.Errorf("tradergate_client_connections_max = %v, want 3", n)
	}

	waiting := dialRaw(t, e.addr) // the kernel completes the handshake: the backlog
	waiting.send(t, path)
	if st, err := waiting.answer(quiet); !isTimeout(err) {
		t.Fatalf("a connection past the cap was answered: status %d, %v", st, err)
	}
	if n := counterValue(t, e, "tradergate_client_connection_waits_total"); n < 1 {
		t.Errorf("tradergate_client_connection_waits_total = %v, want at least 1", n)
	}
	// The time paused counts while the pause lasts, not only once it ends.
	if n := counterValue(t, e, "tradergate_client_connection_wait_seconds_total"); n < quiet.Seconds() {
		t.Errorf("tradergate_client_connection_wait_seconds_total = %v during a pause of at least %v", n, quiet)
	}

	held[0].Close()
	if st, err := waiting.answer(10 * time.Second); err != nil || st != 200 {
		t.Fatalf("once a connection closed, the waiting one got status %d, %v; want 200", st, err)
	}
	if n := counterValue(t, e, "tradergate_client_connection_wait_seconds_total"); n <= 0 {
		t.Errorf("tradergate_client_connection_wait_seconds_total = %v, want the time paused", n)
	}
	// The slots are given back as connections close, whoever closes them.
	for _, c := range append(held[1:], waiting) {
		c.Close()
	}
	testkit.Eventually(t, "every slot given back", func() bool {
		return gaugeValue(t, e, "tradergate_client_connections") == 0
	})
	for range 2 { // a full cap again, and nothing held over
		cs := []*rawConn{dialRaw(t, e.addr), dialRaw(t, e.addr), dialRaw(t, e.addr)}
		for _, c := range cs {
			c.get(t, path)
			c.Close()
		}
	}
}

// One address past server.max_connections_per_address has its new
// connection closed at once, counted; another connection of it is taken
// once one of its own closes.
func TestConnectionCapPerAddress(t *testing.T) {
	e := newEdge(t, withConnCap(10, 2))
	path := "/v1/tx/" + e.sim.TradeTxs()[0]
	a, b := dialRaw(t, e.addr), dialRaw(t, e.addr)
	a.get(t, path)
	b.get(t, path)

	over := dialRaw(t, e.addr)
	over.send(t, path)
	st, err := over.answer(10 * time.Second)
	if err == nil || isTimeout(err) {
		t.Fatalf("a third connection from one address: status %d, %v; want it closed", st, err)
	}
	testkit.Eventually(t, "the refusal counted", func() bool {
		return counterValue(t, e, "tradergate_client_connections_refused_total") == 1
	})
	if n := gaugeValue(t, e, "tradergate_client_connections"); n != 2 {
		t.Errorf("tradergate_client_connections = %v, want 2 (the refused one holds nothing)", n)
	}

	a.Close()
	testkit.Eventually(t, "the closed connection's slot given back", func() bool {
		return gaugeValue(t, e, "tradergate_client_connections") == 1
	})
	dialRaw(t, e.addr).get(t, path)
}

// The cap holds on the TLS listener too, whichever protocol a connection
// negotiates: an HTTP/2 connection and an HTTP/1.1 one fill a cap of two,
// a third waits, and the HTTP/2 one closing lets it in.
func TestConnectionCapOverTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	pair := testkit.SelfSigned(t, "edge", time.Now().Add(24*time.Hour), edgeName)
	pair.Write(t, certFile, keyFile)
	te := startTLSEdge(t, tlsSetup{
		yaml: "mode: files\ncert_file: " + strconv.Quote(certFile) + "\nkey_file: " + strconv.Quote(keyFile) + "\nhttp_listen: \"\"\n",
		edit: func(c *config.Config) { c.Server.MaxConnections, c.Server.MaxConnectionsPerAddress = 2, -1 },
	})
	path := "/v1/tx/" + te.sim.TradeTxs()[0]
	cfg := &tls.Config{RootCAs: pair.Pool(), ServerName: edgeName}

	h2conn := dialTLS(t, te.addr, cfg, "h2")
	tr := &http2.Transport{}
	cc, err := tr.NewClientConn(h2conn)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, te.url(path), nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	resp, err := cc.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP/2: %v %v", resp, err)
	}
	resp.Body.Close()

	h1 := &rawConn{Conn: dialTLS(t, te.addr, cfg, "http/1.1")}
	h1.r = bufio.NewReader(h1.Conn)
	h1.get(t, path)

	// The third connection's handshake waits with it: nothing reads its
	// ClientHello until a slot is free.
	third := make(chan error, 1)
	go func() {
		c, err := tls.Dial("tcp", te.addr, &tls.Config{RootCAs: pair.Pool(), ServerName: edgeName, NextProtos: []string{"http/1.1"}})
		if err == nil {
			rc := &rawConn{Conn: c, r: bufio.NewReader(c)}
			rc.send(t, path)
			var st int
			st, err = rc.answer(10 * time.Second)
			if err == nil && st != 200 {
				err = errors.New("status " + strconv.Itoa(st))
			}
			c.Close()
		}
		third <- err
	}()
	select {
	case err := <-third:
		t.Fatalf("a third TLS connection past a cap of 2 was served: %v", err)
	case <-time.After(quiet):
	}
	_ = cc.Close() // the HTTP/2 connection's slot is given back when it closes
	select {
	case err := <-third:
		if err != nil {
			t.Fatalf("the waiting TLS connection: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting TLS connection was not served once the HTTP/2 one closed")
	}
	h1.Close()
}

// dialTLS opens a TLS connection offering proto alone, and checks it was
// negotiated.
func dialTLS(t *testing.T, addr string, cfg *tls.Config, proto string) *tls.Conn {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{proto}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got := c.ConnectionState().NegotiatedProtocol; got != proto {
		t.Fatalf("negotiated %q, want %q", got, proto)
	}
	return c
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
