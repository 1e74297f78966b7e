// Package upstream is the edge's client of the legacy host: it fetches the
// canonical request of a route through the upstream shield, the route's
// circuit breaker, retries within a budget and the hold after a legacy 429,
// and rewrites the answer into variant A (normalize). It returns pages and
// errors of its own kinds (Reason); the proxy decides what a client is told.
//
// Beside the lower floors (limits for the shield, normalize for the
// rewrite) it imports two neighbours: proxy/route, whose canonical request
// is what it fetches, and proxy/breaker, to log breaker changes off
// gobreaker's lock as the shared Redis's breaker does.
package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"

	"tradergate/internal/poison"
	"tradergate/normalize"
	"tradergate/proxy/route"
)

// Page is an answer ready to serve: variant A, or, for a request on the
// legacy path (route.Request.Legacy), the legacy host's variant B body.
type Page struct {
	Body []byte
	Meta normalize.Meta
}

// legacyHost calls the legacy host with the edge's own credential and
// rewrites its answers. A client's key is never forwarded
// (docs/ARCHITECTURE.md "Auth before cache").
type legacyHost struct {
	base    string
	auth    []string // {"Bearer <edge key>"}, shared by every request's header
	client  *http.Client
	maxBody int64
	shift   bool
	gzip    bool      // ask for gzip (upstream.compression)
	bufs    sync.Pool // *bodyBuf, upstream bodies
	outs    sync.Pool // *[]byte, rewrite scratch
	zrs     sync.Pool // *gzip.Reader
	// holdUntil (Unix ns) is when a 429 from the legacy host stops holding
	// every call back: the whole edge shares one legacy credential, so its
	// Retry-After applies to all of it.
	holdUntil atomic.Int64
}

// maxHold caps how long a legacy 429's Retry-After holds calls back.
const maxHold = time.Minute

func newLegacyHost(c Config, wrap func(http.RoundTripper) http.RoundTripper) *legacyHost {
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   c.DialTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout:   c.TLSHandshakeTimeout,
		ResponseHeaderTimeout: c.ResponseHeaderTimeout,
		MaxIdleConns:          c.MaxIdleConns,
		MaxIdleConnsPerHost:   c.MaxIdleConns,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
		// The edge asks for gzip itself and inflates with klauspost's
		// reader, faster than the transport's compress/gzip.
		DisableCompression: true,
	}
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(tr)
	}
	return &legacyHost{
		base:    c.BaseURL,
		auth:    []string{"Bearer " + c.Key},
		client:  &http.Client{Transport: rt, CheckRedirect: noRedirects},
		maxBody: c.MaxBodyBytes,
		shift:   c.PriceScale == PriceScaleCents,
		gzip:    c.Compression != compressionNone,
	}
}

// noRedirects: a redirect from the legacy host is an answer to report, not
// to follow with the edge's credential to wherever it points.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (u *legacyHost) close() { u.client.CloseIdleConnections() }

// held refuses a call while a legacy 429's Retry-After lasts: calling
// again would only earn another 429.
func (u *legacyHost) held() error {
	left := time.Until(time.Unix(0, u.holdUntil.Load()))
	if left <= 0 {
		return nil
	}
	return &Error{Reason: RateLimited, RetryAfter: left, Err: errors.New("holding back after a legacy 429")}
}

// hold starts holding calls back for d.
func (u *legacyHost) hold(d time.Duration) {
	until := time.Now().Add(min(max(d, time.Second), maxHold)).UnixNano()
	for {
		cur := u.holdUntil.Load()
		if cur >= until || u.holdUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// fetch makes one call to the legacy host for req, within ctx's deadline,
// and returns the rewritten page, or an *Error, or the context's error
// when the call was abandoned. Its outcome says what the call means for
// retries, the breaker and later calls; a legacy 429 starts holding calls
// back here.
func (u *legacyHost) fetch(ctx context.Context, req *route.Request, requestID string) (*Page, outcome, error) {
	page, out, err := u.call(ctx, req, requestID)
	if out.asked429 {
		u.hold(out.retryAfter)
	}
	return page, out, err
}

// call sends the request, reads the answer and rewrites it.
func (u *legacyHost) call(ctx context.Context, req *route.Request, requestID string) (*Page, outcome, error) {
	hr, err := u.request(ctx, req, requestID)
	if err != nil {
		return nil, outcome{}, fail(Unreachable, err)
	}
	resp, err := u.client.Do(hr)
	if err != nil {
		out, err := transportError(ctx, err, Unreachable)
		return nil, out, err
	}
	defer resp.Body.Close()
	buf := u.getBuf()
	defer u.putBuf(buf)
	if out, err := u.read(ctx, resp, buf); err != nil {
		return nil, out, err
	}
	body := buf.Bytes()
	if resp.StatusCode != http.StatusOK {
		out, err := statusError(resp, body)
		return nil, out, err
	}
	return u.rewrite(req, resp.StatusCode, body)
}

// The values of the request header fields every call sends alike: the
// header maps share them, since client.Do copies a request's header
// before anything could write to it.
var (
	acceptJSON = []string{"application/json"}
	acceptGzip = []string{"gzip"}
	userAgent  = []string{"tradergate"}
)

// request is the GET of req, with the edge's own credential.
func (u *legacyHost) request(ctx context.Context, req *route.Request, requestID string) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, req.UpstreamURL(u.base), nil)
	if err != nil {
		return nil, err
	}
	// One map of the fields at once, in canonical form, rather than a
	// Set (and a slice) per field.
	hr.Header = http.Header{
		"Authorization": u.auth,
		"Accept":        acceptJSON,
		"User-Agent":    userAgent,
		"X-Request-Id":  {requestID},
	}
	if u.gzip {
		hr.Header["Accept-Encoding"] = acceptGzip // pages travel compressed
	}
	return hr, nil
}

// bodyBuf is a pooled buffer of an upstream body, with the reader that
// caps what goes into it: pooled with the buffer, the cap costs a call no
// allocation.
type bodyBuf struct {
	bytes.Buffer
	limit io.LimitedReader
}

// read reads the body of resp into buf, inflated, up to
// upstream.max_body_bytes.
func (u *legacyHost) read(ctx context.Context, resp *http.Response, buf *bodyBuf) (outcome, error) {
	answered := outcome{status: resp.StatusCode}
	var src io.Reader = resp.Body
	switch enc := resp.Header.Get("Content-Encoding"); {
	case enc == "" || strings.EqualFold(enc, "identity"):
	case strings.EqualFold(enc, "gzip"):
		// Inflated even when not asked for (upstream.compression: none):
		// a host may send gzip regardless, and the page is still good.
		zr, err := u.gunzip(resp.Body)
		if err != nil {
			out, err := transportError(ctx, err, Invalid)
			out.status = resp.StatusCode
			return out, err
		}
		defer u.zrs.Put(zr)
		src = zr
	default:
		return answered, fail(Invalid, errors.New("upstream Content-Encoding "+enc+" was not asked for"))
	}
	// The cap applies to the inflated body: a small gzip bomb stays small.
	buf.limit = io.LimitedReader{R: src, N: u.maxBody + 1}
	_, err := buf.ReadFrom(&buf.limit)
	buf.limit.R = nil // the pool keeps no answer's reader
	if err != nil {
		// The answer broke off midway (a reset, a truncated body).
		out, err := transportError(ctx, err, Failed)
		out.status = resp.StatusCode
		return out, err
	}
	if int64(buf.Len()) > u.maxBody {
		return answered, fail(TooLarge, errors.New("body over upstream.max_body_bytes"))
	}
	return answered, nil
}

// rewrite turns a 200's body into the page: variant A, or the legacy
// host's own bytes for the legacy path once they pass the rewrite's checks.
// The rewrite works in pooled scratch memory, and the page is copied once
// into memory of its own size, which the cache then holds.
func (u *legacyHost) rewrite(req *route.Request, status int, body []byte) (*Page, outcome, error) {
	answered := outcome{status: status}
	scratch := u.getOut()
	defer u.putOut(scratch)
	opt := normalize.Options{Shape: req.Route.Shape, ShiftCents: u.shift, TimeField: req.Route.TimeField}
	var out []byte
	var meta normalize.Meta
	var err error
	if req.Legacy {
		out, meta, err = normalize.Verify(*scratch, body, opt)
		*scratch = out
		out = body
	} else {
		out, meta, err = normalize.Rewrite((*scratch)[:0], body, opt)
		*scratch = out[:0]
	}
	if err != nil {
		if fe, ok := errors.AsType[*normalize.FailureError](err); ok {
			// A failure envelope under a 200: trust its code. It is an
			// answer, not a failed call, so it is never retried.
			code, _ := strconv.Atoi(fe.Code)
			return nil, outcome{status: status, asked429: code == http.StatusTooManyRequests}, mapStatus(code, fe.Message, 0)
		}
		return nil, answered, fail(Invalid, err)
	}
	return &Page{Body: bytes.Clone(out), Meta: meta}, answered, nil
}

// gunzip returns a pooled gzip reader of r.
func (u *legacyHost) gunzip(r io.Reader) (*gzip.Reader, error) {
	if zr, ok := u.zrs.Get().(*gzip.Reader); ok {
		if err := zr.Reset(r); err != nil {
			u.zrs.Put(zr)
			return nil, err
		}
		return zr, nil
	}
	return gzip.NewReader(r)
}

// maxPooledOut bounds the rewrite scratch the pool keeps: after one odd
// large page (up to upstream.max_body_bytes) its buffer would otherwise go
// round the pool serving small pages until a GC drops it.
const maxPooledOut = 1 << 20

func (u *legacyHost) getOut() *[]byte {
	if b, ok := u.outs.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func (u *legacyHost) putOut(b *[]byte) {
	if cap(*b) <= maxPooledOut {
		poison.Fill((*b)[:cap(*b)])
		u.outs.Put(b)
	}
}

// putBuf gives a body buffer back, poisoned under the poison tag: no page
// may keep a slice of it.
func (u *legacyHost) putBuf(b *bodyBuf) {
	if poison.On {
		p := b.Bytes()[:0]
		poison.Fill(p[:cap(p)])
	}
	u.bufs.Put(b)
}

func (u *legacyHost) getBuf() *bodyBuf {
	if b, ok := u.bufs.Get().(*bodyBuf); ok {
		b.Reset()
		return b
	}
	return new(bodyBuf)
}
