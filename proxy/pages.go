package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"tradergate/cache"
	"tradergate/normalize"
	"tradergate/proxy/native"
	"tradergate/proxy/route"
	"tradergate/proxy/wire"
)

// Serving from the cache: the innermost step of the chain. It answers a
// validated request from the page cache, which calls the legacy host on a
// miss, and writes the cache headers.

// servePage answers a validated request from the page cache: a fresh hit
// at once, else the cache's answer (cache.Get: stale, or a flight that
// fetches through fetch), then the page with its cache headers
// (docs/ARCHITECTURE.md "The way of a request").
func (s *Server) servePage(x *exchange) {
	if s.trace == nil {
		// A fresh hit needs no Fetch: none is made.
		if entry := s.cache.Fresh(x.req.Key, x.now); entry != nil {
			x.cache = cache.Hit
			s.writeEntry(x, entry, cache.Hit)
			return
		}
	}
	ctx := x.ctx
	var span trace.Span
	if s.trace != nil {
		ctx, span = s.trace.Tracer.Start(ctx, "cache.lookup")
	}
	r, err := s.cache.Get(ctx, x.req.Key, s.fetch(x.handOn(), x.keyID(), x.req))
	x.cache, x.upstream = r.Status, r.Report
	if span != nil {
		span.SetAttributes(attribute.String("tradergate.cache", r.Status.String()), attribute.Bool("tradergate.cache.l2", r.Status.L2()))
		span.End()
	}
	if err != nil {
		x.fail(err)
		return
	}
	s.writeEntry(x, r.Entry, r.Status)
	if r.Fetched && r.Report.Origin == originLegacy && (r.Status == cache.Miss || r.Status == cache.Bypass) && s.native.Shadows(x.route.Name) {
		// This request started the flight, whose Fetch the legacy host
		// answered, and the cache classified that page: offered for a
		// comparison with native (shadow work, off the answer's way).
		if body := r.Entry.Body(); body != nil {
			s.native.Shadow(x.route.Name, r.Entry.Immutable, body, x.req.SuccessorPath())
		}
	}
}

// The origins a Fetch reports (cache.Report.Origin).
const (
	originLegacy = "legacy"
	originNative = "native"
)

// fetch returns the cache's Fetch of req: one way for every miss, with
// the backend chosen inside it (docs/ARCHITECTURE.md "Moving the
// backend"). A route native serves for this key (native.Backend.Decide,
// by keyID, the key of the request that starts the flight: the callers
// who join it share its page) is fetched from native; when native fails,
// or for any other route, from the legacy host. A legacy path's request
// (variant B) always goes to the legacy host. The Fetch reports which of
// them answered, and the legacy call's status and duration (cache.Report).
//
// The Fetch may run after the request is gone (a coalesced flight whose
// starter left, a background refresh), while its exchange serves another
// request: it reads only copies, h (exchange.handOn) and req's own
// (route.Request.Own), never the exchange.
func (s *Server) fetch(h *handed, keyID string, req *route.Request) cache.Fetch {
	id, req := h.id, req.Own()
	return func(ctx context.Context, abandoned func() bool) ([]byte, cache.Facts, error) {
		if !req.Legacy && s.native.Decide(req.Route.Name, keyID) == native.Native {
			body, meta, err := s.fetchNative(ctx, req)
			if err == nil {
				facts := factsOf(req, meta)
				facts.Report.Origin = originNative
				return body, facts, nil
			}
			// Counted by native (tradergate_native_requests_total), and
			// against the route's rollback.
			s.log.LogAttrs(ctx, slog.LevelDebug, "native failed; the legacy host serves the miss",
				slog.String("request_id", id), slog.String("route", req.Route.Name), slog.Any("error", err))
		}
		page, call, err := s.upstream.Fetch(ctx, req, id, abandoned)
		report := cache.Report{Origin: originLegacy, Status: call.Status, Took: call.Took}
		if err != nil {
			return nil, cache.Facts{Report: report}, err
		}
		facts := factsOf(req, page.Meta)
		facts.Report = report
		return page.Body, facts, nil
	}
}

// fetchNative gets req's page from the native service. Its answer is
// variant A already; it goes through normalize.Rewrite all the same,
// which passes variant A data through byte for byte, writes the envelope
// in its canonical form, and reads the same normalize.Meta as from a
// legacy page: a native page is classified by the cache policy exactly as
// the legacy-derived page would be. A body the rewrite refuses is a bad
// body of native's, and the legacy host serves the miss.
func (s *Server) fetchNative(ctx context.Context, req *route.Request) ([]byte, normalize.Meta, error) {
	rt := req.Route
	var page []byte
	var meta normalize.Meta
	_, err := s.native.Fetch(ctx, rt.Name, req.SuccessorPath(), func(body []byte) error {
		var err error
		page, meta, err = normalize.Rewrite(nil, body, normalize.Options{Shape: rt.Shape, TimeField: rt.TimeField})
		return err
	})
	return page, meta, err
}

// factsOf tells the cache policy what it needs of a request and its page.
func factsOf(req *route.Request, meta normalize.Meta) cache.Facts {
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
		Meta:         meta,
	}
}

// writeEntry sends a cached page with its cache headers (docs/CONTRACT.md
// "Cache headers"), gzip-compressed to clients that accept it, and answers
// If-None-Match.
func (s *Server) writeEntry(x *exchange, e *cache.Entry, status cache.Status) {
	s.setCacheFields(&x.Answer, x.now, e, status)
	if err := writeForm(&x.Request, &x.Answer, e); err != nil {
		x.fail(err)
	}
}

// setCacheFields sets X-Cache, Cache-Status, Age, Cache-Control and Vary
// of an answer from the cache, for a request that arrived at now.
func (s *Server) setCacheFields(x *wire.Answer, now time.Time, e *cache.Entry, status cache.Status) {
	x.SetHeader("X-Cache", status.String())
	n := ageNumbersOf(e, now)
	var values string
	var cc, cs int
	if status == cache.Hit || status == cache.Stale {
		f := s.hits.fields(e.Immutable, status, n)
		values, cc, cs = f.values, int(f.cc), int(f.cs)
	} else {
		// Misses, and the first answer of a page from the shared tier, come
		// once per page: formatted into the exchange.
		var buf [128]byte
		var b []byte
		b, cc, cs = appendAgeFields(buf[:0], e.Immutable, status, n)
		values = x.Own(b)
	}
	x.SetHeader("Cache-Status", values[cs:])
	x.SetHeader("Age", values[:cc])
	x.SetHeader("Cache-Control", values[cc:cs])
	// The answer depends on Accept-Encoding whenever a gzip copy exists;
	// saying so always keeps downstream caches simple.
	x.SetHeader("Vary", "Accept-Encoding")
}

// writeForm answers r with the form of the page the client accepts, gzip
// or identity, its ETag, and 304 when If-None-Match names it, into a; an
// error when the page has no form to send.
func writeForm(r *wire.Request, a *wire.Answer, e *cache.Entry) error {
	// Each form of the page is made once, on the first answer that wants
	// it (cache: a page is stored as it arrived).
	etag := e.ETag
	var body []byte
	gz := acceptsGzip(r.AcceptEncoding)
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
			return errNoIdentityForm
		}
	}
	a.SetHeader("ETag", etag)
	if r.IfNoneMatch != "" && etagMatches(r.IfNoneMatch, e) {
		a.Status = http.StatusNotModified
		return nil
	}
	if gz {
		a.SetHeader("Content-Encoding", "gzip")
	}
	a.Reply(http.StatusOK, body)
	if r.Sendfile && r.Method == http.MethodGet {
		a.File = e.File(gz) // nil for a page too short to gain by it
	}
	return nil
}

var errNoIdentityForm = errors.New("cache: a page's identity form could not be made")

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

// hitFields are the values of those fields for a hit.
type hitFields struct {
	key hitKey // what they were made from
	// values holds Age, Cache-Control and Cache-Status, one after the
	// other (appendAgeFields): one allocation.
	values string
	cc, cs int32
}

// hitKey is all the fields of a hit depend on.
type hitKey struct {
	n         ageNumbers
	status    cache.Status
	immutable bool
}

// hitMemo keeps the fields of recent hits. A page is hit many times a
// second and its fields change at most once a second, so a burst of hits
// formats them once; pages of the same age share them. A slot holds the
// fields last made for the keys that fall on it.
type hitMemo [1 << hitMemoBits]atomic.Pointer[hitFields]

const hitMemoBits = 10

// fields returns the fields of a hit (or stale hit) at the age n: those
// kept when made for the same key, else new ones, which are kept.
func (m *hitMemo) fields(immutable bool, status cache.Status, n ageNumbers) *hitFields {
	k := hitKey{n, status, immutable}
	slot := &m[k.slot()]
	if f := slot.Load(); f != nil && f.key == k {
		return f
	}
	var buf [128]byte
	b, cc, cs := appendAgeFields(buf[:0], immutable, status, n)
	f := &hitFields{key: k, values: string(b), cc: int32(cc), cs: int32(cs)}
	slot.Store(f)
	return f
}

// slot spreads the keys over the memo (a multiplicative hash).
func (k hitKey) slot() int {
	h := uint64(k.n.age)*0x9e3779b97f4a7c15 ^ uint64(k.n.fresh)*0xc2b2ae3d27d4eb4f ^
		uint64(k.n.ttl)<<8 ^ uint64(k.status)<<1
	if k.immutable {
		h ^= 1
	}
	return int(h * 0x9e3779b97f4a7c15 >> (64 - hitMemoBits))
}

// appendAgeFields appends the values of Age, Cache-Control and
// Cache-Status of an answer from the cache at the age n, one after the
// other, and returns where the second and the third begin.
func appendAgeFields(b []byte, immutable bool, status cache.Status, n ageNumbers) (_ []byte, cc, cs int) {
	b = strconv.AppendInt(b, n.age, 10)
	cc = len(b)
	// private: the page was served to an authenticated key; a shared
	// cache downstream must not hand it to requests the edge never saw.
	b = append(b, "private, max-age="...)
	b = strconv.AppendInt(b, n.fresh, 10)
	if immutable {
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
