package proxy

import (
	"net/http"
	"net/netip"
	"strconv"
)

// The net/http front: HTTP/2 connections (those that negotiate h2 on the
// TLS listener) and anything that wants the edge as an http.Handler. Like
// front_fast.go, it only moves a request into an exchange and the answer
// back out.

// Handler is the edge as an http.Handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveStd) }

// headerBytes is the size of r's request line and header fields as
// HTTP/1.1 would send them, the measure of server.max_header_bytes.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len("HTTP/1.1") + 2
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + 2 + len(v) + 2
		}
	}
	return n + 2
}

func (s *Server) serveStd(w http.ResponseWriter, r *http.Request) {
	x := newExchange(r.Context())
	x.method = r.Method
	x.setTarget(r.RequestURI)
	x.hasBody = r.ContentLength != 0 // -1: a body of unknown length
	x.authorization = r.Header.Get("Authorization")
	x.authorizations = len(r.Header.Values("Authorization"))
	x.acceptEncoding = r.Header.Get("Accept-Encoding")
	x.ifNoneMatch = r.Header.Get("If-None-Match")
	x.incomingID = r.Header.Get("X-Request-Id")
	if s.trace != nil {
		x.traceparent, x.tracestate = r.Header.Get("Traceparent"), r.Header.Get("Tracestate")
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		x.peer = ap.Addr().Unmap()
	}
	x.forwardedFor = r.Header.Values("X-Forwarded-For")
	if headerBytes(r) > s.cfg.Server.MaxHeaderBytes {
		// HTTP/2's server takes more than the limit (serve.go), so that
		// the answer is the edge's, on this stream only.
		x.refused = failHeaderTooLarge
	}
	s.serve(x)
	if x.status == statusClientClosed {
		return // nobody is listening
	}
	h := w.Header()
	for _, f := range x.headers[:x.nh] {
		h[f.name] = []string{f.value}
	}
	if hsts := s.hstsValue(); hsts != "" && r.TLS != nil {
		h["Strict-Transport-Security"] = []string{hsts}
	}
	if x.body != nil {
		h["Content-Length"] = []string{strconv.Itoa(len(x.body))}
	}
	if x.closeConn && r.ProtoMajor < 2 {
		// HTTP/2 has no Connection field; the stream just ends.
		h["Connection"] = []string{"close"}
	}
	w.WriteHeader(x.status)
	if r.Method != http.MethodHead && x.body != nil {
		_, _ = w.Write(x.body)
	}
}
