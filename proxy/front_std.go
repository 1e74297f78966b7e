package proxy

import (
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"
)

// The net/http front: for anything that wants the edge as an
// http.Handler (the edge itself serves HTTP/1.1 with fasthttp and HTTP/2
// with h2edge). Like front_fast.go, it only moves a request into an
// exchange and the answer back out.

// Handler is the edge as an http.Handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveStd) }

// headerBytes is the size of r's request line and header fields as
// HTTP/1.1 would send them, the measure of server.max_header_bytes.
func headerBytes(r *http.Request) int {
	n := requestLineBytes(r.Method, r.RequestURI)
	for name, values := range r.Header {
		for _, v := range values {
			n += fieldBytes(name, v)
		}
	}
	return n
}

// requestLineBytes is what HTTP/1.1 spends on a request's line and the
// blank line that ends its header block; fieldBytes what it spends on one
// field. Their sum over a request is the measure of
// server.max_header_bytes on every front.
func requestLineBytes(method, target string) int {
	return len(method) + 1 + len(target) + 1 + len("HTTP/1.1") + 2 + 2
}

func fieldBytes(name, value string) int { return len(name) + 2 + len(value) + 2 }

func (s *Server) serveStd(w http.ResponseWriter, r *http.Request) {
	x := newExchange(r.Context())
	x.method = r.Method
	x.setTarget(r.RequestURI)
	x.hasBody = r.ContentLength != 0 // -1: a body of unknown length
	x.authorization = r.Header.Get("Authorization")
	x.authorizations = int32(len(r.Header.Values("Authorization")))
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		x.readField(fieldLastEventID, v, false)
	}
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
		x.refused = failHeaderTooLarge
	}
	s.serve(x)
	if x.status == statusClientClosed {
		return // nobody is listening
	}
	h := w.Header()
	// One backing array for every value, rather than one slice per field.
	vals := make([]string, x.nh+3)
	for i, f := range x.headers[:x.nh] {
		vals[i] = f.value
		h[f.name] = vals[i : i+1 : i+1]
	}
	n := x.nh
	add := func(name, value string) {
		vals[n] = value
		h[name] = vals[n : n+1 : n+1]
		n++
	}
	if hsts := s.hstsValue(); hsts != "" && r.TLS != nil {
		add("Strict-Transport-Security", hsts)
	}
	if x.body != nil {
		add("Content-Length", strconv.Itoa(len(x.body)))
	}
	if x.closeConn && r.ProtoMajor < 2 {
		add("Connection", "close")
	}
	w.WriteHeader(x.status)
	if x.sse != nil && x.sse.sub != nil {
		s.serveStdStream(w, r, x.sse.sub) // streams.go: until the stream ends
		return
	}
	if r.Method != http.MethodHead && x.body != nil {
		_, _ = w.Write(x.body)
	}
}

// httpDate is t's second as an HTTP date (RFC 9110 section 5.6.7), made
// once a second: every answer of that second shares the string. lastDate
// is only a memo of a pure function of the second, so sharing it between
// servers is harmless.
func httpDate(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	sec := t.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return d.text
	}
	d := &dateText{sec: sec, text: time.Unix(sec, 0).UTC().Format(http.TimeFormat)}
	lastDate.Store(d)
	return d.text
}

type dateText struct {
	sec  int64
	text string
}

var lastDate atomic.Pointer[dateText]
