package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// The middleware chain: each step is a func(next http.Handler) http.Handler,
// composed in one place (Server.Handler) that reads top to bottom like the
// request's way through the edge (DESIGN.md "The way a request travels").

// exchange is what the steps learn about one request and hand on: one
// allocation per request, carried in the context by the outermost step.
type exchange struct {
	id        string
	start     time.Time
	principal *Principal
	keyID     string
	route     string
	rt        *Route
	req       *Request
	now       time.Time // the injected clock's time at arrival
	cache     string    // X-Cache value, when the page step ran
	status    int       // set by writeError for answers never sent (499)
	upstreamInfo
}

type exchangeKey struct{}

// state returns the request's exchange. Every request passes the outermost
// step first, so it is always there inside the chain.
func state(r *http.Request) *exchange {
	return r.Context().Value(exchangeKey{}).(*exchange)
}

func recordStatus(r *http.Request, status int) { state(r).status = status }

// chain composes steps so that the first one listed is the outermost.
func chain(h http.Handler, steps ...func(http.Handler) http.Handler) http.Handler {
	for i := len(steps) - 1; i >= 0; i-- {
		h = steps[i](h)
	}
	return h
}

// observe gives the request its id and exchange, and writes the access log
// line once the answer is sent. It is outermost so it sees every response.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &exchange{id: s.requestID(r.Header.Get("X-Request-Id")), start: time.Now()}
		st.now = st.start
		if !s.wallClock {
			st.now = s.now()
		}
		w.Header()["X-Request-Id"] = []string{st.id}
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, st))
		next.ServeHTTP(sw, r)

		status := sw.status
		if st.status != 0 {
			status = st.status
		}
		if status == 0 {
			status = http.StatusOK
		}
		took := time.Since(st.start)
		s.metrics.observe(st.rt, status, st.cache, took)
		if s.accessLog {
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("request_id", st.id),
				slog.String("method", r.Method),
				slog.String("route", st.route),
				slog.Int("status", status),
				slog.String("cache", st.cache),
				slog.Duration("duration", took),
				slog.Int64("bytes", sw.bytes),
				slog.Int("upstream_status", int(st.upStatus.Load())),
				slog.Duration("upstream_duration", time.Duration(st.upDur.Load())),
				slog.String("key_id", st.keyID),
			)
		}
	})
}

// requestID keeps a client's X-Request-Id when it is well-formed (so a trace
// can span client, edge and legacy host), and makes one otherwise.
func (s *Server) requestID(h string) string {
	if n := len(h); n >= 8 && n <= 64 {
		ok := true
		for i := 0; i < n && ok; i++ {
			c := h[i]
			ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_' || c == '.'
		}
		if ok {
			return h
		}
	}
	return s.ids.next()
}

// idSource makes request ids: 32 hex digits, a random prefix drawn at start
// (unique across replicas and restarts) and a counter (unique within the
// process). Cheaper than reading crypto/rand per request, and as unique.
type idSource struct {
	prefix [8]byte
	n      atomic.Uint64
}

func newIDSource() *idSource {
	s := &idSource{}
	_, _ = rand.Read(s.prefix[:])
	return s
}

func (s *idSource) next() string {
	var b [32]byte
	hex.Encode(b[:16], s.prefix[:])
	n := s.n.Add(1)
	const digits = "0123456789abcdef"
	for i := 31; i >= 16; i-- {
		b[i] = digits[n&15]
		n >>= 4
	}
	return string(b[:])
}

// recoverPanics turns a panic in a handler into a variant A 500 and a log
// line, never a dropped process (net/http would only drop the connection).
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v) // the deliberate way to abort a response
			}
			s.log.Error("panic in handler", "request_id", state(r).id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if sw, ok := w.(*statusWriter); ok && sw.status != 0 {
				// Headers are gone; all that is left is cutting the body short.
				panic(http.ErrAbortHandler)
			}
			writeError(w, r, &Error{Status: http.StatusInternalServerError, Message: msgInternal})
		}()
		next.ServeHTTP(w, r)
	})
}

// Limits on what a request may carry (issue 5, item 5). Request lines and
// headers beyond server.max_header_bytes are refused by net/http itself.
const (
	maxURLBytes       = 8 << 10
	msgURITooLong     = "URI too long"
	msgBodyNotAllowed = "Request body not allowed"
)

// route matches the path, refuses wrong methods, oversized URLs, bodies and
// routes the key may not use, and validates the request (SPEC "Endpoints",
// "Errors").
func (s *Server) route(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := state(r)
		rt, param := s.router.match(r.URL.Path)
		if rt == nil {
			writeError(w, r, &Error{Status: http.StatusNotFound, Message: msgNotFound})
			return
		}
		st.route, st.rt = rt.Name, rt
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// SPEC: every endpoint uses GET; HEAD is GET without a body
			// (RFC 9110 section 9.3.2).
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Message: msgMethod})
			return
		}
		if len(r.RequestURI) > maxURLBytes {
			writeError(w, r, &Error{Status: http.StatusRequestURITooLong, Message: msgURITooLong})
			return
		}
		if r.ContentLength != 0 {
			// A GET body has no meaning (RFC 9110 section 9.3.1), and
			// reading one is work a client should not be able to ask for.
			// -1 is a chunked body of unknown length.
			w.Header().Set("Connection", "close")
			writeError(w, r, &Error{Status: http.StatusBadRequest, Message: msgBodyNotAllowed})
			return
		}
		if !st.principal.Allowed(rt) {
			writeError(w, r, &Error{Status: http.StatusForbidden, Message: msgForbidden})
			return
		}
		req, err := rt.Validate(param, r.URL.RawQuery)
		if err != nil {
			writeError(w, r, err)
			return
		}
		st.req = req
		next.ServeHTTP(w, r)
	})
}

// statusWriter records the status and size of a response for the log.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
