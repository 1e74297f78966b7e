package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"tradergate/cache"
	"tradergate/limits"
)

// msgUpstreamBusy: the upstream shield had no slot for a miss within
// upstream.queue_timeout and nothing stale was held (issue 4, item 5).
const msgUpstreamBusy = "Upstream busy"

// servePage answers a validated request from the page cache, which calls
// the legacy host on a miss (DESIGN.md "The way a request travels").
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	st := state(r)
	entry, status, err := s.cache.Get(r.Context(), st.req.Key, s.fetcher(st))
	st.cache = status.String()
	if err != nil {
		writeError(w, r, err)
		return
	}
	s.writeEntry(w, r, entry, status)
}

// fetcher returns the cache's Fetch for one request. It may run after its
// request is gone (a coalesced flight whose starter left, a background
// refresh), so it records into the exchange only through atomics and never
// touches the ResponseWriter.
func (s *Server) fetcher(st *exchange) cache.Fetch {
	req, id := st.req, st.id
	return func(ctx context.Context) ([]byte, cache.Facts, error) {
		page, err := s.fetchPage(ctx, req, id, &st.upstreamInfo)
		if err != nil {
			return nil, cache.Facts{}, err
		}
		return page.Body, factsOf(req, page), nil
	}
}

// fetchPage gets one page from the legacy host within upstream.timeout:
// attempts through the back-off gate, the shield and the route's breaker
// (DESIGN.md "The way a request travels"), retried within the budget while
// someone still waits for the page (issue 5, item 4).
func (s *Server) fetchPage(ctx context.Context, req *Request, id string, info *upstreamInfo) (*Page, error) {
	c := s.cfg.Upstream
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	s.budget.deposit()
	for n := 1; ; n++ {
		page, err := s.attempt(ctx, req, id, info)
		if err == nil || n >= c.Retry.MaxAttempts || !retryable(err) || cache.Abandoned(ctx) {
			return page, err
		}
		wait := backoff(c.Retry, n, err)
		if deadline, ok := ctx.Deadline(); wait > c.Retry.MaxBackoff || ok && time.Until(deadline) <= wait {
			// An upstream Retry-After longer than we may wait, or no time
			// left for another attempt: this error is the answer.
			return nil, err
		}
		if !s.budget.withdraw() {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// attempt is one legacy call: held back after a legacy 429, capped by the
// shield, allowed by the route's breaker, its outcome reported to it.
func (s *Server) attempt(ctx context.Context, req *Request, id string, info *upstreamInfo) (*Page, error) {
	if err := s.up.held(); err != nil {
		return nil, err
	}
	release, err := s.shield.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	done, err := (*s.breakers.Load())[req.Route.index].allow()
	if err != nil {
		return nil, err
	}
	start := time.Now() // wall time: a duration, whatever the injected clock does
	page, status, err := s.up.fetch(ctx, req, id)
	done(err)
	took := time.Since(start)
	s.metrics.observeUpstream(req.Route.Name, status, took)
	info.upStatus.Store(int32(status))
	info.upDur.Store(int64(took))
	return page, err
}

// factsOf tells the cache policy what it needs of a request and its page.
func factsOf(req *Request, page *Page) cache.Facts {
	unit := time.Second
	if req.Route.TimeUnitMs {
		unit = time.Millisecond
	}
	return cache.Facts{
		Route:        req.Route.Name,
		Class:        req.Route.Class,
		Cursor:       req.Cursor,
		Upper:        req.Upper,
		HasUpper:     req.HasUpper,
		UpperIsBlock: req.UpperIsBlock,
		TimeUnit:     unit,
		Meta:         page.Meta,
	}
}

// staleOK says which fetch errors may be answered with a stale page: the
// legacy host failing or being shielded, never a request the legacy host
// refused as the client's fault (issue 3, item 5).
func staleOK(err error) bool {
	if errors.Is(err, limits.ErrShieldFull) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	e, ok := errors.AsType[*Error](err)
	return ok && e.Status >= 500
}

// writeEntry sends a cached page with its cache headers (issue 3, item 6),
// gzip-compressed to clients that accept it, and answers If-None-Match.
func (s *Server) writeEntry(w http.ResponseWriter, r *http.Request, e *cache.Entry, status cache.Status) {
	now := state(r).now
	h := w.Header()
	// Header keys are written in canonical form directly: Set would
	// canonicalize each on every hit. Values that never change are shared
	// slices (no allocation per hit); nothing writes into a header value
	// in place (Set and Add replace or reallocate the slice).
	h["X-Cache"] = xCacheValue(status)
	h["Age"] = []string{strconv.FormatInt(int64(e.Age(now)/time.Second), 10)}
	// The answer depends on Accept-Encoding whenever a gzip copy exists;
	// saying so always keeps downstream caches simple.
	h["Vary"] = varyAcceptEncoding
	cc := "private, max-age=" + strconv.FormatInt(int64(e.FreshFor(now)/time.Second), 10)
	if e.Immutable {
		cc += ", immutable"
	}
	// private: the page was served to an authenticated key; a shared cache
	// downstream must not hand it to requests the edge never saw.
	h["Cache-Control"] = []string{cc}

	body, etag := e.Body, e.ETag
	gz := e.Gzip != nil && acceptsGzip(r.Header.Get("Accept-Encoding"))
	if gz {
		body, etag = e.Gzip, e.GzipETag()
	}
	h["Etag"] = []string{etag}
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, e) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if gz {
		h["Content-Encoding"] = contentEncodingGzip
	}
	writeBody(w, r, http.StatusOK, body)
}

// Header values shared by every answer that carries them (writeEntry).
var (
	xCacheValues = [...][]string{
		cache.Hit: {"HIT"}, cache.Miss: {"MISS"}, cache.Stale: {"STALE"}, cache.Bypass: {"BYPASS"},
	}
	varyAcceptEncoding  = []string{"Accept-Encoding"}
	contentEncodingGzip = []string{"gzip"}
)

// xCacheValue is the shared X-Cache value of status; a status the table
// does not know yet gets its own, rather than an index out of range.
func xCacheValue(status cache.Status) []string {
	if int(status) < len(xCacheValues) && xCacheValues[status] != nil {
		return xCacheValues[status]
	}
	return []string{status.String()}
}

// etagMatches implements If-None-Match's weak comparison (RFC 9110 section
// 13.1.2): either representation's tag, with or without W/, or "*".
func etagMatches(header string, e *cache.Entry) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == e.ETag || (e.Gzip != nil && tag == e.GzipETag()) {
			return true
		}
	}
	return false
}

// acceptsGzip reads Accept-Encoding (RFC 9110 section 12.5.3): gzip (or
// x-gzip) with a q-value above zero, or else * with one.
func acceptsGzip(h string) bool {
	if h == "" {
		return false
	}
	gzip, star := -1, -1 // -1: not named; 0: refused; 1: accepted
	for part := range strings.SplitSeq(h, ",") {
		coding, params, _ := strings.Cut(part, ";")
		ok := 1
		if v, found := strings.CutPrefix(strings.ToLower(strings.TrimSpace(params)), "q="); found {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f == 0 {
				ok = 0
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzip = ok
		case "*":
			star = ok
		}
	}
	if gzip >= 0 {
		return gzip == 1
	}
	return star == 1
}

// upstreamInfo carries the upstream status and duration of the flight a
// request started, for its access log line.
type upstreamInfo struct {
	upStatus atomic.Int32
	upDur    atomic.Int64
}
