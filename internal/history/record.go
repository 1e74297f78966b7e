package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unique"
)

// Front is how a client reached a replica.
type Front string

const (
	H1    Front = "HTTP/1.1"     // plain, served by fasthttp (page files included)
	H1TLS Front = "HTTP/1.1+TLS" // TLS, ALPN http/1.1
	H2    Front = "HTTP/2"       // TLS, ALPN h2, served by h2edge
)

// Exchange is one request a client sent and what came back, as the
// client saw it.
type Exchange struct {
	ID          string // X-Request-Id sent: the edge logs it and passes it to the legacy host
	Replica     int
	Front       Front
	Method      string
	Target      string // path and query as sent
	Gzip        bool   // Accept-Encoding: gzip was sent
	IfNoneMatch string // "" when none was sent
	Phase       int    // the run's phase when it was sent (Recorder.Phase)

	Sent, Received time.Time

	// Status is the answer's status; 0 when none came (Err says why).
	Status int
	// Err is a transport error, a body that broke off, or a gzip body
	// that does not decompress; "" for a whole answer.
	Err string

	// The fields the checker reads.
	Age, XCache, CacheStatus, ETag, CacheControl string
	ContentEncoding, ContentType, ContentLength   string
	// Body is the body decompressed (for HEAD and 304, empty). Equal
	// bodies share one string.
	Body string
}

// Recorder keeps every exchange of a run. Safe for concurrent use.
type Recorder struct {
	prefix string
	seq    atomic.Uint64
	phase  atomic.Int64

	mu sync.Mutex
	ex []Exchange
}

// NewRecorder returns a recorder whose request ids start with prefix
// (letters, digits, '-', at most 20 characters: the edge takes the
// client's id when it is 8 to 64 of [A-Za-z0-9._-]).
func NewRecorder(prefix string) *Recorder { return &Recorder{prefix: prefix} }

// SetPhase marks the exchanges sent from now on as of phase p.
func (r *Recorder) SetPhase(p int) { r.phase.Store(int64(p)) }

// Phase is the current phase.
func (r *Recorder) Phase() int { return int(r.phase.Load()) }

// Exchanges returns a copy of what was recorded, in the order the answers
// came.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.ex...)
}

// Len is how many exchanges were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ex)
}

// Request is what a client asks: Do fills in the rest.
type Request struct {
	Replica     int
	Front       Front
	Method      string // GET or HEAD
	Target      string // path and query
	Gzip        bool
	IfNoneMatch string
	Key         string // the client's API key, sent as a Bearer token
}

// Do sends rq to base (scheme and host of the replica) through rt,
// records the exchange and returns it. The transport must not decompress
// by itself: Do sends Accept-Encoding explicitly and decompresses.
func (r *Recorder) Do(ctx context.Context, rt http.RoundTripper, base string, rq Request) Exchange {
	e := Exchange{
		ID:          r.prefix + "-" + strconv.FormatUint(r.seq.Add(1), 36) + "-hist",
		Replica:     rq.Replica,
		Front:       rq.Front,
		Method:      rq.Method,
		Target:      rq.Target,
		Gzip:        rq.Gzip,
		IfNoneMatch: rq.IfNoneMatch,
		Phase:       r.Phase(),
	}
	req, err := http.NewRequestWithContext(ctx, rq.Method, base+rq.Target, nil)
	if err != nil {
		panic("history: " + err.Error()) // a target the harness built
	}
	req.Header.Set("Authorization", "Bearer "+rq.Key)
	req.Header.Set("X-Request-Id", e.ID)
	if rq.Gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	} else {
		req.Header.Set("Accept-Encoding", "identity")
	}
	if rq.IfNoneMatch != "" {
		req.Header.Set("If-None-Match", rq.IfNoneMatch)
	}
	e.Sent = time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		e.Received = time.Now()
		e.Err = err.Error()
		r.add(e)
		return e
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	e.Received = time.Now()
	e.Status = resp.StatusCode
	h := resp.Header
	e.Age, e.XCache, e.CacheStatus = h.Get("Age"), h.Get("X-Cache"), h.Get("Cache-Status")
	e.ETag, e.CacheControl = h.Get("ETag"), h.Get("Cache-Control")
	e.ContentEncoding, e.ContentType, e.ContentLength = h.Get("Content-Encoding"), h.Get("Content-Type"), h.Get("Content-Length")
	switch {
	case err != nil:
		e.Err = "body: " + err.Error()
	case e.ContentEncoding == "gzip" && len(raw) > 0:
		zr, zerr := gzip.NewReader(bytes.NewReader(raw))
		if zerr == nil {
			raw, zerr = io.ReadAll(zr)
		}
		if zerr != nil {
			e.Err = "gzip: " + zerr.Error()
		}
	}
	if len(raw) > 0 {
		e.Body = unique.Make(string(raw)).Value()
	}
	r.add(e)
	return e
}

func (r *Recorder) add(e Exchange) {
	r.mu.Lock()
	r.ex = append(r.ex, e)
	r.mu.Unlock()
}
