package proxy

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"tradergate/cache"
	"tradergate/internal/poison"
	"tradergate/normalize"
	"tradergate/proxy/route"
	"tradergate/proxy/wire"
)

// exchange is one request and its answer, as the steps of the chain see
// them. A front (proxy/front: HTTP/1.1 on fasthttp, HTTP/2 on h2edge, or
// an http.Handler) fills the request part (wire.Request), runs serve
// through the one entry the Server gives the fronts (Server.Exchange),
// and writes the answer part (wire.Answer) back; nothing between those
// two knows which library it is.
//
// Ownership. The exchange's memory, and the front's that its header
// values view, is read only while serve runs: the exchange goes back to
// its pool once the front has written the answer, whatever the steps did.
// Work that may outlive serve (a flight or a background refresh, which
// run a Fetch; the request's span, which is exported later) reads copies,
// made in one place for each kind of memory: handOn for the exchange's
// fields (the request id, the trace context), route.Request.Own for the
// canonical request, and the cache copies the key it keeps. A Fetch is
// built only from those (Server.fetch). Built with the poison tag,
// release overwrites the exchange's buffers (poison.go), so that a copy
// left out reads garbage in the tests rather than another request's
// bytes in production.
//
// Reuse. The HTTP/1.1 and HTTP/2 fronts take their exchanges from a pool
// and give each back once the answer is in their library's buffers, so
// that a cache hit allocates nothing. The http.Handler front allocates one
// per request: the parts' fields are ordered so that an exchange, with the
// header the runtime adds to it, stays within a 2 KiB size class.
type exchange struct {
	// ctx is the request's context: the server's base context (HTTP/1.1;
	// fasthttp does not tell a handler that its client left), or the
	// request's own (HTTP/2, cancelled when the stream ends).
	ctx context.Context
	// srv serves it (Serve); pooled: it goes back to exchanges on
	// Release.
	srv    *Server
	pooled bool

	wire.Request // what the front filled: read, never written, by the steps
	learnt       // what the steps learn on the way and hand to the later ones
	wire.Answer  // what the steps build and the front writes back
}

// learnt is what the steps learn of the request on the way and hand on to
// the later steps, the metrics and the access log.
type learnt struct {
	id        string    // the request id: idBuf's, or the client's (requestID)
	start     time.Time // wall clock, for durations
	now       time.Time // the injected clock's time at arrival
	principal *principal
	route     *route.Route
	req       *route.Request // &reqBuf once the route step validated it
	legacy    bool           // a legacy path: answered in variant B (legacy.go)
	cache     cache.Status   // the page step's result; 0 when it did not run
	upstream  cache.Report   // what the Fetch this request started did, if any
	span      trace.Span     // the request's span; nil when tracing is off

	// handed is what the request handed on (handOn), once it did.
	handed *handed

	// The made request id and the canonical request, so that a hit
	// allocates neither.
	idBuf  [32]byte
	reqBuf route.Request
}

// Exchange is the one entry of the fronts (wire.Steps): an exchange for
// one request under ctx, from the pool when pooled (the front gives it
// back with Release once its answer is written), else of its own, for a
// front that does not give exchanges back (net/http may still be writing
// header values after its handler returned).
func (s *Server) Exchange(ctx context.Context, pooled bool) wire.Exchange {
	if pooled {
		return s.pooledExchange(ctx)
	}
	return s.newExchange(ctx)
}

// newExchange returns an exchange for one request under ctx, of its own.
func (s *Server) newExchange(ctx context.Context) *exchange {
	x := &exchange{ctx: ctx, srv: s}
	x.Answer.Reset()
	return x
}

// exchanges holds the fronts' exchanges between requests (the HTTP/1.1
// and HTTP/2 fronts take theirs from it and give them back once the
// answer is written).
var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// pooledExchange is newExchange from the pool; give it back with release
// once nothing reads the answer any more.
func (s *Server) pooledExchange(ctx context.Context) *exchange {
	x := exchanges.Get().(*exchange)
	x.ctx, x.srv, x.pooled = ctx, s, true
	x.Answer.Reset()
	return x
}

// In, Serve and Release are the exchange as a front drives it
// (wire.Exchange).
func (x *exchange) In() *wire.Request { return &x.Request }

func (x *exchange) Serve() *wire.Answer {
	x.srv.serve(x)
	return &x.Answer
}

// Release gives a pooled x back to the pool, cleared; for one of its own
// it does nothing. The caller must not touch x, nor any string made from
// its memory, again; what outlives serve holds copies (handOn).
func (x *exchange) Release() {
	if !x.pooled {
		return
	}
	grown := x.Grown()
	*x = exchange{}
	if poison.On {
		x.poison(grown)
	}
	exchanges.Put(x)
}

// handed is what a request hands on to work that may outlive serve: its
// id and trace context, copied into memory of their own.
type handed struct {
	id                      string
	traceparent, tracestate string
}

// handOn returns the copies of x's fields that work outliving serve may
// keep, made on the first call: the one place the exchange's own memory
// (idBuf) and the front's (header values) are copied for others.
func (x *exchange) handOn() *handed {
	if x.handed == nil {
		x.handed = &handed{
			id:          poison.Copy(x.id),
			traceparent: poison.Copy(x.Traceparent),
			tracestate:  poison.Copy(x.Tracestate),
		}
	}
	return x.handed
}

// keyID is the id of the request's key, "" without one.
func (x *exchange) keyID() string {
	if x.principal == nil {
		return ""
	}
	return x.principal.KeyID
}

// Get, Set and Keys make the handed-on copies a
// propagation.TextMapCarrier of the request's trace context (only these
// two fields are read): the parent the span keeps is parsed from copies.
func (h *handed) Get(key string) string {
	switch strings.ToLower(key) {
	case "traceparent":
		return h.traceparent
	case "tracestate":
		return h.tracestate
	}
	return ""
}

func (h *handed) Set(string, string) {}

func (h *handed) Keys() []string { return []string{"traceparent", "tracestate"} }

// fail answers err as a failure body (variant A, or variant B on a legacy
// path), with the status, message and headers of the error table
// (errors.go).
func (x *exchange) fail(err error) {
	e := asError(err)
	if e.kind == failClientClosed && context.Cause(x.ctx) == wire.ErrShuttingDown {
		// Not the client that left: the edge is stopping. Say so, and
		// when to come back (to another replica, or this one restarted).
		e = &edgeError{kind: failShuttingDown, RetryAfter: time.Second, Err: err}
	}
	if e.kind == failShuttingDown {
		x.CloseConn = true
	}
	if e.RetryAfter > 0 {
		x.SetHeader("Retry-After", retryAfterSeconds(e.RetryAfter))
	}
	// Errors are never cached, by us or by anyone downstream.
	x.SetHeader("Cache-Control", "no-store")
	if e.kind == failClientClosed {
		// Nobody is listening; the status is for the access log only.
		x.Status = wire.StatusClientClosed
		return
	}
	if x.legacy {
		// A client of the legacy paths reads variant B (legacy.go).
		msg := e.LegacyMessage()
		x.Reply(e.Status(), normalize.AppendFailureB(make([]byte, 0, 64+len(msg)), e.Status(), msg))
		return
	}
	msg := e.Message()
	x.Reply(e.Status(), normalize.AppendError(make([]byte, 0, 64+len(msg)), msg))
}
