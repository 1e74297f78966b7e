package proxy

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"time"

	"tradergate/proxy/config"
	"tradergate/proxy/route"
	"tradergate/proxy/stream"
	"tradergate/proxy/wire"
)

// The server-sent event streams (docs/CONTRACT.md, "Streams"): the step
// that opens one. proxy/stream does the rest (the shared pollers, the
// catch-up, the fleet), and each front holds an opened stream open
// (proxy/front/stream.go).
//
// A stream request goes through every step a page request does, down to
// the key's right to the route whose data it streams (the order book
// events, a trader's activity or transfers), and costs one request of the
// key's allowance; its polls cost nothing. The stream step then opens it
// (stream.Manager.Open: the key's cap, the first read), so that whatever
// refuses it is answered as any failure is, and leaves the subscriber in
// the answer (wire.Answer.Stream) for the front to start once the
// answer's head is out.

// serveStream answers a stream path, and reports whether the path was
// one: 405, a body, 403 and 400 as for the route it streams, 429 past the
// key's cap, the failure of its first read, or 200 with the stream left
// in the answer for the front.
func (s *Server) serveStream(x *exchange) bool {
	name, address, ok := stream.Match(x.Path)
	if !ok {
		return false
	}
	s.openStream(x, name, address)
	return true
}

// openStream is serveStream's work on a stream path, apart so that its
// stack frame is reserved only there, not on every request's way.
//
//go:noinline
func (s *Server) openStream(x *exchange, name, address string) {
	x.route = s.routes.ByName(name)
	if !s.admit(x) {
		return
	}
	if err := route.CheckQuery(x.RawQuery); err != nil {
		x.fail(err)
		return
	}
	req := new(route.Request)
	if err := x.route.ValidateInto(req, address, stream.KeepParams(name, x.RawQuery)); err != nil {
		x.fail(err)
		return
	}
	// What the stream keeps outlives the exchange: copies.
	r := stream.Request{Route: name, PathParam: strings.Clone(req.PathParam), KeyID: x.keyID()}
	pairs := make([]string, 0, 8)
	for _, f := range stream.Filters(name) {
		pairs = append(pairs, f, req.Param(f))
	}
	r.Filters = stream.FilterQuery(pairs...)
	if key, ok := wire.Bearer(x.Authorization); ok {
		r.Key = sha256.Sum256([]byte(key))
	}
	// Last-Event-ID (a reconnecting EventSource sends it with the URL it
	// opened first) wins over the cursor parameter.
	switch {
	case x.LastEventID != "":
		if !stream.Valid(name, x.LastEventID) {
			x.fail(&route.Error{Message: "Invalid Last-Event-ID"})
			return
		}
		r.Start = stream.Pos{ID: strings.Clone(x.LastEventID)}
	case req.Param("cursor") != "":
		if !stream.Valid(name, req.Param("cursor")) {
			x.fail(&route.Error{Message: "Invalid cursor"})
			return
		}
		r.Start = stream.Pos{ID: strings.Clone(req.Param("cursor"))}
	default:
		if v, ok := req.IntParam(stream.StartParam(name)); ok {
			r.Start = stream.Pos{From: v, HasFrom: true}
		}
	}
	if x.Method == http.MethodHead {
		// HEAD: the head of the answer, and no stream.
		streamHead(x)
		return
	}
	sub, err := s.streams.Open(x.ctx, r)
	if err != nil {
		x.fail(streamError(err, s.cfg.Streams.Retry))
		return
	}
	x.Stream = sub
	streamHead(x)
}

// streamHead sets the answer's status and fields: an event stream, which
// no cache keeps and no proxy in between should buffer.
func streamHead(x *exchange) {
	x.Status = http.StatusOK
	x.Body, x.File = nil, nil
	x.SetHeader("Content-Type", "text/event-stream")
	x.SetHeader("Cache-Control", "no-store")
	x.SetHeader("X-Content-Type-Options", "nosniff")
	x.SetHeader("X-Accel-Buffering", "no")
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

// newStreams builds the stream manager: pages read through the cache,
// the poll floor from the cache policy, the keys watched for reloads,
// and, with Redis, the fleet's one poller per stream.
func (s *Server) newStreams(cfg *config.Config) (*stream.Manager, error) {
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
	r, err := s.cache.GetSince(ctx, req.Key, stream.Since(ctx), s.fetch(&handed{id: string(id[:])}, "", req))
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

// streamShutdown ends every stream with a retry hint as the edge drains
// (front.Beside.Streams), so that clients reconnect to another replica.
func (s *Server) streamShutdown(ctx context.Context) error { return s.streams.Shutdown(ctx) }
