package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/legacysim"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// TLS at the edge: mode files, the plain-HTTP listener, HSTS and
// the TLS-only port. The ACME tests against Pebble are in pebble_test.go.

// edgeName is the name the test certificates are for.
const edgeName = "edge.tradergate.test"

// tlsEdge is an edge serving TLS through Serve, as main runs it, in front of
// legacysim. The embedded edge's front is the same Server's Handler over
// plain HTTP, for comparisons.
type tlsEdge struct {
	*edge
	addr     string // the TLS listener
	httpAddr string // server.tls.http_listen; "" when there is none
	logs     *testkit.LogBuffer

	cancel      context.CancelFunc
	stopped     chan struct{}
	err         error // what Serve returned, once stopped is closed
	errExpected bool  // the test checks err itself
}

// tlsSetup is what a test chooses of a TLS edge.
type tlsSetup struct {
	// yaml is the server.tls block, unindented.
	yaml string
	// ln is the TLS listener; nil: a new one on a free loopback port.
	ln net.Listener
	// edit changes the parsed configuration before it is validated.
	edit func(*config.Config)
	// sim is legacysim's configuration; nil: seed 7.
	sim *legacysim.Config
}

func startTLSEdge(t *testing.T, s tlsSetup) *tlsEdge {
	t.Helper()
	simCfg := legacysim.Config{Seed: 7}
	if s.sim != nil {
		simCfg = *s.sim
	}
	simCfg.Key = legacyKey
	sim := legacysim.New(simCfg)
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	block := "  tls:\n    " + strings.ReplaceAll(strings.TrimSpace(s.yaml), "\n", "\n    ") + "\n"
	yaml := strings.Replace(testConfig(up.URL+"/open-api"), "server:\n", "server:\n"+block, 1)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	if s.edit != nil {
		s.edit(cfg)
	}
	if err := cfg.Validate(func(k string) string {
		if k == "TRADERGATE_UPSTREAM_KEY" {
			return legacyKey
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	srv, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	plain := httptest.NewServer(srv.Handler())
	t.Cleanup(plain.Close)
	front := &frontEnd{URL: plain.URL, client: plain.Client()}

	ln := s.ln
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	te := &tlsEdge{
		edge:     &edge{t: t, sim: sim, up: up, srv: srv, front: front, cfg: cfg},
		addr:     ln.Addr().String(),
		httpAddr: *cfg.Server.TLS.HTTPListen,
		logs:     logs,
		cancel:   cancel,
		stopped:  make(chan struct{}),
	}
	go func() {
		te.err = srv.Serve(ctx, ln)
		close(te.stopped)
	}()
	t.Cleanup(func() {
		if err := te.stop(t); err != nil && !te.errExpected {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("edge logs:\n%s", logs)
		}
	})
	return te
}

// stop ends Serve and returns what it returned.
func (te *tlsEdge) stop(t *testing.T) error {
	t.Helper()
	te.cancel()
	return te.wait(t)
}

// wait returns what Serve returned, once it has.
func (te *tlsEdge) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-te.stopped:
		return te.err
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return within 30s")
		return nil
	}
}

// serving waits until the edge answers on its TLS listener, which it does
// only once every listener is bound, or until Serve has returned; it
// returns Serve's error in the second case.
func (te *tlsEdge) serving(t *testing.T, client *http.Client) error {
	t.Helper()
	var err error
	testkit.Eventually(t, "the TLS edge to serve or stop", func() bool {
		select {
		case <-te.stopped:
			err = te.err
			return true
		default:
		}
		resp, gerr := client.Get(te.url("/v1/openapi.json"))
		if gerr != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	return err
}

// url is the TLS listener's address as an https URL.
func (te *tlsEdge) url(path string) string { return "https://" + te.addr + path }

// getTLS sends a GET with the all-routes key over TLS. reused, when not
// nil, learns whether the request went over a connection opened before.
func (te *tlsEdge) getTLS(t *testing.T, c *http.Client, path string, reused *bool) (*http.Response, []byte) {
	t.Helper()
	ctx := context.Background()
	if reused != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { *reused = i.Reused },
		})
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, te.url(path), nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// waitHTTPS polls until the edge completes a TLS handshake and answers,
// for mode acme, whose certificate arrives after the listener opens.
func (te *tlsEdge) waitHTTPS(t *testing.T, c *http.Client) {
	t.Helper()
	testkit.Eventually(t, "a TLS answer from the edge", func() bool {
		select {
		case <-te.stopped:
			t.Fatalf("Serve returned while waiting for TLS: %v", te.err)
		default:
		}
		resp, err := c.Get(te.url("/"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}

// httpsClient trusts only roots and expects serverName; it speaks HTTP/2
// when the edge offers it. Redirects are not followed.
func httpsClient(t *testing.T, roots *x509.CertPool, serverName string) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: serverName},
		ForceAttemptHTTP2: true, // a custom TLSClientConfig switches it off
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: noRedirects}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// checkTLS asserts what every TLS answer must be: HTTP/2, TLS 1.2
// or later, and the certificate expected.
func checkTLS(t *testing.T, resp *http.Response, leaf *x509.Certificate) {
	t.Helper()
	if resp.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", resp.Proto)
	}
	if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("TLS state %+v, want TLS 1.2 or later", resp.TLS)
	}
	if got := resp.TLS.PeerCertificates[0]; leaf != nil && !got.Equal(leaf) {
		t.Errorf("served certificate %q (serial %v), want %q (serial %v)", got.Subject.CommonName, got.SerialNumber, leaf.Subject.CommonName, leaf.SerialNumber)
	}
}

// freeAddr is a loopback address nobody listens on, for listeners that the
// edge or Pebble bind themselves.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rawHTTP sends request bytes as they are and reads one response.
func rawHTTP(t *testing.T, addr, request string) (*http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", request, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// filesEdge starts an edge in mode files on a fresh pair in a temp folder.
func filesEdge(t *testing.T, extra string) (te *tlsEdge, first testkit.KeyPair, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "edge.crt"), filepath.Join(dir, "edge.key")
	first = testkit.SelfSigned(t, "first", time.Now().Add(24*time.Hour), edgeName)
	first.Write(t, certFile, keyFile)
	te = startTLSEdge(t, tlsSetup{yaml: "mode: files\ncert_file: " + strconv.Quote(certFile) + "\nkey_file: " + strconv.Quote(keyFile) + "\n" + extra})
	return te, first, certFile, keyFile
}

// TestTLSFilesReloadKeepsConnections is mode files: a swap of the
// files and a reload (what SIGHUP calls) serves the new certificate to new
// connections, while a keep-alive connection opened before goes on.
func TestTLSFilesReloadKeepsConnections(t *testing.T) {
	te, first, certFile, keyFile := filesEdge(t, `http_listen: ""`)
	path := "/v1/tx/" + te.sim.TradeTxs()[0]
	old := httpsClient(t, first.Pool(), edgeName)
	resp, body := te.getTLS(t, old, path, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	checkTLS(t, resp, first.Leaf)
	if _, plain := te.get(path); !bytes.Equal(body, plain) {
		t.Errorf("TLS body differs from the plain one:\n%s\n%s", body, plain)
	}

	second := testkit.SelfSigned(t, "second", time.Now().Add(48*time.Hour), edgeName)
	second.Write(t, certFile, keyFile)
	if err := te.srv.ReloadCertificates(); err != nil {
		t.Fatal(err)
	}

	var reused bool
	resp, _ = te.getTLS(t, old, path, &reused)
	if resp.StatusCode != 200 || !reused {
		t.Errorf("the open connection: status %d, reused %v; want 200 on the same connection", resp.StatusCode, reused)
	}
	checkTLS(t, resp, first.Leaf) // the connection keeps its handshake
	resp, _ = te.getTLS(t, httpsClient(t, second.Pool(), edgeName), path, nil)
	checkTLS(t, resp, second.Leaf)
	if _, err := httpsClient(t, first.Pool(), edgeName).Get(te.url(path)); err == nil {
		t.Error("a new connection still got the first certificate")
	}

	t.Run("a broken pair is refused and the served one stays", func(t *testing.T) {
		if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := te.srv.ReloadCertificates()
		if err == nil || !strings.Contains(err.Error(), "server.tls.cert_file: "+certFile+", key_file "+keyFile) {
			t.Errorf("ReloadCertificates = %v", err)
		}
		resp, _ := te.getTLS(t, httpsClient(t, second.Pool(), edgeName), path, nil)
		checkTLS(t, resp, second.Leaf)
	})
	t.Run("an expired certificate is refused", func(t *testing.T) {
		testkit.SelfSigned(t, "expired", time.Now().Add(-time.Hour), edgeName).Write(t, certFile, keyFile)
		if err := te.srv.ReloadCertificates(); err == nil || !strings.Contains(err.Error(), "expired at") {
			t.Errorf("ReloadCertificates = %v", err)
		}
		resp, _ := te.getTLS(t, httpsClient(t, second.Pool(), edgeName), path, nil)
		checkTLS(t, resp, second.Leaf)
	})
}

// TestTLSRedirectAndHSTS: the plain-HTTP listener redirects every request to
// https with 308, path and query as sent, and never serves the API; HSTS is
// on TLS answers only.
func TestTLSRedirectAndHSTS(t *testing.T) {
	// The plain-HTTP address is chosen free and then bound by Serve; another
	// process of a parallel test run may take it in between, so a few
	// addresses are tried.
	var (
		te       *tlsEdge
		first    testkit.KeyPair
		client   *http.Client
		httpAddr string
	)
	for attempt := 1; ; attempt++ {
		httpAddr = freeAddr(t)
		te, first, _, _ = filesEdge(t, "http_listen: "+strconv.Quote(httpAddr)+"\nhsts_max_age: 1h")
		client = httpsClient(t, first.Pool(), edgeName)
		err := te.serving(t, client)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		te.errExpected = true
	}
	tx := "/v1/tx/" + te.sim.TradeTxs()[0]

	// The first TLS answer also shows the plain listener is bound: both
	// are, before anything is served.
	resp, body := te.getTLS(t, client, tx, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=3600" {
		t.Errorf("HSTS = %q, want max-age=3600", got)
	}
	unauth, err := client.Get(te.url(tx))
	if err != nil {
		t.Fatal(err)
	}
	unauth.Body.Close()
	if unauth.StatusCode != 401 || unauth.Header.Get("Strict-Transport-Security") == "" {
		t.Errorf("401 over TLS: status %d, HSTS %q; every TLS answer carries it", unauth.StatusCode, unauth.Header.Get("Strict-Transport-Security"))
	}

	tlsPort := port(t, te.addr)
	tests := []struct {
		name, method, target, host, want string
	}{
		{"GET keeps path and query", "GET", tx + "?limit=5&b=a,c", "", "https://127.0.0.1:" + tlsPort + tx + "?limit=5&b=a,c"},
		{"HEAD", "HEAD", tx, "", "https://127.0.0.1:" + tlsPort + tx},
		{"POST keeps its method with 308", "POST", "/v1/orderbook/events", "", "https://127.0.0.1:" + tlsPort + "/v1/orderbook/events"},
		{"escapes kept", "GET", "/v1/a%2Fb?q=%20x&", "", "https://127.0.0.1:" + tlsPort + "/v1/a%2Fb?q=%20x&"},
		{"the host asked for", "GET", "/v1/x", "Edge.Tradergate.Test:80", "https://edge.tradergate.test:" + tlsPort + "/v1/x"},
		{"empty query mark kept", "GET", "/?", edgeName, "https://" + edgeName + ":" + tlsPort + "/?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.host
			if host == "" {
				host = httpAddr
			}
			resp, body := rawHTTP(t, httpAddr, tc.method+" "+tc.target+" HTTP/1.1\r\nHost: "+host+
				"\r\nAuthorization: Bearer "+keyAll+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != http.StatusPermanentRedirect {
				t.Errorf("status %d, want 308", resp.StatusCode)
			}
			if got := resp.Header.Get("Location"); got != tc.want {
				t.Errorf("Location = %q, want %q", got, tc.want)
			}
			if h := resp.Header; h.Get("Strict-Transport-Security") != "" || h.Get("X-Request-Id") != "" || strings.Contains(body, "status_code") {
				t.Errorf("the plain listener ran the API or sent HSTS: %v %q", h, body)
			}
		})
	}
	t.Run("a Host that is no host name", func(t *testing.T) {
		resp, body := rawHTTP(t, httpAddr, "GET /v1/x HTTP/1.1\r\nHost: a_b!\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Errorf("status %d, Location %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
		}
	})
}

// TestTLSPortSpeaksOnlyTLS: TLS 1.2 and 1.3 only, and a plain-HTTP request
// to the TLS port never reaches the API.
func TestTLSPortSpeaksOnlyTLS(t *testing.T) {
	te, first, _, _ := filesEdge(t, `http_listen: ""`)
	dial := func(min, max uint16) (*tls.Conn, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		return tls.DialWithDialer(d, "tcp", te.addr, &tls.Config{
			RootCAs: first.Pool(), ServerName: edgeName, MinVersion: min, MaxVersion: max, NextProtos: []string{"h2"},
		})
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		if c, err := dial(v, v); err == nil {
			c.Close()
			t.Errorf("%s accepted", tls.VersionName(v))
		}
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c, err := dial(v, v)
		if err != nil {
			t.Errorf("%s refused: %v", tls.VersionName(v), err)
			continue
		}
		if st := c.ConnectionState(); st.Version != v || st.NegotiatedProtocol != "h2" {
			t.Errorf("%s: got version %s, protocol %q", tls.VersionName(v), tls.VersionName(st.Version), st.NegotiatedProtocol)
		}
		c.Close()
	}

	resp, body := rawHTTP(t, te.addr, "GET /v1/tx/"+te.sim.TradeTxs()[0]+" HTTP/1.1\r\nHost: "+edgeName+
		"\r\nAuthorization: Bearer "+keyAll+"\r\n\r\n")
	if resp.StatusCode != 400 || strings.Contains(body, "status_code") {
		t.Errorf("plain HTTP on the TLS port: %d %q", resp.StatusCode, body)
	}
}

// TestTLSFilesStartupErrors: a pair that does not load stops the edge at
// start with a message naming the field, and the port is closed, not
// answering in plain HTTP.
func TestTLSFilesStartupErrors(t *testing.T) {
	dir := t.TempDir()
	good := testkit.SelfSigned(t, "good", time.Now().Add(time.Hour), edgeName)
	other := testkit.SelfSigned(t, "other", time.Now().Add(time.Hour), edgeName)
	expired := testkit.SelfSigned(t, "expired", time.Now().Add(-time.Minute), edgeName)
	files := map[string][]byte{
		"good.crt": good.CertPEM, "good.key": good.KeyPEM, "other.key": other.KeyPEM,
		"expired.crt": expired.CertPEM, "expired.key": expired.KeyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	tests := []struct {
		name, cert, key, httpListen, want string
	}{
		{"missing certificate", "missing.crt", "good.key", "", "server.tls.cert_file: open " + filepath.Join(dir, "missing.crt")},
		{"key of another certificate", "good.crt", "other.key", "", "private key does not match public key"},
		{"expired certificate", "expired.crt", "expired.key", "", "expired at"},
		{"plain-HTTP port taken", "good.crt", "good.key", busy.Addr().String(), "server.tls.http_listen: listen tcp " + busy.Addr().String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			te := startTLSEdge(t, tlsSetup{yaml: "mode: files\ncert_file: " + strconv.Quote(filepath.Join(dir, tc.cert)) +
				"\nkey_file: " + strconv.Quote(filepath.Join(dir, tc.key)) + "\nhttp_listen: " + strconv.Quote(tc.httpListen)})
			te.errExpected = true
			err := te.wait(t)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Serve = %v, want one line containing %q", err, tc.want)
			}
			if c, err := net.DialTimeout("tcp", te.addr, time.Second); err == nil {
				c.Close()
				t.Error("the TLS port still accepts connections after a failed start")
			}
		})
	}
}
