package front

import (
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"
	"tradergate/proxy/wire"
)

// The net/http front: for anything that wants the edge as an
// http.Handler (the edge itself serves HTTP/1.1 with fasthttp and HTTP/2
// with h2edge). Like front_fast.go, it only moves a request into an
// exchange and the answer back out.

// Handler is the edge as an http.Handler.
func (e *Edge) Handler() http.Handler { return http.HandlerFunc(e.serveStd) }

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

func (e *Edge) serveStd(w http.ResponseWriter, r *http.Request) {
	ex := e.steps.Exchange(r.Context(), false)
	x := ex.In()
	x.Method = r.Method
	x.SetTarget(r.RequestURI)
	x.HasBody = r.ContentLength != 0 // -1: a body of unknown length
	x.Authorization = r.Header.Get("Authorization")
	x.Authorizations = len(r.Header.Values("Authorization"))
	x.AcceptEncoding = r.Header.Get("Accept-Encoding")
	x.IfNoneMatch = r.Header.Get("If-None-Match")
	x.IncomingID = r.Header.Get("X-Request-Id")
	x.LastEventID = r.Header.Get("Last-Event-ID")
	if e.traced {
		x.Traceparent, x.Tracestate = r.Header.Get("Traceparent"), r.Header.Get("Tracestate")
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		x.Peer = ap.Addr().Unmap()
	}
	x.ForwardedFor = r.Header.Values("X-Forwarded-For")
	if headerBytes(r) > e.cfg.MaxHeaderBytes {
		x.Refused = wire.RefusedHeaderTooLarge
	}
	a := ex.Serve()
	if a.Status == wire.StatusClientClosed {
		return // nobody is listening
	}
	h := w.Header()
	fields := a.Headers()
	// One backing array for every value, rather than one slice per field.
	vals := make([]string, len(fields)+3)
	for i, f := range fields {
		vals[i] = f.Value
		h[f.Name] = vals[i : i+1 : i+1]
	}
	n := len(fields)
	add := func(name, value string) {
		vals[n] = value
		h[name] = vals[n : n+1 : n+1]
		n++
	}
	if hsts := e.hstsValue(); hsts != "" && r.TLS != nil {
		add("Strict-Transport-Security", hsts)
	}
	if a.Body != nil {
		add("Content-Length", strconv.Itoa(len(a.Body)))
	}
	if a.CloseConn && r.ProtoMajor < 2 {
		add("Connection", "close")
	}
	w.WriteHeader(a.Status)
	if a.Stream != nil {
		e.serveStdStream(w, r, a.Stream) // stream.go: until the stream ends
		return
	}
	if r.Method != http.MethodHead && a.Body != nil {
		_, _ = w.Write(a.Body)
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
