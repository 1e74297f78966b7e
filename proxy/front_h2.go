package proxy

import (
	"strconv"

	"tradergate/proxy/h2edge"
)

// The HTTP/2 front: connections on the TLS listener that negotiate h2 are
// served by h2edge (the edge's own HTTP/2 server on x/net's framer and
// HPACK). Like front_fast.go, this file only moves a request into an
// exchange and the answer back out.

// serveH2 is the h2edge handler: one stream.
func (s *Server) serveH2(st *h2edge.Stream) {
	x := pooledExchange(st.Context())
	s.readH2(x, st)
	s.serve(x)
	switch {
	case x.sse != nil && x.sse.sub != nil:
		s.startH2(x, st) // streams.go: the stream stays open
	case x.status != statusClientClosed: // else the stream is gone
		s.writeH2(x, st) // copies every field value: x may go back now
	}
	x.release()
}

// readH2 fills the request part of x. The decoded strings are the
// stream's own (HPACK's decoder makes them, and never reuses them), so x
// keeps them as they are.
func (s *Server) readH2(x *exchange, st *h2edge.Stream) {
	switch st.Method {
	case methodGet:
		x.method = methodGet
	case methodHead:
		x.method = methodHead
	default:
		x.method = st.Method
	}
	target := st.Path
	if st.Method == "CONNECT" {
		target = st.Authority // the authority form, as HTTP/1.1 sends it
	}
	x.setTarget(target)
	x.hasBody = st.Body
	x.peer = st.Peer
	size := requestLineBytes(x.method, target) // server.max_header_bytes' measure
	traced := s.trace != nil
	for _, f := range st.Fields {
		size += fieldBytes(f.Name, f.Value)
		x.readField(h2Fields[f.Name], f.Value, traced) // names arrive lower case (RFC 9113 8.2.1)
	}
	if st.TooLarge || size > s.cfg.Server.MaxHeaderBytes {
		// The answer is the edge's JSON 431, on this stream only: h2edge
		// decodes up to a multiple of the limit (serve.go).
		x.refused = failHeaderTooLarge
	}
}

// writeH2 sends x's answer on st.
func (s *Server) writeH2(x *exchange, st *h2edge.Stream) {
	st.Status(x.status)
	for _, f := range x.headers[:x.nh] {
		st.Field(h2Name(f.name), f.value)
	}
	if hsts := s.hstsValue(); hsts != "" {
		st.Field(h2HSTS, hsts) // HTTP/2 is only served over TLS
	}
	if x.body != nil {
		var n [20]byte
		st.Field(h2ContentLength, string(strconv.AppendInt(n[:0], int64(len(x.body)), 10)))
	}
	st.Field(h2Date, httpDate(x.start))
	// HTTP/2 has no Connection field (x.closeConn): the stream just ends.
	if x.method == methodHead {
		st.Send(nil)
		return
	}
	st.Send(x.body)
}

// h2Fields are the request fields the steps read, by their HTTP/2 names.
var h2Fields = map[string]requestField{
	"authorization": fieldAuthorization, "accept-encoding": fieldAcceptEncoding,
	"if-none-match": fieldIfNoneMatch, "x-request-id": fieldRequestID,
	"x-forwarded-for": fieldForwardedFor, "traceparent": fieldTraceparent,
	"tracestate": fieldTracestate, "last-event-id": fieldLastEventID,
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
