// Package wire is what a front and the chain of steps hand each other: the
// request as a front read it (Request), the answer the steps build
// (Answer), and the one entry the fronts call (Steps, the proxy.Server).
//
// It owns the shape of those two parts and the rules every front shares
// for filling them (ReadField, SetTarget). It must not decide anything
// about a request (that is the steps', in proxy) nor know an HTTP library
// (that is the fronts', in proxy/front): a front only moves bytes into a
// Request and out of an Answer.
package wire

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"time"
	"unsafe"

	"tradergate/internal/poison"
	"tradergate/proxy/stream"
)

// Steps is the edge as the fronts see it: proxy.Server.
type Steps interface {
	// Exchange is an exchange for one request under ctx. pooled: it
	// comes from the Server's pool and goes back with Release once the
	// front has written its answer; otherwise it is the front's own
	// (net/http may still read header values after its handler returned)
	// and Release does nothing.
	Exchange(ctx context.Context, pooled bool) Exchange
}

// Exchange is one request's way through the steps, as a front drives it:
// fill In, Serve, write the answer Serve returns, Release.
type Exchange interface {
	// In is the request, which the front fills before Serve; from Serve
	// on, nothing writes it.
	In() *Request
	// Serve runs the chain of steps (proxy.Server.serve) and returns the
	// answer they built, for the front to write. Nothing is written to
	// the connection before it returns.
	Serve() *Answer
	// Release gives a pooled exchange back. The front must not touch
	// it, nor any string made from its memory, again.
	Release()
}

// Request is the request as the front read it. The front fills it before
// Serve; from then on the steps only read it. Header values are the
// front's memory, read only while Serve runs: what outlives it is copied
// where it is kept (proxy/exchange.go, handOn).
type Request struct {
	Method         string // as sent; GET and HEAD are net/http's constants
	Target         string // path and query as sent: the exchange's own copy
	Path, RawQuery string // slices of Target
	HasBody        bool   // a Content-Length above 0, or a chunked body
	// Sendfile: the front can send a file straight to the client's
	// socket (plain HTTP/1.1), so the page step may hand it one
	// (Answer.File).
	Sendfile bool
	// Refused is what the front refused before the request could be read
	// as the edge reads one; zero: none. Such a request is answered with
	// that failure and its connection closed.
	Refused Refusal
	// TargetCut: the front saw only the start of the target (a request
	// line longer than its buffer); Target is that start.
	TargetCut      bool
	Authorization  string // header values below: valid while Serve runs
	Authorizations int    // how many Authorization fields the request carried
	AcceptEncoding string
	IfNoneMatch    string
	IncomingID     string
	Traceparent    string // W3C trace context, read only when tracing is on
	Tracestate     string
	// LastEventID is the Last-Event-ID field: where a reconnecting event
	// stream resumes (docs/CONTRACT.md, "Streams").
	LastEventID  string
	Peer         netip.Addr
	ForwardedFor []string // only read for requests without a valid key
	// Arrived is the front's reading of the clock as the request came in;
	// zero: the front read none, and the first step reads it.
	Arrived time.Time
	// targetBuf holds a short target's copy (CopyTarget).
	targetBuf [160]byte
}

// Refusal is what a front could not read of a request.
type Refusal uint8

const (
	// RefusedMalformed: framing a proxy in front could read otherwise
	// (a bare LF, a folded line, both Content-Length and
	// Transfer-Encoding), or not HTTP as the edge reads it.
	RefusedMalformed Refusal = iota + 1
	// RefusedHTTPVersion: an HTTP version other than 1.x.
	RefusedHTTPVersion
	// RefusedHeaderTooLarge: a header block over server.max_header_bytes.
	RefusedHeaderTooLarge
	// RefusedURITooLong: a request line over the buffer whose target is
	// past MaxTargetBytes.
	RefusedURITooLong
	// RefusedTimeout: the request did not arrive in time.
	RefusedTimeout
	// RefusedBody: a body larger than a front reads.
	RefusedBody
)

// MaxTargetBytes limits the request target a request may carry: 414 past
// it, wherever it is seen (the routing step, or a front whose buffer the
// request line alone filled).
const MaxTargetBytes = 8 << 10

// StatusClientClosed is logged (never sent) when the client went away
// before its answer was ready, as nginx does.
const StatusClientClosed = 499

// ErrShuttingDown is the cause of a request's cancellation when the edge
// is about to cut off what is still running (the end of the drain): the
// steps answer 503 rather than leave the client with nothing.
var ErrShuttingDown = errors.New("server shutting down")

// Shared marks ctx as a front's shared context: every request the front
// serves runs under it, and it ends for all of them at once, at the
// drain's deadline, never for one client. The HTTP/1.1 front's is one
// (fasthttp never tells a handler that its client left); the HTTP/2
// front's streams each have their own. The cache lets a request under a
// shared context run the flight it leads itself (cache.Options.Inline).
func Shared(ctx context.Context) context.Context {
	return context.WithValue(ctx, sharedKey{}, ctx.Done())
}

// IsShared reports whether ctx ends exactly when a Shared context does:
// one marked, or one derived from it that adds values but no end of its
// own (a tracing span's). One with a cancel or deadline of its own is not.
func IsShared(ctx context.Context) bool {
	done, ok := ctx.Value(sharedKey{}).(<-chan struct{})
	return ok && done == ctx.Done()
}

type sharedKey struct{}

// Field names a request field the steps read; the fronts find them, each
// in its own way, and keep them with ReadField.
type Field uint8

const (
	FieldAuthorization Field = iota + 1
	FieldAcceptEncoding
	FieldIfNoneMatch
	FieldRequestID
	FieldForwardedFor
	FieldTraceparent
	FieldTracestate
	FieldLastEventID
)

// MaxBearerLen bounds the credential Bearer reads, and so the work an
// unauthenticated client can ask for (hashing a key, comparing a token).
const MaxBearerLen = 512

// Bearer extracts the credential of an Authorization value "Bearer
// <credential>"; the scheme is case-insensitive (RFC 9110 section 11.1).
// The credential is a part of h: nothing is allocated. The client keys
// (proxy/auth.go) and the admin token (proxy/admin/login.go) are read so.
func Bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || len(h) > len(scheme)+MaxBearerLen || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	credential := strings.TrimSpace(h[len(scheme):])
	return credential, credential != ""
}

// ReadField keeps one request field by the rules every front shares: a
// field sent twice keeps its first value; Authorization fields are
// counted, since two are refused (proxy/auth.go); every X-Forwarded-For
// line is kept, in order; trace context only when tracing is on.
func (r *Request) ReadField(f Field, value string, traced bool) {
	switch f {
	case FieldAuthorization:
		if r.Authorizations == 0 {
			r.Authorization = value
		}
		r.Authorizations++
	case FieldAcceptEncoding:
		if r.AcceptEncoding == "" {
			r.AcceptEncoding = value
		}
	case FieldIfNoneMatch:
		if r.IfNoneMatch == "" {
			r.IfNoneMatch = value
		}
	case FieldRequestID:
		if r.IncomingID == "" {
			r.IncomingID = value
		}
	case FieldForwardedFor:
		r.ForwardedFor = append(r.ForwardedFor, value)
	case FieldTraceparent:
		if traced && r.Traceparent == "" {
			r.Traceparent = value
		}
	case FieldTracestate:
		if traced && r.Tracestate == "" {
			r.Tracestate = value
		}
	case FieldLastEventID:
		if r.LastEventID == "" {
			r.LastEventID = value
		}
	}
}

// SetTarget keeps the request target (the exchange's own copy) and cuts
// the path and query from it. The path is the raw path as sent: routes
// match on it, so what a firewall in front sees is what the edge routes.
func (r *Request) SetTarget(t string) {
	r.Target = t
	r.Path, r.RawQuery, _ = strings.Cut(t, "?")
}

// CopyTarget is SetTarget for a target the front will reuse: the bytes
// are copied into the exchange (a short one into targetBuf, which is not
// written again until the exchange goes back to its pool).
func (r *Request) CopyTarget(b []byte) {
	if len(b) <= len(r.targetBuf) && len(b) > 0 {
		n := copy(r.targetBuf[:], b)
		r.SetTarget(unsafe.String(&r.targetBuf[0], n))
		return
	}
	r.SetTarget(string(b))
}

// Poison overwrites the request's own buffer (built with the poison tag
// only, once its exchange is cleared), so that a string still pointing
// into it reads garbage.
func (r *Request) Poison() { poison.Fill(r.targetBuf[:]) }

// Answer is the answer the steps build: its status, fields and body. The
// front writes it; the metrics and the access log read it.
type Answer struct {
	Status  int
	headers [maxHeaders]HeaderField
	nh      int
	// named has nameBit(n) set for every name n set on this answer, so
	// that SetHeader and Header look through headers only for a name that
	// may be there; a hit sets some sixteen fields, each new. A bit is
	// never cleared (DelHeader, KeepAlways): a stale one costs a look.
	named  uint64
	always int    // headers[:always] go on every answer (id, rate limits)
	vals   []byte // backing of the header values made for this answer
	Body   []byte
	// CloseConn: the front closes the connection after this answer.
	CloseConn bool
	// File: the cache's file holding Body, to send straight to the socket
	// (Request.Sendfile; cache/files.go), or nil.
	File *os.File
	// Stream: an event stream the steps opened (proxy/streams.go), which
	// the front starts once it has written the answer's head, instead of
	// a body; nil for any other answer.
	Stream *stream.Subscriber

	// valsBuf is the start of vals, so that a hit's values allocate
	// nothing.
	valsBuf [192]byte
}

// maxHeaders is the most header fields an answer carries: request id, six
// rate limit fields, five cache fields, content type and length, and a few
// a failure adds.
const maxHeaders = 20

// HeaderField is one header of the answer, its name in canonical form.
type HeaderField struct{ Name, Value string }

// Reset readies a cleared answer for a request: its values go to
// valsBuf first.
func (a *Answer) Reset() { a.vals = a.valsBuf[:0] }

// Grown is the value buffer the answer grew into, which strings handed out
// by Own may point into: Poison's argument once the answer is cleared.
func (a *Answer) Grown() []byte { return a.vals }

// Poison overwrites the answer's own buffer and grown, the buffer it had
// grown into (built with the poison tag only, once its exchange is
// cleared), so that a string still pointing into either reads garbage.
func (a *Answer) Poison(grown []byte) {
	poison.Fill(a.valsBuf[:])
	poison.Fill(grown[:cap(grown)])
}

// Headers are the answer's fields, in the order set.
func (a *Answer) Headers() []HeaderField { return a.headers[:a.nh] }

// SetHeader sets name to value, replacing an earlier value of name.
func (a *Answer) SetHeader(name, value string) {
	bit := nameBit(name)
	if a.named&bit != 0 {
		for i := range a.headers[:a.nh] {
			if a.headers[i].Name == name {
				a.headers[i].Value = value
				return
			}
		}
	}
	if a.nh < len(a.headers) {
		a.named |= bit
		a.headers[a.nh] = HeaderField{name, value}
		a.nh++
	}
}

// nameBit is name's bit in Answer.named: one of 64, from its length and
// last byte, which tell apart the names of a hit's answer (the three of 12
// bytes end in s, e and d).
func nameBit(name string) uint64 {
	if name == "" {
		return 1
	}
	return 1 << ((uint(len(name))*7 + uint(name[len(name)-1])) & 63)
}

// DelHeader removes name from the answer.
func (a *Answer) DelHeader(name string) {
	for i := range a.headers[:a.nh] {
		if a.headers[i].Name == name {
			copy(a.headers[i:a.nh], a.headers[i+1:a.nh])
			a.nh--
			return
		}
	}
}

// MarkAlways makes the fields set so far go on every answer of the
// request, whatever it turns out to be (the request id, the rate limits).
func (a *Answer) MarkAlways() { a.always = a.nh }

// KeepAlways drops every field but those MarkAlways kept, and the body: a
// step that did not finish its answer (a panic) leaves nothing of it.
func (a *Answer) KeepAlways() { a.nh, a.Body = a.always, nil }

// Values is the answer's value buffer, for a step that appends values
// to it and sets them (the rate limit fields): the rules of Own hold.
func (a *Answer) Values() *[]byte { return &a.vals }

// Own copies b into the answer's value buffer and returns it as a string
// without a further allocation. The buffer is only appended to while the
// exchange serves its request, and a pooled exchange is cleared and given
// back (Exchange.Release) only once nothing reads its answer: the bytes
// under the string do not change while it is read, which is what makes
// the unsafe.String sound. A buffer that grows leaves the earlier strings
// on the old array, which they keep alive.
func (a *Answer) Own(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	start := len(a.vals)
	a.vals = append(a.vals, b...)
	return unsafe.String(&a.vals[start], len(b))
}

// Reply sets the answer: a JSON body with its status. nosniff: a client
// must never read the body as anything but JSON, whatever text a legacy
// message put into it.
func (a *Answer) Reply(status int, body []byte) {
	// A page file goes with the body it holds: a new body drops it
	// (the page step sets it after its Reply).
	a.Status, a.Body, a.File = status, body, nil
	a.SetHeader("Content-Type", "application/json")
	a.SetHeader("X-Content-Type-Options", "nosniff")
}
