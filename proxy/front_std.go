package proxy

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
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
	h2 := r.ProtoMajor >= 2
	h := w.Header()
	// One backing array for every value, rather than one slice per field.
	vals := make([]string, x.nh+3)
	for i, f := range x.headers[:x.nh] {
		name := f.name
		if h2 {
			if lower, ok := h2Names[name]; ok {
				name = lower
			}
		}
		vals[i] = f.value
		h[name] = vals[i : i+1 : i+1]
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
	if h2 {
		// x/net/http2 formats a Date of its own for every answer that
		// has none.
		add("Date", httpDate(x.start))
	} else if x.closeConn {
		// HTTP/2 has no Connection field; the stream just ends.
		add("Connection", "close")
	}
	w.WriteHeader(x.status)
	if r.Method != http.MethodHead && x.body != nil {
		_, _ = w.Write(x.body)
	}
}

// h2Names are the lower-case forms of the answer's field names that
// x/net/http2 does not know by heart. HTTP/2 sends field names in lower
// case (RFC 9113 section 8.2.1), and x/net/http2 lower-cases a copy of
// every name it does not know, answer after answer; a name given in lower
// case goes out as it is. The names it knows (Content-Type, Date, Etag,
// Retry-After, ...) stay canonical: it also reads some of those from the
// header map by their canonical name. A name missing here is still sent
// right, lower-cased by x/net/http2.
var h2Names = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"X-Request-Id", "X-Cache", "Cache-Status", "X-Content-Type-Options",
		"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit-Policy", "Ratelimit",
		"Deprecation", "Sunset",
	} {
		m[n] = strings.ToLower(n)
	}
	return m
}()

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
