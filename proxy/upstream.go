package proxy

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

	"tradergate/normalize"
)

// Messages of upstream failures (variant A bodies; DESIGN.md, STYLE.md
// "Errors").
const (
	msgUpstreamTimeout     = "Upstream timeout"
	msgUpstreamUnreachable = "Upstream unreachable"
	msgUpstreamError       = "Upstream error"
	msgUpstreamInvalid     = "Invalid upstream response"
	msgUpstreamTooLarge    = "Upstream response too large"
	msgUpstreamCredential  = "Upstream rejected the gateway's credential"
	msgUpstreamRateLimited = "Upstream rate limited"
)

// Page is a variant A answer ready to serve.
type Page struct {
	Body []byte
	Meta normalize.Meta
}

// upstream calls the legacy host with the edge's own credential and rewrites
// its answers. A client's key is never forwarded (SPEC "Authentication",
// DESIGN.md).
type upstream struct {
	base    string
	auth    string // "Bearer <edge key>"
	client  *http.Client
	maxBody int64
	shift   bool
	bufs    sync.Pool // *bytes.Buffer, upstream bodies
	outs    sync.Pool // *[]byte, rewrite scratch
	zrs     sync.Pool // *gzip.Reader
	// holdUntil (Unix ns) is when a 429 from the legacy host stops holding
	// every call back: the whole edge shares one legacy credential, so its
	// Retry-After applies to all of it.
	holdUntil atomic.Int64
}

// maxHold caps how long a legacy 429's Retry-After holds calls back.
const maxHold = time.Minute

func newUpstream(c UpstreamConfig) *upstream {
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
		// reader, twice as fast as the transport's compress/gzip on the
		// miss path (bench harness profile, issue 8).
		DisableCompression: true,
	}
	return &upstream{
		base:    c.BaseURL,
		auth:    "Bearer " + c.Key,
		client:  &http.Client{Transport: tr, CheckRedirect: noRedirects},
		maxBody: c.MaxBodyBytes,
		shift:   c.PriceScale == PriceScaleCents,
	}
}

// noRedirects: a redirect from the legacy host is an answer to report, not
// to follow with the edge's credential to wherever it points.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (u *upstream) close() { u.client.CloseIdleConnections() }

// held refuses a call while a legacy 429's Retry-After lasts: calling
// again would only earn another 429 (issue 5: an upstream Retry-After is
// respected).
func (u *upstream) held() error {
	left := time.Until(time.Unix(0, u.holdUntil.Load()))
	if left <= 0 {
		return nil
	}
	return &Error{Status: http.StatusServiceUnavailable, Message: msgUpstreamRateLimited,
		RetryAfter: left, upstream429: true, Err: errors.New("holding back after a legacy 429")}
}

// hold starts holding calls back for d.
func (u *upstream) hold(d time.Duration) {
	until := time.Now().Add(min(max(d, time.Second), maxHold)).UnixNano()
	for {
		cur := u.holdUntil.Load()
		if cur >= until || u.holdUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// fetch makes one call to the legacy host for req, within ctx's deadline,
// and returns the rewritten page. Errors are *Error values with the status
// the client gets (upstream 400 -> 400, 401/403 -> 502, 429 -> 503, 5xx
// and unreachable -> 502, timeout -> 504), or the context's error when the
// call was abandoned.
func (u *upstream) fetch(ctx context.Context, req *Request, requestID string) (*Page, int, error) {
	target := u.base + req.UpstreamPath()
	if req.RawQuery != "" {
		target += "?" + req.RawQuery
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, 0, &Error{Status: http.StatusBadGateway, Message: msgUpstreamUnreachable, Err: err}
	}
	hr.Header.Set("Authorization", u.auth)
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("Accept-Encoding", "gzip") // issue 3: request gzip from the legacy host
	hr.Header.Set("User-Agent", "tradergate")
	hr.Header.Set("X-Request-Id", requestID)

	resp, err := u.client.Do(hr)
	if err != nil {
		return nil, 0, transportError(ctx, err, msgUpstreamUnreachable)
	}
	defer resp.Body.Close()

	var src io.Reader = resp.Body
	switch enc := resp.Header.Get("Content-Encoding"); {
	case enc == "" || strings.EqualFold(enc, "identity"):
	case strings.EqualFold(enc, "gzip"):
		zr, err := u.gunzip(resp.Body)
		if err != nil {
			return nil, resp.StatusCode, transportError(ctx, err, msgUpstreamInvalid)
		}
		defer u.zrs.Put(zr)
		src = zr
	default:
		return nil, resp.StatusCode, &Error{Status: http.StatusBadGateway, Message: msgUpstreamInvalid,
			Err: errors.New("upstream Content-Encoding " + enc + " was not asked for")}
	}
	buf := u.getBuf()
	defer u.bufs.Put(buf)
	// The cap applies to the inflated body: a small gzip bomb stays small.
	if _, err := buf.ReadFrom(io.LimitReader(src, u.maxBody+1)); err != nil {
		// The answer broke off midway (a reset, a truncated body).
		return nil, resp.StatusCode, transportError(ctx, err, msgUpstreamError)
	}
	if int64(buf.Len()) > u.maxBody {
		return nil, resp.StatusCode, &Error{Status: http.StatusBadGateway, Message: msgUpstreamTooLarge,
			Err: errors.New("body over upstream.max_body_bytes")}
	}
	body := buf.Bytes()

	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, u.failed(statusError(resp, body))
	}
	// The rewrite writes into a pooled scratch buffer, then the page is
	// copied once into memory of its own size. Rewriting straight into a
	// new allocation (sized 1/8 over the input, in case it grows) made each
	// of the rewrite's many small appends store into cold memory: under
	// the bench harness's miss load (issue 8) the rewrite took 43 µs a page
	// instead of the 15 µs of a hot loop. Now it takes ~14 µs, and the one
	// bulk copy pays for the fresh memory instead; the cache holds (and
	// charges, store.go) ~6% less per page.
	scratch := u.getOut()
	defer u.putOut(scratch)
	out, meta, err := normalize.Rewrite((*scratch)[:0], body,
		normalize.Options{Shape: req.Route.Shape, ShiftCents: u.shift, TimeField: req.Route.TimeField})
	*scratch = out[:0]
	if err != nil {
		if fe, ok := errors.AsType[*normalize.FailureError](err); ok {
			// A failure envelope under a 200: trust its code.
			code, _ := strconv.Atoi(fe.Code)
			return nil, resp.StatusCode, u.failed(mapStatus(code, fe.Message, 0))
		}
		return nil, resp.StatusCode, &Error{Status: http.StatusBadGateway, Message: msgUpstreamInvalid, Err: err}
	}
	return &Page{Body: bytes.Clone(out), Meta: meta}, resp.StatusCode, nil
}

// failed notes what a legacy failure means for later calls: a 429 holds
// them back.
func (u *upstream) failed(err error) error {
	if e, ok := errors.AsType[*Error](err); ok && e.upstream429 {
		u.hold(e.upstreamRetryAfter)
	}
	return err
}

// gunzip returns a pooled gzip reader of r.
func (u *upstream) gunzip(r io.Reader) (*gzip.Reader, error) {
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

func (u *upstream) getOut() *[]byte {
	if b, ok := u.outs.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func (u *upstream) putOut(b *[]byte) {
	if cap(*b) <= maxPooledOut {
		u.outs.Put(b)
	}
}

func (u *upstream) getBuf() *bytes.Buffer {
	if b, ok := u.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// transportError classifies a failed call: our deadline is a 504, the
// caller's cancellation stays a context error (499 in logs), anything else
// is a 502 with msg.
func transportError(ctx context.Context, err error, msg string) error {
	if ctx.Err() == context.DeadlineExceeded || isTimeout(err) {
		return &Error{Status: http.StatusGatewayTimeout, Message: msgUpstreamTimeout, Err: err}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &Error{Status: http.StatusBadGateway, Message: msg, Err: err, connFailed: true}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// statusError maps a non-200 legacy answer.
func statusError(resp *http.Response, body []byte) error {
	_, msg, ok := normalize.Failure(body)
	if !ok && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
		// A 4xx without a variant B body is not the legacy API talking
		// (a wrong base_url, a proxy in between): the client's request is
		// not at fault.
		return &Error{Status: http.StatusBadGateway, Message: msgUpstreamInvalid,
			Err: errors.New("upstream " + resp.Status + " without an envelope")}
	}
	err := mapStatus(resp.StatusCode, msg, parseRetryAfter(resp.Header.Get("Retry-After")))
	if e, ok := errors.AsType[*Error](err); ok {
		e.upstreamStatus = resp.StatusCode
		e.upstreamRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	}
	return err
}

// mapStatus is the table of upstream statuses (issue 2 item 6).
func mapStatus(code int, msg string, retryAfter time.Duration) error {
	cause := errors.New("upstream answered " + strconv.Itoa(code) + ": " + msg)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// The edge's own credential was refused: not the client's fault,
		// and the upstream message must not reach the client.
		return &Error{Status: http.StatusBadGateway, Message: msgUpstreamCredential, Err: cause}
	case code == http.StatusTooManyRequests:
		// The edge as a whole is over the legacy host's limit, not this
		// client: 503 with the upstream's Retry-After.
		return &Error{Status: http.StatusServiceUnavailable, Message: msgUpstreamRateLimited,
			RetryAfter: max(retryAfter, time.Second), Err: cause, upstream429: true}
	case code >= 400 && code < 500:
		if msg == "" {
			msg = http.StatusText(code)
		}
		return &Error{Status: code, Message: msg, Err: cause}
	default:
		return &Error{Status: http.StatusBadGateway, Message: msgUpstreamError, Err: cause}
	}
}

// parseRetryAfter reads delay-seconds or an HTTP-date (RFC 9110 section
// 10.2.3); zero when absent or unreadable.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
