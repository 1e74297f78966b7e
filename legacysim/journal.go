package legacysim

import (
	"net/http"
	"sync"
	"time"
	"unique"
)

// The journal (Config.Journal) is what the host answered, one record per
// request, for checkers that must know what the edge was given: every 200
// the edge serves must be the rewrite of one of these bodies
// (internal/history). It records rather than renders again on demand
// because a record is what was said, faults included (a cut body, a 503,
// a hang), at the instant it was said; the data as of any instant is also
// a pure function of the clock (live.go), so a record can be checked by
// asking the sim again at its At.

// Answer is one request the host received and what it answered.
type Answer struct {
	At        time.Time // the sim's clock when the answer was made: its data is as of At
	Method    string
	Path      string // as received, /open-api included
	Query     string // the raw query as received
	RequestID string // the request's X-Request-Id, which the edge passes on from its client
	// Status is the HTTP status sent; 0 when nothing was (a hang, or a
	// client gone during Faults.Latency).
	Status int
	// Body is the variant B body, uncompressed and whole (even when Cut).
	// Equal bodies share one string.
	Body string
	// Cut: the Truncate fault sent half of Body and broke the connection.
	Cut bool
}

type journal struct {
	mu      sync.Mutex
	answers []Answer
}

// record keeps one answer; body is copied (interned).
func (s *Sim) record(r *http.Request, at time.Time, status int, body []byte, cut bool) {
	j := s.journal
	if j == nil {
		return
	}
	a := Answer{At: at, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		RequestID: r.Header.Get("X-Request-Id"), Status: status, Cut: cut}
	if body != nil {
		// Pages are asked for again and again: one copy of each body.
		a.Body = unique.Make(string(body)).Value()
	}
	j.mu.Lock()
	j.answers = append(j.answers, a)
	j.mu.Unlock()
}

// Journal returns the answers recorded so far, in the order they were
// made; nil without Config.Journal.
func (s *Sim) Journal() []Answer {
	j := s.journal
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Answer(nil), j.answers...)
}
