package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"tradergate/cache"
	"tradergate/proxy/route"
	"tradergate/proxy/upstream"
)

// Serving from the cache: the innermost step of the chain. It answers a
// validated request from the page cache, which calls the legacy host on a
// miss, and writes the cache headers.

// servePage answers a validated request from the page cache, which calls
// the legacy host on a miss (docs/ARCHITECTURE.md "The way of a request").
func (s *Server) servePage(x *exchange) {
	if s.trace == nil {
		// A fresh hit needs no Fetch: none is made, nothing keeps x.
		if entry := s.cache.Fresh(x.req.Key, x.now); entry != nil {
			x.cache = cache.Hit.String()
			s.writeEntry(x, entry, cache.Hit)
			return
		}
	}
	ctx := x.ctx
	var span trace.Span
	if s.trace != nil {
		ctx, span = s.trace.Tracer.Start(ctx, "cache.lookup")
	}
	entry, status, err := s.cache.Get(ctx, x.req.Key, s.fetcher(x))
	x.cache = status.String()
	if span != nil {
		span.SetAttributes(attribute.String("tradergate.cache", x.cache), attribute.Bool("tradergate.cache.l2", status.L2()))
		span.End()
	}
	if err != nil {
		x.fail(err)
		return
	}
	s.writeEntry(x, entry, status)
}

// fetcher returns the cache's Fetch of x's canonical request. It may run
// after the request is gone (a coalesced flight whose starter left, a
// background refresh), so it keeps x (x.keep: never reused) and reads only
// what is the exchange's own (the canonical request, the id), recording
// through atomics (upstream.Info).
func (s *Server) fetcher(x *exchange) cache.Fetch {
	return s.fetcherOf(x, x.req)
}

// fetcherOf is fetcher for another canonical request of x's (the order
// book's events pages).
func (s *Server) fetcherOf(x *exchange, req *route.Request) cache.Fetch {
	x.keep()
	id, info := x.id, &x.upstream
	return func(ctx context.Context) ([]byte, cache.Facts, error) {
		page, err := s.upstream.Fetch(ctx, req, id, info)
		if err != nil {
			return nil, cache.Facts{}, err
		}
		return page.Body, factsOf(req, page), nil
	}
}

// factsOf tells the cache policy what it needs of a request and its page.
func factsOf(req *route.Request, page *upstream.Page) cache.Facts {
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

// writeEntry sends a cached page with its cache headers (docs/CONTRACT.md
// "Cache headers"), gzip-compressed to clients that accept it, and answers
// If-None-Match.
func (s *Server) writeEntry(x *exchange, e *cache.Entry, status cache.Status) {
	x.setHeader("X-Cache", status.String())
	n := ageNumbersOf(e, x.now)
	var values string
	var cc, cs int
	if status == cache.Hit || status == cache.Stale {
		f := hitFieldsOf(e, status, n)
		values, cc, cs = f.values, int(f.cc), int(f.cs)
	} else {
		// Misses, and the first answer of a page from the shared tier, come
		// once per page: formatted into the exchange.
		var buf [128]byte
		var b []byte
		b, cc, cs = appendAgeFields(buf[:0], e, status, n)
		values = x.own(b)
	}
	x.setHeader("Cache-Status", values[cs:])
	x.setHeader("Age", values[:cc])
	x.setHeader("Cache-Control", values[cc:cs])
	// The answer depends on Accept-Encoding whenever a gzip copy exists;
	// saying so always keeps downstream caches simple.
	x.setHeader("Vary", "Accept-Encoding")

	// Each form of the page is made once, on the first answer that wants
	// it (cache: a page is stored as it arrived).
	etag := e.ETag
	var body []byte
	gz := acceptsGzip(x.acceptEncoding)
	if gz {
		if body = e.GzipBody(); body != nil {
			etag = e.GzipETag()
		} else {
			gz = false // too small, or gzip does not shrink it
		}
	}
	if !gz {
		if body = e.Body(); body == nil {
			// A shared-tier page whose identity form would not inflate:
			// the cache has dropped it; this answer cannot be made.
			x.fail(errors.New("cache: a page's identity form could not be made"))
			return
		}
	}
	x.setHeader("ETag", etag)
	if x.ifNoneMatch != "" && etagMatches(x.ifNoneMatch, e) {
		x.status = http.StatusNotModified
		return
	}
	if gz {
		x.setHeader("Content-Encoding", "gzip")
	}
	x.reply(http.StatusOK, body)
	if x.sendfile && x.method == methodGet {
		x.file = e.File(gz) // nil for a page too short to gain by it
	}
}

// ageNumbers are what the fields of an answer from the cache that change
// with the page's age are made of, in whole seconds: Age, Cache-Control's
// max-age, and Cache-Status's ttl (the freshness left, rounded; negative
// once stale).
type ageNumbers struct{ age, fresh, ttl int64 }

func ageNumbersOf(e *cache.Entry, now time.Time) ageNumbers {
	age := e.Age(now)
	return ageNumbers{
		age:   int64(age / time.Second),
		fresh: int64(e.FreshFor(now) / time.Second),
		ttl:   int64((e.TTL - age).Round(time.Second) / time.Second),
	}
}

// hitFields are the values of those fields for a hit. A page is hit many
// times a second, and they change at most once a second, so an entry keeps
// the last ones made (its note, which holds at most cache.NoteBytes) and a
// burst of hits formats them once.
type hitFields struct {
	// What they were made from.
	status cache.Status
	n      ageNumbers
	// values holds Age, Cache-Control and Cache-Status, one after the
	// other (appendAgeFields): one allocation.
	values string
	cc, cs int32
}

// hitFieldsOf returns the fields of a hit (or stale hit) on e at the age
// n: the entry's note when it was made for the same numbers, else new
// fields, which become the note.
func hitFieldsOf(e *cache.Entry, status cache.Status, n ageNumbers) *hitFields {
	if f, _ := e.Note().(*hitFields); f != nil && f.n == n && f.status == status {
		return f
	}
	var buf [128]byte
	b, cc, cs := appendAgeFields(buf[:0], e, status, n)
	f := &hitFields{status: status, n: n, values: string(b), cc: int32(cc), cs: int32(cs)}
	e.SetNote(f)
	return f
}

// appendAgeFields appends the values of Age, Cache-Control and
// Cache-Status of an answer from e at the age n, one after the other, and
// returns where the second and the third begin.
func appendAgeFields(b []byte, e *cache.Entry, status cache.Status, n ageNumbers) (_ []byte, cc, cs int) {
	b = strconv.AppendInt(b, n.age, 10)
	cc = len(b)
	// private: the page was served to an authenticated key; a shared
	// cache downstream must not hand it to requests the edge never saw.
	b = append(b, "private, max-age="...)
	b = strconv.AppendInt(b, n.fresh, 10)
	if e.Immutable {
		b = append(b, ", immutable"...)
	}
	cs = len(b)
	return appendCacheStatus(b, status, n.ttl), cc, cs
}

// appendCacheStatus appends the RFC 9211 Cache-Status of an answer from
// the cache, kept beside X-Cache for clients that read that, naming the
// tier that answered: a hit with the freshness left (ttl, negative: served
// stale), or a forward to the legacy host and whether the page was
// stored; for the shared tier, "collapsed" when another replica's fetch
// answered.
func appendCacheStatus(v []byte, status cache.Status, ttl int64) []byte {
	if status.L2() {
		// The shared tier (Redis) answered first, the replica's memory
		// after it: RFC 9211 lists the cache nearest the origin first.
		v = append(v, "tradergate-l2; "...)
		if status == cache.MissL2 {
			v = append(v, "fwd=miss; stored; collapsed"...)
		} else {
			v = appendHit(v, ttl)
		}
		return append(v, ", tradergate; fwd=miss; stored"...)
	}
	v = append(v, "tradergate; "...)
	switch status {
	case cache.Hit, cache.Stale:
		return appendHit(v, ttl)
	case cache.Miss:
		return append(v, "fwd=miss; stored"...)
	default: // Bypass: fetched and not stored
		return append(v, "fwd=miss"...)
	}
}

// appendHit is a hit with the freshness left, negative when stale.
func appendHit(v []byte, ttl int64) []byte {
	v = append(v, "hit; ttl="...)
	return strconv.AppendInt(v, ttl, 10)
}

// etagMatches implements If-None-Match's weak comparison (RFC 9110 section
// 13.1.2): either representation's tag, with or without W/, or "*".
func etagMatches(header string, e *cache.Entry) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == e.ETag || tag == e.GzipETag() {
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
