// Package h2edge serves HTTP/2 (RFC 9113) connections for the edge: the
// frames are read and checked by golang.org/x/net/http2's Framer and the
// request header blocks decoded by its hpack, but the server is the
// edge's own, made for answers that are whole byte slices when the handler
// returns (a cached page, an error envelope).
//
// What a cached answer does not pay for here, where a general server
// spends most of its CPU (docs/BENCHMARKS.md has the measurements):
//
//   - no channel hand-offs between a stream's handler and the connection's
//     serve loop: a handler frames its answer itself, under the
//     connection's lock, into the connection's write buffer;
//   - no http.Request, header map or response writer: the handler reads
//     the decoded fields and adds answer fields as pre-encoded names and
//     values (literals without indexing, so encoding keeps no state and
//     needs no lock);
//   - one TLS record and one write for every answer a burst produced: a
//     writer, started by the burst's first frame and done once the burst
//     is written, writes what the handlers that were ready to run have
//     added, once they have had their turn;
//   - no new goroutine per request, nor its stack grown by copying: a
//     handler and a writer run on goroutines the server keeps between
//     them (runners.go).
//
// Each request still runs on a goroutine of its own while it runs, as a
// cache miss may wait on the legacy host for seconds and must not hold up
// the connection's other streams.
//
// Requests are expected to carry no body: one is read up to
// Server.MaxRequestBody bytes (so that the answer can say it is refused)
// and discarded; the rest of it is refused with RST_STREAM(NO_ERROR) once
// the answer is sent (RFC 9113 section 8.1).
package h2edge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Server serves HTTP/2 connections handed to it by ServeConn.
type Server struct {
	// Handler answers one request. It runs on a goroutine of its own
	// while it runs (one the server keeps between handlers, runners.go)
	// and must call Stream.Send before it returns: a stream it leaves
	// unanswered is reset with INTERNAL_ERROR.
	Handler func(*Stream)
	// BaseContext is the parent of every stream's context (default:
	// context.Background()).
	BaseContext context.Context
	// MaxConcurrentStreams is advertised, and enforced on the requests
	// that are open or whose handler still runs (default 250, as Go's
	// HTTP/2 server).
	MaxConcurrentStreams uint32
	// MaxHeaderListSize is advertised (SETTINGS_MAX_HEADER_LIST_SIZE) and
	// bounds what is decoded of a request's header list; a list past it
	// reaches the handler with Stream.TooLarge set and only the fields
	// that fit (default 1 MiB).
	MaxHeaderListSize uint32
	// MaxRequestBody is how many body bytes are read before the request
	// is handed to the handler anyway (default 4 KiB).
	MaxRequestBody int64
	// PrefaceTimeout bounds the client's connection preface (default
	// 10s); IdleTimeout closes a connection with no request in progress
	// (default 2m); WriteTimeout bounds each write to the connection
	// (default: none).
	PrefaceTimeout, IdleTimeout, WriteTimeout time.Duration
	// RequestTimeout bounds how long a request may stay unfinished, its
	// header list held without its END_STREAM: such a stream is reset
	// (CANCEL) and its fields dropped (default 10s).
	RequestTimeout time.Duration
	// MaxPendingHeaderBytes bounds the header bytes (HPACK's measure: name,
	// value and 32 per field) a connection holds for requests that have
	// not ended; a request past it goes to the handler at once, with
	// TooLarge set and no fields, and a connection that keeps pushing is
	// closed (ENHANCE_YOUR_CALM). Default: 4 x MaxHeaderListSize.
	MaxPendingHeaderBytes int
	// Log receives connection-level problems worth an operator's notice,
	// a connection cut for abuse at most once a second (default: none).
	Log *slog.Logger
	// ConnClosed, if set, is told why each connection ended (one of
	// CloseReasons), and StreamCut why the server cut a stream short (one
	// of StreamCutReasons). They run on the connection's goroutines, some
	// under its lock: keep them cheap (count, nothing more).
	ConnClosed, StreamCut func(reason string)
	// MemoryReturned, if set, is told each time the server had the
	// runtime return memory after connections parked (park.go).
	MemoryReturned func()

	logMu      sync.Mutex
	logNext    time.Time
	logSkipped int

	// The connections parked since the server last returned memory to
	// the system, the last park, that return, and its timer (park.go).
	parkMu    sync.Mutex
	parks     int
	lastPark  time.Time
	lastFree  time.Time
	freeTimer *time.Timer

	mu       sync.Mutex
	conns    map[*conn]struct{}
	closing  bool
	drained  chan struct{} // closed when closing and no connection is left
	shutdown bool          // Shutdown began: connections are told GOAWAY
	// watching: the base context's end cancels the streams
	// (cancelStreams); set by the first connection.
	watching bool

	runners runnerPool // the goroutines handlers and writes run on (runners.go)
}

const (
	defaultMaxStreams     = 250
	defaultMaxHeaderList  = 1 << 20
	defaultMaxRequestBody = 4 << 10
	defaultPrefaceTimeout = 10 * time.Second
	defaultIdleTimeout    = 2 * time.Minute
	defaultRequestTimeout = 10 * time.Second
)

// ErrServerClosed is returned by ServeConn once the server is closed or
// shutting down.
var ErrServerClosed = errors.New("h2edge: server closed")

// ServeConn serves one connection until it ends: the client goes away,
// the connection breaks, sits idle past IdleTimeout, or the server shuts
// down and its last stream ends. The client's preface has not been read
// yet; TLS (if any) has negotiated "h2". The connection is closed when
// ServeConn returns. Its goroutine is what the connection keeps while
// idle once the read loop parks (park.go): one started for ServeConn
// alone keeps a new goroutine's 2 KiB stack.
func (s *Server) ServeConn(nc net.Conn) error {
	c := newConn(s, nc)
	if !s.track(c) {
		nc.Close()
		return ErrServerClosed
	}
	defer s.untrack(c)
	return c.serve()
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.shutdown {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	if !s.watching {
		s.watching = true
		context.AfterFunc(s.baseContext(), s.cancelStreams)
	}
	s.conns[c] = struct{}{}
	s.runners.open()
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if len(s.conns) == 0 {
		s.runners.closeIdle()
	}
	if len(s.conns) == 0 && s.drained != nil {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
}

// Shutdown sends every connection a GOAWAY: the streams it has begun are
// answered, later ones are not taken, and each connection closes once its
// last stream ends. Shutdown returns when every connection has closed, or
// with ctx's error when ctx ends first (Close then cuts them off).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	if s.drained == nil {
		s.drained = make(chan struct{})
	}
	if len(s.conns) == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
	conns := s.connsLocked()
	drained := s.drained
	s.mu.Unlock()

	for _, c := range conns {
		c.setReason(ReasonShutdown)
		c.goAway(errCodeNo)
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes every connection at once; their handlers' contexts are
// cancelled.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	conns := s.connsLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
	return nil
}

// cancelStreams cancels, with the base context's error, the context of
// every stream whose handler has started, once the base context has
// ended. A stream dispatched after that is cancelled as it starts
// (dispatchLocked); one closed before, as it closed.
func (s *Server) cancelStreams() {
	err := s.baseContext().Err()
	s.mu.Lock()
	conns := s.connsLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		for _, st := range c.streams {
			if st.ctx.started() {
				st.ctx.cancel(err)
			}
		}
		c.mu.Unlock()
	}
}

// connsLocked lists the connections, for work done on each outside s.mu.
func (s *Server) connsLocked() []*conn {
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return defaultMaxStreams
	}
	return s.MaxConcurrentStreams
}

func (s *Server) maxHeaderList() uint32 {
	if s.MaxHeaderListSize == 0 {
		return defaultMaxHeaderList
	}
	return s.MaxHeaderListSize
}

func (s *Server) maxPendingHeaders() int {
	if s.MaxPendingHeaderBytes <= 0 {
		return 4 * int(s.maxHeaderList())
	}
	return s.MaxPendingHeaderBytes
}

func (s *Server) requestTimeout() time.Duration {
	return orDefault(s.RequestTimeout, defaultRequestTimeout)
}

// closed: Close was called.
func (s *Server) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) maxBody() int64 {
	if s.MaxRequestBody <= 0 {
		return defaultMaxRequestBody
	}
	return s.MaxRequestBody
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (s *Server) baseContext() context.Context {
	if s.BaseContext != nil {
		return s.BaseContext
	}
	return context.Background()
}
