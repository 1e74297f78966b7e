package upstream

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpproxy"
	"golang.org/x/net/http/httpproxy"
)

// The legacy call on the wire: HTTP/1.1 over fasthttp's connection pool
// (HostClient), one request and one answer per connection at a time.
// fasthttp's client costs about half the CPU of net/http's per call and
// starts no goroutine per connection (docs/BENCHMARKS.md, "The miss again,
// nginx's cache on tmpfs"). Its Do cannot be cancelled, and a call must
// end when its context does (the route's breaker opening mid-call, the
// edge shutting down), so the exchange is written here on the pool's
// public parts (AcquireConn, ReleaseConn, CloseConn): a context that ends
// moves the connection's deadline into the past, which ends any read or
// write under way at once.

// exchange is one call's request and answer, pooled with the buffers
// that go with them.
type exchange struct {
	req      fasthttp.Request
	resp     fasthttp.Response
	target   []byte       // the request target (path and query)
	raw      bytes.Reader // the answer's body, for the gzip reader
	limit    io.LimitedReader
	inflated bytes.Buffer // the body inflated
}

// staleTries bounds the calls a request makes on kept connections the
// legacy host had closed while idle before it is given a new one.
const staleTries = 3

// idleConnTimeout is how long a kept connection may wait for its next call.
const idleConnTimeout = 90 * time.Second

// newPool is the connection pool to the legacy host at base: dialled
// directly or through c.Proxy (CONNECT, or SOCKS5), with TLS of its own
// for an https base, checked against roots (nil: the system's).
//
// A dial gets what is left of its call's time (try passes it to
// AcquireConn): the connect, a proxy's CONNECT and the TLS handshake end
// by the call's deadline as well as by their own timeouts, so a call that
// dials late in upstream.timeout still ends with it. A context cancelled
// without a deadline does not stop a dial; the dial's own timeouts bound it.
func newPool(c Config, base *url.URL, roots *x509.CertPool) *fasthttp.HostClient {
	isTLS := base.Scheme == "https"
	// The pool has one host, so whether it goes through a proxy was
	// decided once, by Config.Validate (c.Proxy, legacyProxy).
	var proxies httpproxy.Config
	if c.Proxy != nil {
		proxies = httpproxy.Config{HTTPProxy: c.Proxy.String(), HTTPSProxy: c.Proxy.String()}
	}
	dial := func(addr string, within time.Duration) (net.Conn, error) {
		start := time.Now()
		timeout := c.DialTimeout
		byCall := within > 0 && within < timeout // the call's deadline bounds the connect
		if byCall {
			timeout = within
		}
		d := &fasthttpproxy.Dialer{Config: proxies, Timeout: timeout, ConnectTimeout: timeout, DialDualStack: true,
			// Go's resolver on each dial, as net/http's: fasthttp's DNS cache
			// would start a goroutine that outlives the client by minutes.
			TCPDialer: fasthttp.TCPDialer{DisableDNSResolution: true}}
		dialer := func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) } // direct
		if c.Proxy != nil {
			viaProxy, err := d.GetDialFuncForTLS(false, isTLS)
			if err != nil {
				return nil, err
			}
			dialer = viaProxy
		}
		conn, err := dialer(addr)
		if byCall && errors.Is(err, fasthttp.ErrDialTimeout) {
			// The call's deadline ended the connect: a Timeout, not an
			// unreachable host, whether or not the context has noticed
			// yet (fasthttp's error does not say which bound it hit).
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		if err != nil || !isTLS {
			return conn, err
		}
		timeout = c.TLSHandshakeTimeout
		if left := within - time.Since(start); within > 0 && left < timeout {
			timeout = left
		}
		return handshake(conn, &tls.Config{ServerName: base.Hostname(), RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, timeout)
	}
	return &fasthttp.HostClient{
		Addr: fasthttp.AddMissingPort(base.Host, isTLS),
		// TLS is the dial's own (handshake), so that its timeout is
		// upstream.tls_handshake_timeout; the pool sees a *tls.Conn.
		DialTimeout: dial,
		// The shield bounds the calls at once (upstream.max_concurrent);
		// the pool does not refuse any the shield lets through.
		MaxConns:            math.MaxInt32,
		MaxIdleConnDuration: idleConnTimeout,
		// A page of 20 items is 12 to 16 KB from the legacy host: with
		// fasthttp's 4 KiB the header's read took the first 4 KiB and the
		// body a second read. The reader is the call's, pooled, not the
		// idle connection's, so the bytes are held only by calls under way.
		ReadBufferSize: legacyReadBuffer,
	}
}

// proxyVars are the proxy variables of getenv, upper case first, as
// net/http reads them (httpproxy.FromEnvironment).
func proxyVars(getenv func(string) string) httpproxy.Config {
	either := func(upper, lower string) string { return cmp.Or(getenv(upper), getenv(lower)) }
	return httpproxy.Config{
		HTTPProxy:  either("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: either("HTTPS_PROXY", "https_proxy"),
		NoProxy:    either("NO_PROXY", "no_proxy"),
		CGI:        getenv("REQUEST_METHOD") != "",
	}
}

// legacyProxy is the proxy through which the legacy host at base is
// dialled under the variables p, or nil to dial it directly: none is set
// for its scheme, NO_PROXY names it, or it is localhost or a loopback
// address. That is net/http's rule; fasthttpproxy's own decides by a
// placeholder host whenever NO_PROXY is empty, which would send a legacy
// host on loopback through the proxy.
//
// A variable that applies but cannot be used is an error naming it and
// never quoting it (it may hold credentials): net/http would skip it
// without a word and dial directly, and fasthttpproxy fails every call on
// a scheme it does not speak.
func legacyProxy(base *url.URL, p httpproxy.Config) (*url.URL, error) {
	name, raw := "HTTP_PROXY", p.HTTPProxy
	if base.Scheme == "https" {
		name, raw = "HTTPS_PROXY", p.HTTPSProxy
	}
	if raw == "" {
		return nil, nil
	}
	// net/http's rule with a value it can parse: does the proxy apply?
	probe := p
	probe.HTTPProxy, probe.HTTPSProxy = "proxy.invalid:1", "proxy.invalid:1"
	if u, err := probe.ProxyFunc()(&url.URL{Scheme: base.Scheme, Host: base.Host}); u == nil || err != nil {
		return nil, err // direct, or refused in a CGI environment
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw // a bare host:port, as net/http reads it
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return nil, fmt.Errorf("%s (or its lower-case form) is not a proxy URL", name)
	case u.Scheme != "http" && u.Scheme != "socks5" && u.Scheme != "socks5h":
		return nil, fmt.Errorf("%s has the scheme %q: the legacy host is reached through a proxy by http (CONNECT) or socks5", name, u.Scheme)
	}
	return u, nil
}

// legacyReadBuffer is the read buffer of a legacy call (roundTrip):
// an answer that fits is read in one system call.
const legacyReadBuffer = 32 << 10

// handshake runs the TLS handshake of cfg with the legacy host over conn
// within timeout.
func handshake(conn net.Conn, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	tc := tls.Client(conn, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// roundTrip sends x's request and reads its answer, on a kept connection
// or a new one. answered: the answer's header came, so an error is the
// body's. A kept connection the legacy host closed while it was idle
// fails before any answer; the request then goes again on another, as
// net/http's transport does for a request without a body.
func (u *legacyHost) roundTrip(ctx context.Context, x *exchange) (answered bool, err error) {
	for n := 1; ; n++ {
		var reused bool
		reused, answered, err = u.try(ctx, x)
		if err == nil || answered || !reused || n == staleTries || ctx.Err() != nil || isTimeout(err) {
			return answered, err
		}
	}
}

// longAgo is a deadline in the past: it ends a connection's reads and
// writes under way.
var longAgo = time.Unix(1, 0)

// maxInterim bounds the interim (1xx) answers read before the final one.
// The header deadline bounds them in time already; this bounds them in
// count, as fasthttp's own client does.
const maxInterim = 100

var errTooManyInterim = errors.New("legacy host sent " + strconv.Itoa(maxInterim) + " interim (1xx) answers and no final one")

// try is one try of roundTrip on one connection. reused: the connection
// had served a call before.
func (u *legacyHost) try(ctx context.Context, x *exchange) (reused, answered bool, err error) {
	x.resp.Reset()
	var within time.Duration // what is left of the call's time, for a dial; 0: no deadline
	if deadline, ok := ctx.Deadline(); ok {
		if within = time.Until(deadline); within <= 0 {
			return false, false, context.DeadlineExceeded
		}
	}
	cc, err := u.pool.AcquireConn(within, false)
	if err != nil {
		return false, false, err
	}
	conn := cc.Conn()
	reused = !cc.LastUseTime().IsZero()
	deadline, _ := ctx.Deadline() // Fetch's timeout; none: no bound but the header's
	headerBy := deadline
	if t := time.Now().Add(u.headerTimeout); u.headerTimeout > 0 && (deadline.IsZero() || t.Before(deadline)) {
		headerBy = t
	}
	keep := false
	if err = conn.SetWriteDeadline(deadline); err == nil {
		err = conn.SetReadDeadline(headerBy)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(longAgo) })
	defer func() {
		if !stop() {
			// The context ended: its error, not the deadline's it caused.
			keep, err = false, ctx.Err()
		}
		// The pool has no bound of its own on idle connections, so the
		// count is read first: one more uncontended lock of the pool's.
		if keep && u.pool.IdleConnsCount() < u.maxIdle {
			u.pool.ReleaseConn(cc)
		} else {
			u.pool.CloseConn(cc)
		}
	}()
	if err != nil {
		return reused, false, err
	}

	bw := u.pool.AcquireWriter(conn)
	err = x.req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	u.pool.ReleaseWriter(bw)
	if err != nil {
		return reused, false, err
	}

	br := u.pool.AcquireReader(conn)
	defer u.pool.ReleaseReader(br)
	for interim := 0; ; interim++ {
		if interim == maxInterim {
			return reused, false, errTooManyInterim
		}
		if err = x.resp.Header.Read(br); err != nil {
			return reused, false, err
		}
		if s := x.resp.StatusCode(); s >= 200 || s == fasthttp.StatusSwitchingProtocols {
			break
		}
		// 1xx: an interim answer; the final one follows.
	}
	// The header came in time: the body has what is left of the call's.
	if err = conn.SetReadDeadline(deadline); err != nil {
		return reused, true, err
	}
	if err = ctx.Err(); err != nil {
		// Ended between the header and the deadline above, which may have
		// undone the context's.
		return reused, true, err
	}
	n := x.resp.Header.ContentLength()
	if s := x.resp.StatusCode(); s != fasthttp.StatusNoContent && s != fasthttp.StatusNotModified {
		if err = x.resp.ReadBody(br, int(u.maxBody)); err == nil && n == -1 {
			// Chunked: the trailer section ends the answer.
			if err = x.resp.Header.ReadTrailer(br); err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
		}
		if err != nil {
			return reused, true, err
		}
	}
	// A body that ran to the connection's end (no length, not chunked)
	// leaves nothing to keep.
	keep = n >= -1 && !x.resp.ConnectionClose()
	return reused, true, nil
}

// headerCarrier lets a propagator write traceparent into a request's
// header.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }

func (c headerCarrier) Keys() []string {
	var keys []string
	for k := range c.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}
