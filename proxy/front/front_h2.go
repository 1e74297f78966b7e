package front

import (
	"net/http"
	"strconv"
	"time"

	"tradergate/proxy/h2edge"
	"tradergate/proxy/wire"
)

// The HTTP/2 front: connections on the TLS listener that negotiate h2 are
// served by h2edge (the edge's own HTTP/2 server on x/net's framer and
// HPACK). Like front_fast.go, this file only moves a request into an
// exchange and the answer back out.

// serveH2 is the h2edge handler: one stream.
func (e *Edge) serveH2(st *h2edge.Stream) {
	x := e.steps.Exchange(st.Context(), true)
	r := x.In()
	e.readH2(r, st)
	switch a := x.Serve(); {
	case a.Stream != nil:
		e.startH2(r, a, st) // stream.go: the stream stays open
	case a.Status != wire.StatusClientClosed: // else the stream is gone
		e.writeH2(r, a, st) // copies every field value: x may go back now
	}
	x.Release()
}

// readH2 fills the request x. The decoded strings are the stream's own
// (HPACK's decoder makes them, and never reuses them), so x keeps them as
// they are.
func (e *Edge) readH2(x *wire.Request, st *h2edge.Stream) {
	// The clock as the request came in: the steps' start, and the
	// answer's Date.
	x.Arrived = time.Now()
	switch st.Method {
	case http.MethodGet:
		x.Method = http.MethodGet
	case http.MethodHead:
		x.Method = http.MethodHead
	default:
		x.Method = st.Method
	}
	target := st.Path
	if st.Method == "CONNECT" {
		target = st.Authority // the authority form, as HTTP/1.1 sends it
	}
	x.SetTarget(target)
	x.HasBody = st.Body
	x.Peer = st.Peer
	size := requestLineBytes(x.Method, target) // server.max_header_bytes' measure
	for _, f := range st.Fields {
		size += fieldBytes(f.Name, f.Value)
		x.ReadField(h2Fields[f.Name], f.Value, e.traced) // names arrive lower case (RFC 9113 8.2.1)
	}
	if st.TooLarge || size > e.cfg.MaxHeaderBytes {
		// The answer is the edge's JSON 431, on this stream only: h2edge
		// decodes up to a multiple of the limit (serve.go).
		x.Refused = wire.RefusedHeaderTooLarge
	}
}

// writeH2 sends the answer a to the request r on st.
func (e *Edge) writeH2(r *wire.Request, a *wire.Answer, st *h2edge.Stream) {
	st.Status(a.Status)
	for _, f := range a.Headers() {
		st.Field(h2Name(f.Name), f.Value)
	}
	if hsts := e.hstsValue(); hsts != "" {
		st.Field(h2HSTS, hsts) // HTTP/2 is only served over TLS
	}
	if a.Body != nil {
		var n [20]byte
		st.Field(h2ContentLength, string(strconv.AppendInt(n[:0], int64(len(a.Body)), 10)))
	}
	st.Field(h2Date, httpDate(r.Arrived))
	// HTTP/2 has no Connection field (a.CloseConn): the stream just ends.
	if r.Method == http.MethodHead {
		st.Send(nil)
		return
	}
	st.Send(a.Body)
}

// h2Fields are the request fields the steps read, by their HTTP/2 names.
var h2Fields = map[string]wire.Field{
	"authorization": wire.FieldAuthorization, "accept-encoding": wire.FieldAcceptEncoding,
	"if-none-match": wire.FieldIfNoneMatch, "x-request-id": wire.FieldRequestID,
	"x-forwarded-for": wire.FieldForwardedFor, "traceparent": wire.FieldTraceparent,
	"tracestate": wire.FieldTracestate, "last-event-id": wire.FieldLastEventID,
}

var (
	h2HSTS          = h2edge.NewName("Strict-Transport-Security")
	h2ContentLength = h2edge.NewName("Content-Length")
	h2Date          = h2edge.NewName("Date")
)

// h2Names are the answer's field names, encoded once. A name not listed
// is encoded for each answer, sent right all the same.
var h2Names = func() map[string]h2edge.Name {
	m := map[string]h2edge.Name{}
	for _, n := range []string{
		"X-Request-Id", "X-Cache", "Cache-Status", "X-Content-Type-Options",
		"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
		"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
		"RateLimit-Policy", "Ratelimit-Policy", "RateLimit", "Ratelimit",
		"Deprecation", "Sunset", "Link", "Content-Type", "Content-Encoding",
		"Cache-Control", "Vary", "ETag", "Etag", "Age", "Retry-After",
		"WWW-Authenticate", "Www-Authenticate", "Allow", "Last-Modified", "Expires",
	} {
		m[n] = h2edge.NewName(n)
	}
	return m
}()

func h2Name(name string) h2edge.Name {
	if n, ok := h2Names[name]; ok {
		return n
	}
	return h2edge.NewName(name)
}
