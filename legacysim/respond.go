package legacysim

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"tradergate/internal/poison"
)

// Variant B envelopes (docs/CONTRACT.md#envelopes, normalize/SHAPES.md
// "Envelopes").
const (
	okPrefix = `{"success":true,"code":"0","message":"success","data":`
	okSuffix = `}`
)

// apiError is a failure answered with a variant B failure body.
type apiError struct {
	status int
	msg    string
}

func badRequest(msg string) *apiError { return &apiError{http.StatusBadRequest, msg} }

// statusMessage is the failure message for statuses the sim answers on its
// own or through Faults.FailStatus. The legacy contract fixes 401 and
// 429; the rest are plain wordings.
func statusMessage(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "Missing or invalid API key"
	case http.StatusForbidden:
		return "Forbidden"
	case http.StatusNotFound:
		return "Not found"
	case http.StatusMethodNotAllowed:
		return "Method not allowed"
	case http.StatusTooManyRequests:
		return "Too many requests. Please slow down."
	case http.StatusInternalServerError:
		return "Internal server error"
	case http.StatusBadGateway:
		return "Bad gateway"
	case http.StatusServiceUnavailable:
		return "Service unavailable"
	case http.StatusGatewayTimeout:
		return "Gateway timeout"
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "Error"
}

// appendFailure writes `{"success":false,"code":"<status>","message":...,
// "data":null}`.
func appendFailure(dst []byte, e *apiError) []byte {
	dst = append(dst, `{"success":false,"code":"`...)
	dst = strconv.AppendInt(dst, int64(e.status), 10)
	dst = append(dst, `","message":`...)
	dst = appendStr(dst, e.msg)
	return append(dst, `,"data":null}`...)
}

// sink is a pooled growable buffer; it is also the gzip writer's target.
type sink struct{ b []byte }

func (k *sink) Write(p []byte) (int, error) {
	k.b = append(k.b, p...)
	return len(p), nil
}

// maxPooled keeps one huge page (limit=10000) from pinning its buffer.
const maxPooled = 4 << 20

func (s *Sim) getSink() *sink { return s.sinks.Get().(*sink) }

func (s *Sim) putSink(k *sink) {
	if cap(k.b) <= maxPooled {
		k.b = k.b[:0]
		poison.Fill(k.b[:cap(k.b)])
		s.sinks.Put(k)
	}
}

// acceptsGzip reports whether Accept-Encoding lists gzip with a non-zero
// quality.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
			if !ok {
				return true
			}
			if f, err := strconv.ParseFloat(q, 64); err != nil || f > 0 {
				return true
			}
		}
	}
	return false
}

// write sends body with status, gzipped when the client accepts it.
// Content-Length is always set: a Truncate fault relies on it to make the
// short body detectable. With truncate, half the bytes go out and the
// connection is aborted (http.ErrAbortHandler is the documented way to do
// that without a logged stack trace).
func (s *Sim) write(w http.ResponseWriter, r *http.Request, at time.Time, status int, body []byte, retryAfter int, truncate bool) {
	s.record(r, at, status, body, truncate)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Vary", "Accept-Encoding")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	out := body
	if acceptsGzip(r) {
		z := s.getSink()
		defer s.putSink(z)
		gz := s.gzips.Get().(*gzip.Writer)
		gz.Reset(z)
		_, _ = gz.Write(body) // a sink never fails
		_ = gz.Close()
		s.gzips.Put(gz)
		out = z.b
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	if !truncate {
		_, _ = w.Write(out) // a client that went is no error of the host
		return
	}
	_, _ = w.Write(out[:len(out)/2])
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}
