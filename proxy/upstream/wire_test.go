package upstream

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tradergate/legacysim"
	"tradergate/proxy/route"
)

// testHost is a legacyHost on base (the legacy host's URL with its
// prefix), its config changed by edit.
func testHost(t *testing.T, base string, edit func(*Config)) *legacyHost {
	t.Helper()
	u := newLegacyHost(testConfig(t, base, edit), Options{})
	t.Cleanup(u.close)
	return u
}

func testConfig(t *testing.T, base string, edit func(*Config)) Config {
	t.Helper()
	return testConfigEnv(t, base, nil, edit)
}

// testConfigEnv is testConfig with the variables env set besides the
// key's (K): the process's own environment is never read.
func testConfigEnv(t *testing.T, base string, env map[string]string, edit func(*Config)) Config {
	t.Helper()
	c := Config{BaseURL: base, KeyEnv: "K"}
	c.ApplyDefaults()
	if edit != nil {
		edit(&c)
	}
	getenv := func(v string) string {
		if v == "K" {
			return "k"
		}
		return env[v]
	}
	if err := c.Validate(getenv); err != nil {
		t.Fatal(err)
	}
	return c
}

// activity is the activity request of wallet.
func activity(t *testing.T, wallet string) *route.Request {
	t.Helper()
	req, err := route.NewTable().ByName(route.Activity).Validate(wallet, "")
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// call makes one call within a second, as Fetch would.
func call(t *testing.T, u *legacyHost, req *route.Request) (*Page, outcome, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return u.call(ctx, req, "rid")
}

// reason is err's Reason, or "none" when err is not an *Error.
func reason(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Reason.String()
	}
	return "none"
}

// The legacy host's pages come over one kept connection, compressed or
// not, rewritten; the request carries the edge's credential and the
// request id, never anything else of a client's.
func TestLegacyCallsKeepTheirConnection(t *testing.T) {
	for _, compression := range []string{compressionGzip, compressionNone} {
		t.Run(compression, func(t *testing.T) {
			sim := legacysim.New(legacysim.Config{Key: "k"})
			var conns atomic.Int32
			var seen atomic.Pointer[http.Header]
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h := r.Header.Clone()
				seen.Store(&h)
				sim.ServeHTTP(w, r)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			u := testHost(t, srv.URL+"/open-api", func(c *Config) { c.Compression = compression })
			req := activity(t, sim.Wallets()[0])
			for range 3 {
				page, out, err := call(t, u, req)
				if err != nil || out.status != 200 || !strings.HasPrefix(string(page.Body), "[") && !strings.HasPrefix(string(page.Body), "{") {
					t.Fatalf("call: %v, status %d", err, out.status)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("%d connections for three calls, want 1", n)
			}
			h := *seen.Load()
			if h.Get("Authorization") != "Bearer k" || h.Get("X-Request-Id") != "rid" || h.Get("User-Agent") != "tradergate" {
				t.Errorf("request header %v", h)
			}
			if got, want := h.Get("Accept-Encoding"), map[string]string{compressionGzip: "gzip"}[compression]; got != want {
				t.Errorf("Accept-Encoding %q, want %q", got, want)
			}
		})
	}
}

// A call ends when its context does, mid-answer, with the context's
// error, and its connection is not kept.
func TestLegacyCallEndsWithItsContext(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	u := testHost(t, srv.URL, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, out, err := u.call(ctx, activity(t, "0x"+strings.Repeat("a", 40)), "rid")
	if !errors.Is(err, context.Canceled) || out.connFailed {
		t.Fatalf("call ended with %v (%+v), want the context's error", err, out)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the call took %v after its context ended", took)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the legacy host still holds the connection of an ended call")
	}
	if n := u.pool.IdleConnsCount(); n != 0 {
		t.Errorf("%d idle connections kept after an ended call", n)
	}
}

// A kept connection the legacy host closed while it was idle costs the
// next call nothing: it goes again on a new connection.
func TestLegacyCallSurvivesAClosedKeptConnection(t *testing.T) {
	sim := legacysim.New(legacysim.Config{Key: "k"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	u := testHost(t, srv.URL+"/open-api", nil)
	req := activity(t, sim.Wallets()[0])
	if _, _, err := call(t, u, req); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	if _, _, err := call(t, u, req); err != nil {
		t.Fatalf("the call after the legacy host closed the kept connection: %v", err)
	}
}

// rawHost serves each connection with answer: the bytes it writes after
// reading a request's header.
func rawHost(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			_, _ = c.Read(buf) // the request's header, in one read on loopback
			answer(c)
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}

// What goes wrong on the wire, by kind: no header in time is a Timeout,
// a body that breaks off Failed (with the status that came), a body over
// max_body_bytes TooLarge, a refused connection or a header that never
// comes whole Unreachable.
func TestLegacyCallFailures(t *testing.T) {
	req := activity(t, "0x"+strings.Repeat("b", 40))
	for _, tc := range []struct {
		name   string
		answer func(net.Conn)
		want   Reason
		status int
	}{
		{"no header in time", func(net.Conn) { time.Sleep(300 * time.Millisecond) }, Timeout, 0},
		{"body broken off", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"success\":")
		}, Failed, 200},
		{"chunked body broken off", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"suc\r\n")
		}, Failed, 200},
		{"body too large", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n"+strings.Repeat(" ", 4096))
		}, TooLarge, 200},
		{"header broken off", func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le") }, Unreachable, 0},
		// Counted, not left to the header's deadline: a Timeout here would
		// mean the interim answers were read until it.
		{"interim answers without end", func(c net.Conn) {
			io.WriteString(c, strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 1000))
			time.Sleep(300 * time.Millisecond)
		}, Unreachable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testHost(t, rawHost(t, tc.answer), func(c *Config) {
				c.ResponseHeaderTimeout = 100 * time.Millisecond
				c.MaxBodyBytes = 1024
			})
			_, out, err := call(t, u, req)
			if reason(err) != tc.want.String() || out.status != tc.status {
				t.Errorf("got %v (reason %v, status %d), want reason %v, status %d", err, reason(err), out.status, tc.want, tc.status)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		u := testHost(t, "http://"+addr, nil)
		if _, out, err := call(t, u, req); reason(err) != Unreachable.String() || !out.connFailed {
			t.Errorf("got %v (%+v), want Unreachable", err, out)
		}
	})
}

// An https legacy host: the pool's connections are TLS of the dial's own,
// checked against the roots, the handshake bounded by
// tls_handshake_timeout.
func TestLegacyCallOverTLS(t *testing.T) {
	sim := legacysim.New(legacysim.Config{Key: "k"})
	srv := httptest.NewTLSServer(sim)
	t.Cleanup(srv.Close)
	req := activity(t, sim.Wallets()[0])
	u := testHost(t, srv.URL+"/open-api", nil)
	// The test server's certificate is its own, not under the system's
	// roots: the handshake fails, as it must.
	if _, out, err := call(t, u, req); reason(err) != Unreachable.String() || !out.connFailed {
		t.Errorf("a certificate nobody trusts: got %v, want Unreachable", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	base, _ := url.Parse(srv.URL)
	u.pool = newPool(testConfig(t, srv.URL, nil), base, roots)
	if _, out, err := call(t, u, req); err != nil || out.status != 200 {
		t.Errorf("with the server's certificate trusted: %v, status %d", err, out.status)
	}
	// A handshake that never comes ends at the timeout.
	stall := rawHost(t, func(net.Conn) { time.Sleep(time.Second) })
	u = testHost(t, "https"+strings.TrimPrefix(stall, "http"), func(c *Config) { c.TLSHandshakeTimeout = 100 * time.Millisecond })
	start := time.Now()
	if _, _, err := call(t, u, req); reason(err) != Timeout.String() || time.Since(start) > 800*time.Millisecond {
		t.Errorf("a stalled handshake: %v after %v, want a Timeout at 100ms", err, time.Since(start))
	}
}

// A handshake late in a call ends with the call: it gets what is left
// of the call's time, not tls_handshake_timeout whole. (The connect:
// wire_linux_test.go.)
func TestLegacyHandshakeEndsWithTheCall(t *testing.T) {
	// A host that takes the connection and never answers the handshake.
	stall := rawHost(t, func(net.Conn) { time.Sleep(1500 * time.Millisecond) })
	endsWithTheCall(t, "https"+strings.TrimPrefix(stall, "http"))
}

// endsWithTheCall fails unless a call of 200ms to base, whose dial and
// handshake timeouts are 5s, ends with a Timeout within a second.
func endsWithTheCall(t *testing.T, base string) {
	t.Helper()
	u := testHost(t, base, func(c *Config) { c.DialTimeout, c.TLSHandshakeTimeout = 5*time.Second, 5*time.Second })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := u.call(ctx, activity(t, "0x"+strings.Repeat("a", 40)), "rid")
	if took := time.Since(start); err == nil || took > time.Second {
		t.Fatalf("a call of 200ms ended after %v with %v, want an error at its deadline", took, err)
	}
	if reason(err) != Timeout.String() {
		t.Errorf("error %v (%s), want a Timeout", err, reason(err))
	}
}

// connectProxy is an HTTP proxy on loopback that only tunnels (CONNECT),
// every tunnel to the address to whatever host the client names. It
// returns the proxy's URL and, as they come, the hosts named.
func connectProxy(t *testing.T, to string) (string, <-chan string) {
	t.Helper()
	named := make(chan string, 16)
	var tunnels sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		named <- r.Host
		up, err := net.Dial("tcp", to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		client, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		tunnels.Add(2)
		pipe := func(dst net.Conn, src io.Reader) {
			defer tunnels.Done()
			_, _ = io.Copy(dst, src)
			// Either side ending ends the tunnel.
			dst.Close()
			up.Close()
			client.Close()
		}
		go pipe(up, rw) // what the client sent after CONNECT may be buffered
		go pipe(client, up)
	}))
	t.Cleanup(func() { srv.Close(); tunnels.Wait() })
	return srv.URL, named
}

// A legacy host named in HTTP_PROXY's reach is called through a CONNECT
// tunnel; one on loopback is called directly whatever the proxy variables
// say, as net/http's clients (the native backend's among them) do.
func TestLegacyCallThroughAProxy(t *testing.T) {
	sim := legacysim.New(legacysim.Config{Key: "k"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	target := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(target)
	proxyURL, named := connectProxy(t, target)
	env := map[string]string{"HTTP_PROXY": proxyURL}
	req := activity(t, sim.Wallets()[0])

	for _, tc := range []struct {
		name, base, tunnel string
	}{
		// legacy.invalid resolves nowhere (RFC 6761): only the proxy, which
		// sends it to the simulator, can reach it.
		{"named host through the proxy", "http://legacy.invalid:" + port + "/open-api", "legacy.invalid:" + port},
		{"loopback directly", srv.URL + "/open-api", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newLegacyHost(testConfigEnv(t, tc.base, env, nil), Options{})
			t.Cleanup(u.close)
			for range 2 {
				if _, out, err := call(t, u, req); err != nil || out.status != http.StatusOK {
					t.Fatalf("call: %v, status %d", err, out.status)
				}
			}
			var got []string
			for len(named) > 0 {
				got = append(got, <-named)
			}
			want := []string{tc.tunnel} // one tunnel, kept for both calls
			if tc.tunnel == "" {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Errorf("tunnels to %q, want %q", got, want)
			}
		})
	}
}

// A proxy variable the legacy pool cannot use is refused at start, named
// and never quoted; one that does not apply to the host (its scheme's
// other variable, NO_PROXY, loopback) is not looked at.
func TestProxyVariablesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		base string
		env  map[string]string
		want string // "": valid
	}{
		{"http://legacy.example/open-api", map[string]string{"HTTP_PROXY": "http://user:s3cret@proxy.example:3128"}, ""},
		{"http://legacy.example/open-api", map[string]string{"http_proxy": "proxy.example:3128"}, ""},
		{"https://legacy.example/open-api", map[string]string{"HTTPS_PROXY": "socks5://user:s3cret@proxy.example:1080"}, ""},
		{"https://legacy.example/open-api", map[string]string{"HTTPS_PROXY": "https://user:s3cret@proxy.example:3129"}, `HTTPS_PROXY has the scheme "https"`},
		{"http://legacy.example/open-api", map[string]string{"HTTP_PROXY": "http://user:s3cret@[::1"}, "HTTP_PROXY (or its lower-case form) is not a proxy URL"},
		{"http://legacy.example/open-api", map[string]string{"HTTP_PROXY": "http://user:s3cret@[::1", "REQUEST_METHOD": "GET"}, "refusing to use HTTP_PROXY value in CGI environment"},
		// Variables that do not apply to the host.
		{"http://legacy.example/open-api", map[string]string{"HTTPS_PROXY": "https://user:s3cret@proxy.example"}, ""},
		{"https://legacy.example/open-api", map[string]string{"HTTPS_PROXY": "https://user:s3cret@proxy.example", "NO_PROXY": ".example"}, ""},
		{"http://127.0.0.1:8080/open-api", map[string]string{"HTTP_PROXY": "https://user:s3cret@proxy.example"}, ""},
	} {
		env := map[string]string{"K": "k"}
		maps.Copy(env, tc.env)
		c := Config{BaseURL: tc.base, KeyEnv: "K"}
		c.ApplyDefaults()
		err := c.Validate(func(v string) string { return env[v] })
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %v: %v", tc.base, tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "upstream.base_url: is reached through a proxy: "+tc.want)):
			t.Errorf("%s %v: %v, want %q", tc.base, tc.env, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("the error quotes the variable: %v", err)
		}
	}
}
