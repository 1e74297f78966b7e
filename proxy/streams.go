package proxy

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"tradergate/proxy/h2edge"
	"tradergate/proxy/route"
	"tradergate/proxy/stream"
)

// The server-sent event streams (docs/CONTRACT.md#streams): the step
// that opens one, and each front's way of holding it open. proxy/stream
// does the rest: the shared pollers, the catch-up, the fleet.
//
// A stream request goes through every step a page request does, down to
// the key's right to the route whose data it streams (the order book
// events, a trader's activity or transfers), and costs one request of the
// key's allowance; its polls cost nothing. The stream step then opens it
// (stream.Manager.Open: the key's cap, the first read), so that whatever
// refuses it is answered as any failure is, and leaves the subscriber in
// the exchange for the front to start once the answer's head is out.

// sse is the stream part of an exchange, made only for a request that
// carries Last-Event-ID or opens a stream.
type sse struct {
	lastEventID string             // the Last-Event-ID field, as sent
	sub         *stream.Subscriber // the stream to start, once opened
}

// streamPaths are the stream paths, by the route they stream: the
// route's path with "/stream" added.
var streamPaths = map[string]string{
	"/v1/orderbook/stream":                             stream.RouteOrderBook,
	"/v1/trader/{address}/activity/stream":             stream.RouteActivity,
	"/v1/trader/{address}/deposits-withdrawals/stream": stream.RouteTransfers,
}

// matchStream finds a stream path: the route it streams and its address.
func matchStream(path string) (name, address string, ok bool) {
	if !strings.HasSuffix(path, "/stream") {
		return "", "", false
	}
	if name, ok := streamPaths[path]; ok {
		return name, "", true
	}
	rest, found := strings.CutPrefix(path, "/v1/trader/")
	if !found {
		return "", "", false
	}
	address, tail, found := strings.Cut(rest, "/")
	if !found || address == "" {
		return "", "", false
	}
	name, ok = streamPaths["/v1/trader/{address}/"+tail]
	return name, address, ok
}

// streamParams are the query parameters a stream takes, by route: its
// route's filters, and where to start (cursor, from or fromTimestamp).
// The rest are dropped, as unknown parameters are
// (docs/CONTRACT.md#query-parameters).
var streamParams = map[string][]string{
	stream.RouteOrderBook: {"marketId", "conditionId", "tokenId", "eventType", "from", "cursor"},
	stream.RouteActivity:  {"marketIds", "fromTimestamp", "cursor"},
	stream.RouteTransfers: {"type", "minAmount", "fromTimestamp", "cursor"},
}

// streamFilters are the filters of each route, the parts of its
// canonical stream.
var streamFilters = map[string][]string{
	stream.RouteOrderBook: {"marketId", "conditionId", "tokenId", "eventType"},
	stream.RouteActivity:  {"marketIds"},
	stream.RouteTransfers: {"type", "minAmount"},
}

// serveStream answers a stream path, and reports whether the path was
// one: 405, a body, 403 and 400 as for the route it streams, 429 past the
// key's cap, the failure of its first read, or 200 with the stream left
// in x.sse for the front.
func (s *Server) serveStream(x *exchange) bool {
	name, address, ok := matchStream(x.path)
	if !ok {
		return false
	}
	x.route = s.routes.ByName(name)
	if !s.admit(x) {
		return true
	}
	if err := route.CheckQuery(x.rawQuery); err != nil {
		x.fail(err)
		return true
	}
	req := new(route.Request)
	if err := x.route.ValidateInto(req, address, keepParams(x.rawQuery, streamParams[name])); err != nil {
		x.fail(err)
		return true
	}
	// What the stream keeps outlives the exchange: copies.
	r := stream.Request{Route: name, PathParam: strings.Clone(req.PathParam), KeyID: x.keyID()}
	pairs := make([]string, 0, 8)
	for _, f := range streamFilters[name] {
		pairs = append(pairs, f, req.Param(f))
	}
	r.Filters = stream.FilterQuery(pairs...)
	if key, ok := bearer(x.authorization); ok {
		r.Key = sha256.Sum256([]byte(key))
	}
	// Last-Event-ID (a reconnecting EventSource sends it with the URL it
	// opened first) wins over the cursor parameter.
	switch {
	case x.sse != nil && x.sse.lastEventID != "":
		id := x.sse.lastEventID
		if !stream.Valid(name, id) {
			x.fail(&route.Error{Message: "Invalid Last-Event-ID"})
			return true
		}
		r.Start = stream.Pos{ID: strings.Clone(id)}
	case req.Param("cursor") != "":
		if !stream.Valid(name, req.Param("cursor")) {
			x.fail(&route.Error{Message: "Invalid cursor"})
			return true
		}
		r.Start = stream.Pos{ID: strings.Clone(req.Param("cursor"))}
	default:
		from := "from"
		if name != stream.RouteOrderBook {
			from = "fromTimestamp"
		}
		if v, ok := req.IntParam(from); ok {
			r.Start = stream.Pos{From: v, HasFrom: true}
		}
	}
	if x.method == methodHead {
		// HEAD: the head of the answer, and no stream.
		s.streamHead(x)
		return true
	}
	sub, err := s.streams.Open(x.ctx, r)
	if err != nil {
		x.fail(streamError(err, s.cfg.Streams.Retry))
		return true
	}
	if x.sse == nil {
		x.sse = new(sse)
	}
	x.sse.sub = sub
	s.streamHead(x)
	return true
}

// streamHead sets the answer's status and fields: an event stream, which
// no cache keeps and no proxy in between should buffer.
func (s *Server) streamHead(x *exchange) {
	x.status = http.StatusOK
	x.body, x.file = nil, nil
	x.setHeader("Content-Type", "text/event-stream")
	x.setHeader("Cache-Control", "no-store")
	x.setHeader("X-Content-Type-Options", "nosniff")
	x.setHeader("X-Accel-Buffering", "no")
}

// streamError maps what refused a stream to the error table.
func streamError(err error, retry time.Duration) error {
	var many *stream.TooManyError
	switch {
	case errors.As(err, &many):
		return &edgeError{kind: failStreamCap, message: many.Error(), RetryAfter: retry, Err: err}
	case errors.Is(err, stream.ErrShuttingDown):
		return &edgeError{kind: failShuttingDown, RetryAfter: time.Second, Err: err}
	case errors.Is(err, stream.ErrBadID):
		return &route.Error{Message: "Invalid Last-Event-ID"}
	}
	return err
}

// keepParams is rawQuery with only the parameters named in keep, as
// they were sent. CheckQuery has found every escape whole.
func keepParams(rawQuery string, keep []string) string {
	var b strings.Builder
	for piece := range strings.SplitSeq(rawQuery, "&") {
		name, _, _ := strings.Cut(piece, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			for _, k := range keep {
				if n == k {
					if b.Len() > 0 {
						b.WriteByte('&')
					}
					b.WriteString(piece)
					break
				}
			}
		}
	}
	return b.String()
}

// newStreams builds the stream manager: pages read through the cache,
// the poll floor from the cache policy, the keys watched for reloads,
// and, with Redis, the fleet's one poller per stream.
func (s *Server) newStreams(cfg *Config) (*stream.Manager, error) {
	opt := stream.Options{
		Pages:       s.streamPages,
		FreshTTL:    s.freshTTL,
		OpenTimeout: cfg.Upstream.Timeout,
		KeysVersion: func() any { return s.keys.Load() },
		KeyValid: func(key [32]byte, name string) bool {
			p := s.keys.Load().byHash[key]
			return p != nil && p.Allowed(s.routes.ByName(name))
		},
		Registry: s.registry,
		Now:      s.now,
		Logger:   s.log,
	}
	if s.fleet != nil {
		opt.Redis, opt.RedisPrefix, opt.RedisTimeout = s.fleet.Client(), s.fleet.Key("stream"), s.fleet.Timeout()
	}
	return stream.New(cfg.Streams, opt)
}

// freshTTL is a route's fresh TTL as the cache policy now says.
func (s *Server) freshTTL(name string) time.Duration {
	c := s.live.Load().Cache
	return cmp.Or(c.Routes[name].FreshTTL, c.Policy.FreshTTL)
}

// streamPages reads a page for a stream through the cache: the same
// canonical request, entry and flight as a client's request for it. A
// refusal of the request by the legacy host is permanent (a retry would
// meet it again); anything else is retried at the next poll.
func (s *Server) streamPages(ctx context.Context, name, pathParam, rawQuery string) ([]byte, bool, error) {
	req := new(route.Request)
	if err := s.routes.ByName(name).ValidateInto(req, pathParam, rawQuery); err != nil {
		return nil, false, permanentError{err}
	}
	var id [32]byte
	newRequestID(&id)
	r, err := s.cache.Get(ctx, req.Key, s.fetch(&handed{id: string(id[:])}, "", req))
	fetched := r.Fetched && r.Report.Origin != ""
	if err != nil {
		if asError(err).kind == failUpstreamRefused {
			err = permanentError{err}
		}
		return nil, fetched, err
	}
	body := r.Entry.Body()
	if body == nil {
		return nil, fetched, errNoIdentityForm
	}
	return body, fetched, nil
}

// permanentError marks a read that retrying cannot mend.
type permanentError struct{ error }

func (permanentError) Permanent() bool { return true }

func (e permanentError) Unwrap() error { return e.error }

// startFast starts an opened stream on an HTTP/1.1 connection: fasthttp
// hands the connection over once the handler returns, without writing
// anything (HijackSetNoResponse); the stream's sink writes the head
// itself, then the chunks, and closes the connection when the stream
// ends (stream.ConnSink says why it does not use a streamed body).
func (s *Server) startFast(x *exchange, ctx *fasthttp.RequestCtx) {
	sub := x.sse.sub
	head := make([]byte, 0, 512)
	head = append(head, "HTTP/1.1 200 OK\r\n"...)
	for _, f := range x.headers[:x.nh] {
		head = appendHeadField(head, f.name, f.value)
	}
	if ctx.IsTLS() {
		if hsts := s.hstsValue(); hsts != "" {
			head = appendHeadField(head, "Strict-Transport-Security", hsts)
		}
	}
	head = appendHeadField(head, "Date", httpDate(x.start))
	head = append(head, "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"...)
	timeout := s.cfg.Streams.WriteTimeout
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			c = u.UnsafeConn() // not fasthttp's reader, which holds its buffer
		}
		sub.Start(stream.NewConnSink(c, c, head, sub, timeout))
	})
}

// appendHeadField appends "name: value\r\n", any CR or LF of value made a
// space, as fasthttp does, so that no value splits the head.
func appendHeadField(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ':', ' ')
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

// startH2 starts an opened stream on an HTTP/2 stream held open
// (h2edge's Open): its DATA go out as the client's windows allow.
func (s *Server) startH2(x *exchange, st *h2edge.Stream) {
	sub := x.sse.sub
	st.Status(x.status)
	for _, f := range x.headers[:x.nh] {
		st.Field(h2Name(f.name), f.value)
	}
	if hsts := s.hstsValue(); hsts != "" {
		st.Field(h2HSTS, hsts)
	}
	st.Field(h2Date, httpDate(x.start))
	if !st.Open(sub.Drained, func() { sub.Gone(nil) }) {
		sub.Abandon()
		return
	}
	sub.Start(&h2Sink{st: st, timeout: s.cfg.Streams.WriteTimeout})
}

// h2Sink is a stream's Sink on an HTTP/2 stream held open.
type h2Sink struct {
	st      *h2edge.Stream
	timeout time.Duration
}

func (k *h2Sink) Write(p []byte) (int, error) { return k.st.Write(p) }

// End ends the stream once its last bytes are framed; a client whose
// window stays closed past the write timeout has the stream reset.
func (k *h2Sink) End() {
	k.st.End()
	time.AfterFunc(k.timeout, k.st.Cut)
}

func (k *h2Sink) Cut() { k.st.Cut() }

// streamShutdown ends every stream with a retry hint as the edge drains
// (serve.go), so that clients reconnect to another replica.
func (s *Server) streamShutdown(ctx context.Context) error { return s.streams.Shutdown(ctx) }

// keepLastEventID keeps the Last-Event-ID field's first value
// (readField).
func (x *request) keepLastEventID(value string) {
	if x.sse == nil {
		x.sse = &sse{lastEventID: value}
	} else if x.sse.lastEventID == "" {
		x.sse.lastEventID = value
	}
}

// serveStdStream holds an opened stream on the net/http front until it
// ends: its handler's goroutine writes and flushes what the stream
// queued.
func (s *Server) serveStdStream(w http.ResponseWriter, r *http.Request, sub *stream.Subscriber) {
	k := &stdSink{wake: make(chan struct{}, 1)}
	sub.Start(k)
	rc := http.NewResponseController(w)
	for {
		select {
		case <-k.wake:
		case <-r.Context().Done():
			sub.Gone(r.Context().Err())
			return
		}
		k.mu.Lock()
		b, ending, closed := k.buf, k.ending, k.closed
		k.buf, k.inflight = nil, len(b)
		k.mu.Unlock()
		if closed {
			sub.Gone(nil)
			return
		}
		if len(b) > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.Streams.WriteTimeout))
			_, err := w.Write(b)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				sub.Gone(err)
				return
			}
		}
		k.mu.Lock()
		k.inflight = 0
		done := ending && len(k.buf) == 0
		k.mu.Unlock()
		sub.Drained()
		if done {
			sub.Gone(nil)
			return
		}
	}
}

// stdSink is a stream's Sink on the net/http front.
type stdSink struct {
	mu       sync.Mutex
	buf      []byte
	inflight int
	ending   bool
	closed   bool
	wake     chan struct{}
}

func (k *stdSink) signal() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *stdSink) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.ending {
		return 0, errStreamEnded
	}
	if len(p) > 0 {
		k.buf = append(k.buf, p...)
		k.signal()
	}
	return len(k.buf) + k.inflight, nil
}

func (k *stdSink) End() {
	k.mu.Lock()
	k.ending = true
	k.mu.Unlock()
	k.signal()
}

func (k *stdSink) Cut() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.signal()
}

var errStreamEnded = errors.New("stream ended")
