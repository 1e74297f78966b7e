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
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

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
// (docs/ARCHITECTURE.md "Auth before cache"). Its calls go over HTTP/1.1
// on fasthttp's connection pool (wire.go).
type legacyHost struct {
	host    string // the Host field: base_url's host[:port]
	prefix  string // base_url's path (/open-api), before each route's
	auth    string // "Bearer <edge key>"
	pool    *fasthttp.HostClient
	maxIdle int // upstream.max_idle_conns: idle connections kept
	// headerTimeout bounds the wait for the answer's header after the
	// request is sent (upstream.response_header_timeout).
	headerTimeout time.Duration
	maxBody       int64
	shift         bool
	gzip          bool      // ask for gzip (upstream.compression)
	exchanges     sync.Pool // *exchange
	zrs           sync.Pool // *gzip.Reader
	outs          sync.Pool // *[]byte, rewrite scratch
	// tracer and propagator, when set: a client span per call, and its
	// traceparent to the legacy host.
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	// holdUntil (Unix ns) is when a 429 from the legacy host stops holding
	// every call back: the whole edge shares one legacy credential, so its
	// Retry-After applies to all of it.
	holdUntil atomic.Int64
}

// maxHold caps how long a legacy 429's Retry-After holds calls back.
const maxHold = time.Minute

func newLegacyHost(c Config, opt Options) *legacyHost {
	bu, _ := url.Parse(c.BaseURL) // Config.Validate checked it
	u := &legacyHost{
		host:          bu.Host,
		prefix:        bu.EscapedPath(),
		auth:          "Bearer " + c.Key,
		maxIdle:       c.MaxIdleConns,
		headerTimeout: c.ResponseHeaderTimeout,
		maxBody:       c.MaxBodyBytes,
		shift:         c.PriceScale == PriceScaleCents,
		gzip:          c.Compression != compressionNone,
		tracer:        opt.Tracer,
		propagator:    opt.Propagator,
	}
	u.pool = newPool(c, bu, nil)
	return u
}

func (u *legacyHost) close() { u.pool.CloseIdleConnections() }

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
func (u *legacyHost) call(ctx context.Context, req *route.Request, requestID string) (_ *Page, out outcome, err error) {
	x := u.getExchange()
	defer u.putExchange(x)
	if u.tracer != nil {
		var span trace.Span
		ctx, span = u.tracer.Start(ctx, "GET", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("http.request.method", http.MethodGet), attribute.String("server.address", u.host)))
		defer func() {
			if out.status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", out.status))
			}
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
	}
	u.request(ctx, x, req, requestID)
	if answered, err := u.roundTrip(ctx, x); err != nil {
		reason := Unreachable
		if answered {
			// The answer broke off midway (a reset, a truncated body).
			reason = Failed
		}
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return nil, outcome{status: x.resp.StatusCode()}, fail(TooLarge, errors.New("body over upstream.max_body_bytes"))
		}
		out, err := transportError(ctx, err, reason)
		if answered {
			out.status = x.resp.StatusCode()
		}
		return nil, out, err
	}
	status := x.resp.StatusCode()
	body, err := u.read(x)
	if err != nil {
		return nil, outcome{status: status}, err
	}
	if status != http.StatusOK {
		out, err := statusError(status, string(x.resp.Header.Peek("Retry-After")), body)
		return nil, out, err
	}
	return u.rewrite(req, status, body)
}

// request fills x's request: the GET of req, with the edge's own
// credential, and the trace's traceparent when tracing is on.
func (u *legacyHost) request(ctx context.Context, x *exchange, req *route.Request, requestID string) {
	h := &x.req.Header
	x.target = req.AppendUpstreamURL(x.target[:0], u.prefix)
	h.SetRequestURIBytes(x.target)
	h.SetHost(u.host)
	h.Set("Authorization", u.auth)
	h.Set("Accept", "application/json")
	h.Set("User-Agent", "tradergate")
	h.Set("X-Request-Id", requestID)
	if u.gzip {
		h.Set("Accept-Encoding", "gzip") // pages travel compressed
	}
	if u.propagator != nil {
		u.propagator.Inject(ctx, headerCarrier{h})
	}
}

// read returns the body of x's answer, inflated, up to
// upstream.max_body_bytes. It is x's memory: valid until x goes back.
func (u *legacyHost) read(x *exchange) ([]byte, error) {
	raw := x.resp.Body()
	switch enc := x.resp.Header.ContentEncoding(); {
	case len(enc) == 0 || bytes.EqualFold(enc, []byte("identity")):
		return raw, nil
	case bytes.EqualFold(enc, []byte("gzip")):
		// Inflated even when not asked for (upstream.compression: none):
		// a host may send gzip regardless, and the page is still good.
	default:
		return nil, fail(Invalid, errors.New("upstream Content-Encoding "+string(enc)+" was not asked for"))
	}
	x.raw.Reset(raw)
	zr, err := u.gunzip(&x.raw)
	if err != nil {
		return nil, fail(Invalid, err)
	}
	defer u.zrs.Put(zr)
	// The cap applies to the inflated body too: a small gzip bomb stays
	// small.
	x.limit = io.LimitedReader{R: zr, N: u.maxBody + 1}
	_, err = x.inflated.ReadFrom(&x.limit)
	x.limit.R = nil // the pool keeps no answer's reader
	if err != nil {
		// The body was all read: a corrupt or cut gzip stream.
		return nil, fail(Invalid, err)
	}
	if int64(x.inflated.Len()) > u.maxBody {
		return nil, fail(TooLarge, errors.New("body over upstream.max_body_bytes"))
	}
	return x.inflated.Bytes(), nil
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

// getExchange returns a pooled exchange, ready for a call.
func (u *legacyHost) getExchange() *exchange {
	if x, ok := u.exchanges.Get().(*exchange); ok {
		return x
	}
	return new(exchange)
}

// putExchange gives x back, its request and answer reset, poisoned under
// the poison tag: no page may keep a slice of the answer's body or of the
// inflated one. An inflated buffer grown past maxPooledOut is dropped.
func (u *legacyHost) putExchange(x *exchange) {
	if poison.On {
		b := x.resp.Body()
		poison.Fill(b[:cap(b)])
		p := x.inflated.Bytes()[:0]
		poison.Fill(p[:cap(p)])
	}
	x.req.Reset()
	x.resp.Reset()
	x.raw.Reset(nil)
	if x.inflated.Cap() > maxPooledOut {
		x.inflated = bytes.Buffer{}
	}
	x.inflated.Reset()
	u.exchanges.Put(x)
}
