package proxy

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/trace"

	"tradergate/cache"
	"tradergate/internal/poison"
	"tradergate/normalize"
	"tradergate/proxy/route"
)

// exchange is one request and its answer, as the steps of the chain see
// them. A front (front_fast.go for HTTP/1.1, front_h2.go for HTTP/2,
// front_std.go as an http.Handler) fills the request part from its HTTP library, runs Server.serve, and
// writes the answer part back; nothing between those two knows which
// library it is.
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
// that a cache hit allocates nothing. front_std.go allocates one per
// request: the parts' fields are ordered so that an exchange, with the
// header the runtime adds to it, stays within a 2 KiB size class.
type exchange struct {
	// ctx is the request's context: the server's base context (HTTP/1.1;
	// fasthttp does not tell a handler that its client left), or the
	// request's own (HTTP/2, cancelled when the stream ends).
	ctx context.Context

	request // what the front filled: read, never written, by the steps
	learnt  // what the steps learn on the way and hand to the later ones
	answer  // what the steps build and the front writes back
}

// request is the request as the front read it. The front fills it before
// serve; from then on the steps only read it.
type request struct {
	method         string // as sent; GET and HEAD are the constants
	target         string // path and query as sent: the exchange's own copy
	path, rawQuery string // slices of target
	hasBody        bool   // a Content-Length above 0, or a chunked body
	// sendfile: the front can send a file straight to the client's socket
	// (plain HTTP/1.1), so the page step may hand it one (answer.file).
	sendfile bool
	// refused is what the front refused before the request could be
	// read as the edge reads one (framing a proxy in front could read
	// otherwise, an HTTP version other than 1.x, a header block over
	// server.max_header_bytes, a request not in time); zero: none. Such a
	// request is answered with that failure and its connection closed.
	refused failure
	// targetCut: the front saw only the start of the target (a request
	// line longer than its buffer); target is that start.
	targetCut      bool
	authorizations int32  // how many Authorization fields the request carried
	authorization  string // header values below: valid while serve runs
	// sse: a Last-Event-ID field, and the stream the steps opened
	// (streams.go); nil for any other request.
	sse            *sse
	acceptEncoding string
	ifNoneMatch    string
	incomingID     string
	traceparent    string // W3C trace context, read only when tracing is on
	tracestate     string
	peer           netip.Addr
	forwardedFor   []string // only read for requests without a valid key
	// arrived is the front's reading of the clock as the request came in;
	// zero: the front read none, and begin reads it.
	arrived time.Time
	// targetBuf holds a short target's copy (copyTarget).
	targetBuf [160]byte
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

// answer is the answer the steps build: its status, fields and body.
type answer struct {
	status  int
	headers [maxHeaders]field
	nh      int
	// named has nameBit(n) set for every name n set on this answer, so
	// that setHeader and header look through headers only for a name that
	// may be there; a hit sets some sixteen fields, each new. A bit is
	// never cleared (delHeader, a panic's reset): a stale one costs a look.
	named     uint64
	always    int    // headers[:always] go on every answer (id, rate limits)
	vals      []byte // backing of the header values made for this answer
	body      []byte
	closeConn bool
	// file: the cache's file holding body, to send straight to the socket
	// (request.sendfile; cache/files.go), or nil.
	file *os.File

	// valsBuf is the start of vals, so that a hit's values allocate
	// nothing.
	valsBuf [192]byte
}

// newExchange returns an exchange for one request under ctx, of its own:
// for a front that does not give exchanges back (front_std.go: net/http
// may still be writing header values after its handler returned).
func newExchange(ctx context.Context) *exchange {
	x := &exchange{ctx: ctx}
	x.vals = x.valsBuf[:0]
	return x
}

// exchanges holds the fronts' exchanges between requests (both fronts take
// theirs from it and give them back once the answer is written).
var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// requestField names a request field the steps read; the fronts find
// them, each in its own way, and keep them with readField.
type requestField uint8

const (
	fieldAuthorization requestField = iota + 1
	fieldAcceptEncoding
	fieldIfNoneMatch
	fieldRequestID
	fieldForwardedFor
	fieldTraceparent
	fieldTracestate
	fieldLastEventID
)

// readField keeps one request field by the rules every front shares: a
// field sent twice keeps its first value; Authorization fields are
// counted, since two are refused (auth.go); every X-Forwarded-For line is
// kept, in order; trace context only when tracing is on.
func (x *request) readField(f requestField, value string, traced bool) {
	switch f {
	case fieldAuthorization:
		if x.authorizations == 0 {
			x.authorization = value
		}
		x.authorizations++
	case fieldAcceptEncoding:
		if x.acceptEncoding == "" {
			x.acceptEncoding = value
		}
	case fieldIfNoneMatch:
		if x.ifNoneMatch == "" {
			x.ifNoneMatch = value
		}
	case fieldRequestID:
		if x.incomingID == "" {
			x.incomingID = value
		}
	case fieldForwardedFor:
		x.forwardedFor = append(x.forwardedFor, value)
	case fieldTraceparent:
		if traced && x.traceparent == "" {
			x.traceparent = value
		}
	case fieldTracestate:
		if traced && x.tracestate == "" {
			x.tracestate = value
		}
	case fieldLastEventID:
		x.keepLastEventID(value)
	}
}

// pooledExchange is newExchange from the pool; give it back with release
// once nothing reads the answer any more.
func pooledExchange(ctx context.Context) *exchange {
	x := exchanges.Get().(*exchange)
	x.ctx = ctx
	x.vals = x.valsBuf[:0]
	return x
}

// release gives x back to the pool, cleared. The caller must not touch x,
// nor any string made from its memory, again; what outlives serve holds
// copies (handOn).
func (x *exchange) release() {
	grown := x.vals
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
			traceparent: poison.Copy(x.traceparent),
			tracestate:  poison.Copy(x.tracestate),
		}
	}
	return x.handed
}

// setTarget keeps the request target (the exchange's own copy) and cuts
// the path and query from it. The path is the raw path as sent: routes
// match on it, so what a firewall in front sees is what the edge routes.
func (x *request) setTarget(t string) {
	x.target = t
	x.path, x.rawQuery, _ = strings.Cut(t, "?")
}

// copyTarget is setTarget for a target the front will reuse: the bytes
// are copied into the exchange (a short one into targetBuf, which is not
// written again until the exchange goes back to its pool).
func (x *request) copyTarget(b []byte) {
	if len(b) <= len(x.targetBuf) && len(b) > 0 {
		n := copy(x.targetBuf[:], b)
		x.setTarget(unsafe.String(&x.targetBuf[0], n))
		return
	}
	x.setTarget(string(b))
}

// maxHeaders is the most header fields an answer carries: request id, six
// rate limit fields, five cache fields, content type and length, and a few
// a failure adds.
const maxHeaders = 20

// field is one header of the answer, its name in canonical form.
type field struct{ name, value string }

// setHeader sets name to value, replacing an earlier value of name.
func (x *answer) setHeader(name, value string) {
	bit := nameBit(name)
	if x.named&bit != 0 {
		for i := range x.headers[:x.nh] {
			if x.headers[i].name == name {
				x.headers[i].value = value
				return
			}
		}
	}
	if x.nh < len(x.headers) {
		x.named |= bit
		x.headers[x.nh] = field{name, value}
		x.nh++
	}
}

// nameBit is name's bit in exchange.named: one of 64, from its length and
// last byte, which tell apart the names of a hit's answer (the three of 12
// bytes end in s, e and d).
func nameBit(name string) uint64 {
	if name == "" {
		return 1
	}
	return 1 << ((uint(len(name))*7 + uint(name[len(name)-1])) & 63)
}

// delHeader removes name from the answer.
func (x *answer) delHeader(name string) {
	for i := range x.headers[:x.nh] {
		if x.headers[i].name == name {
			copy(x.headers[i:x.nh], x.headers[i+1:x.nh])
			x.nh--
			return
		}
	}
}

// own copies b into the exchange's value buffer and returns it as a string
// without a further allocation. The buffer is only appended to while the
// exchange serves its request, and a pooled exchange is cleared and given
// back (release) only once nothing reads its answer: the bytes under the
// string do not change while it is read, which is what makes the
// unsafe.String sound. A buffer that grows leaves the
// earlier strings on the old array, which they keep alive.
func (x *answer) own(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	start := len(x.vals)
	x.vals = append(x.vals, b...)
	return unsafe.String(&x.vals[start], len(b))
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

// reply sets the answer: a JSON body with its status. nosniff: a client
// must never read the body as anything but JSON, whatever text a legacy
// message put into it.
func (x *answer) reply(status int, body []byte) {
	// A page file goes with the body it holds: a new body drops it
	// (writeEntry sets it after its reply).
	x.status, x.body, x.file = status, body, nil
	x.setHeader("Content-Type", "application/json")
	x.setHeader("X-Content-Type-Options", "nosniff")
}

// fail answers err as a failure body (variant A, or variant B on a legacy
// path), with the status, message and headers of the error table
// (errors.go).
func (x *exchange) fail(err error) {
	e := asError(err)
	if e.kind == failClientClosed && context.Cause(x.ctx) == errShuttingDown {
		// Not the client that left: the edge is stopping. Say so, and
		// when to come back (to another replica, or this one restarted).
		e = &edgeError{kind: failShuttingDown, RetryAfter: time.Second, Err: err}
		x.closeConn = true
	}
	if e.RetryAfter > 0 {
		x.setHeader("Retry-After", retryAfterSeconds(e.RetryAfter))
	}
	// Errors are never cached, by us or by anyone downstream.
	x.setHeader("Cache-Control", "no-store")
	if e.kind == failClientClosed {
		// Nobody is listening; the status is for the access log only.
		x.status = statusClientClosed
		return
	}
	if x.legacy {
		// A client of the legacy paths reads variant B (legacy.go).
		msg := e.LegacyMessage()
		x.reply(e.Status(), normalize.AppendFailureB(make([]byte, 0, 64+len(msg)), e.Status(), msg))
		return
	}
	msg := e.Message()
	x.reply(e.Status(), normalize.AppendError(make([]byte, 0, 64+len(msg)), msg))
}
