package proxy

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The outermost steps of the chain (Server.serve): the request id and the
// clock on the way in; metrics and the access log on the way out, where
// they see every answer; and panic recovery.

// begin gives the request its id and its time (the time the front read,
// when it read one).
func (s *Server) begin(x *exchange) {
	x.start = x.Arrived
	if x.start.IsZero() {
		x.start = time.Now()
	}
	x.now = x.start
	if !s.wallClock {
		x.now = s.now()
	}
	requestID(&x.learnt, x.IncomingID)
	x.SetHeader("X-Request-Id", x.id)
	x.MarkAlways()
	if s.trace != nil {
		// The span of the request, a child of the caller's trace when it
		// sent one; everything the request starts (the cache lookup, a
		// flight, the legacy call) hangs under it through x.ctx.
		// The span and its parent are kept until exported: they read
		// the handed-on copies, never the front's header values.
		ctx := s.trace.Propagator.Extract(x.ctx, x.handOn())
		x.ctx, x.span = s.trace.Tracer.Start(ctx, "tradergate.request", trace.WithSpanKind(trace.SpanKindServer))
	}
}

// endSpan ends the request's span with what the access log says of it:
// the request id, route, status and cache result; never a key.
func (x *exchange) endSpan(route, cacheResult string) {
	if x.span == nil {
		return
	}
	x.span.SetAttributes(
		attribute.String("tradergate.request_id", x.handOn().id),
		attribute.String("tradergate.route", route),
		attribute.String("tradergate.cache", cacheResult),
		attribute.Int("http.response.status_code", x.Status),
		attribute.String("http.request.Method", x.Method),
	)
	if x.Status >= 500 {
		x.span.SetStatus(codes.Error, "")
	}
	x.span.End()
}

// finish records the answer in the metrics and the access log.
func (s *Server) finish(x *exchange) {
	if x.Status == 0 {
		x.Status = 200
	}
	// One reading of the monotonic clock, not time.Now's two (wall and
	// monotonic): x.start carries a monotonic reading (time.Now, or
	// fasthttp's), and on some machines a clock reading shows in a hit's
	// profile.
	took := time.Since(x.start)
	s.metrics.observe(x.route, x.Status, x.cache, took)
	routeName := ""
	if x.route != nil {
		routeName = x.route.Name
	}
	keyID := x.keyID()
	cacheResult := cacheLabel(x.cache)
	x.endSpan(routeName, cacheResult)
	if s.accessLog {
		s.logAccess(x, routeName, keyID, cacheResult, took)
	}
}

// logAccess writes the request's access log line. Apart from finish, which
// every request runs: its attributes take a kilobyte of stack frame, and a
// frame is reserved whole on entry, used or not; that kilobyte on every
// request's way grew the serving goroutines' stacks, which idle keep-alive
// connections then keep.
//
//go:noinline
func (s *Server) logAccess(x *exchange, routeName, keyID, cacheResult string, took time.Duration) {
	// Durations are slog's: integer nanoseconds in the JSON lines.
	s.log.LogAttrs(x.ctx, slog.LevelInfo, "request",
		slog.String("request_id", x.id),
		slog.String("client", s.limiter.ClientIPFrom(x.Peer, x.ForwardedFor).String()),
		slog.String("method", x.Method),
		slog.String("path", x.Target),
		slog.String("route", routeName),
		slog.Int("status", x.Status),
		slog.String("cache", cacheResult),
		slog.Duration("duration", took),
		slog.Int("bytes", len(x.Body)),
		slog.Int("upstream_status", x.upstream.Status),
		slog.Duration("upstream_duration", x.upstream.Took),
		slog.String("key_id", keyID),
	)
}

// requestID gives the request its id: incoming, the client's
// X-Request-Id, when it is short and printable (so a trace can span
// client, edge and legacy host), else a new one. Either is the front's or
// the exchange's memory, read while serve runs; what outlives serve reads
// the copy handOn makes.
func requestID(x *learnt, incoming string) {
	if keepID(incoming) {
		x.id = incoming
		return
	}
	newRequestID(&x.idBuf)
	x.id = unsafe.String(&x.idBuf[0], len(x.idBuf))
}

// keepID reports whether a client's request id is kept: 8 to 64 letters,
// digits, '-', '_' or '.'; anything else could carry what a log line must
// not.
func keepID(h string) bool {
	if n := len(h); n < 8 || n > 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// newRequestID writes 128 random bits in hex. Random, not a counter: a
// client sampling ids must learn nothing of the edge's traffic. math/rand/v2
// draws from a ChaCha8 generator per thread, seeded from the system, which
// is fast enough for every request and not predictable from its outputs.
func newRequestID(b *[32]byte) {
	var r [16]byte
	binary.LittleEndian.PutUint64(r[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(r[8:], rand.Uint64())
	hex.Encode(b[:], r[:])
}

// recoverPanics turns a panic in a step into a variant A 500 and a log
// line, never a dropped process: fasthttp does no recovery of its own, and
// net/http would only drop the connection. Nothing is on the wire before
// serve returns, so the 500 replaces whatever the step had set.
func (s *Server) recoverPanics(x *exchange) {
	v := recover()
	if v == nil {
		return
	}
	s.log.Error("panic in handler", "request_id", x.id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	// Keep what every answer carries (the id, the rate limit fields); drop
	// what a step set for the answer it did not finish.
	x.KeepAlways()
	x.fail(fail(failInternal))
}

// observeUpstream records a legacy call for the metrics and the page.
func (s *Server) observeUpstream(route string, code int, took time.Duration) {
	s.metrics.observeUpstream(route, code, took)
	failure := ""
	switch {
	case code == 0:
		failure = "no answer"
	case code >= 500 || code == http.StatusTooManyRequests:
		failure = "legacy host answered " + strconv.Itoa(code)
	}
	if failure != "" {
		s.admin.UpstreamFailed(failure)
	}
}
