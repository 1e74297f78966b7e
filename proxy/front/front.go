// Package front is the edge's client listener: the fronts that move a
// request from an HTTP library into an exchange (wire.Request), run the
// chain of steps through the one entry the Server gives them
// (wire.Steps), and write the answer (wire.Answer) back. HTTP/1.1 is
// served by fasthttp (front_fast.go) on connections that refuse a bare LF
// (front_conn.go), HTTP/2 by proxy/h2edge (front_h2.go), and the same
// front as an http.Handler for tests (front_std.go); under them the cap on
// open connections (conncap.go), the plain-HTTP answer of the TLS port
// (plaintls.go), sending a cached page from its file (sendfile*.go), and
// Serve with its drain (serve.go). It owns the server section of the
// configuration (Config) and the metrics of connections.
//
// A front only moves bytes: it must not decide anything about a request
// (who may ask, what is answered: that is the steps', in proxy), and it
// reads and writes an exchange only through wire. What runs beside it
// (the admin listener, the status page's readings) is handed in by the
// Server (Beside).
package front

import (
	"cmp"
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/proxy/h2edge"
	"tradergate/proxy/tlsedge"
	"tradergate/proxy/wire"
)

// Edge is the fronts of one Server, on its client listener.
type Edge struct {
	steps  wire.Steps
	cfg    Config
	tls    *tlsedge.Edge
	log    *slog.Logger
	traced bool
	cap    *connCap
	// accepts retries and counts the failed accepts of every listener
	// (acceptretry.go).
	accepts *acceptErrors
	// streamWriteTimeout bounds one write of an event stream
	// (streams.write_timeout; stream.go).
	streamWriteTimeout time.Duration

	// Set by Serve before it answers: the context requests on the
	// HTTP/1.1 front run under, the HSTS value of a TLS edge, and the
	// HTTP/1.1 front's connections (front_fast.go).
	base  atomic.Pointer[context.Context]
	hsts  atomic.Pointer[string]
	conns conns
	// lingers counts the HTTP/1.1 connections' lingering closes
	// (linger.go).
	lingers lingerStats

	// h2ClosedBy and h2CutBy are the series of h2Closed and h2Cut by
	// reason, resolved once: h2edge counts from under a connection's lock.
	h2Closed, h2Cut *prometheus.CounterVec // reason
	// h2Returned counts the times h2edge had the runtime return memory
	// after connections parked.
	h2Returned          prometheus.Counter
	h2ClosedBy, h2CutBy map[string]prometheus.Counter
	// h2 is the HTTP/2 server of a TLS edge, once serving.
	h2 atomic.Pointer[h2edge.Server]
}

// Options are what the fronts take from the Server besides the server
// section.
type Options struct {
	// Log receives the libraries' lines and the cap's warnings.
	Log *slog.Logger
	// Traced: tracing is on, and the fronts keep the trace context
	// fields.
	Traced bool
	// TLS is TLS at the edge (server.tls); its mode off: plain HTTP.
	TLS *tlsedge.Edge
	// MemoryLimit is what the default connection cap derives from when
	// the process has no Go memory limit: server.memory_limit's, its
	// default filled in (config.Config.SizedMemoryLimit).
	MemoryLimit int64
	// StreamWriteTimeout bounds one write of an event stream
	// (streams.write_timeout); zero: the server section's write timeout.
	StreamWriteTimeout time.Duration
}

// New returns the fronts of steps, serving by c (validated).
func New(c Config, steps wire.Steps, opt Options) *Edge {
	total, perAddr := connLimits(c, processMemoryLimit(), opt.MemoryLimit)
	checkNofile(total, opt.Log)
	e := &Edge{steps: steps, cfg: c, tls: opt.TLS, log: opt.Log, traced: opt.Traced,
		cap: newConnCap(total, perAddr, opt.Log), streamWriteTimeout: cmp.Or(opt.StreamWriteTimeout, c.WriteTimeout)}
	e.accepts = &acceptErrors{log: opt.Log, open: e.cap.open}
	e.h2Closed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tradergate_h2_connections_closed_total",
		Help: "HTTP/2 connections ended, by reason: client, idle, shutdown, protocol_error, read_timeout, " +
			"slow_reader, and the abuse cut with ENHANCE_YOUR_CALM: flood, rapid_reset, header_budget.",
	}, []string{"reason"})
	e.h2Cut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tradergate_h2_streams_cut_total",
		Help: "HTTP/2 requests the server cut short: request_timeout (not ended within server.read_timeout, " +
			"reset), header_budget (past the connection's budget for unfinished requests, answered 431).",
	}, []string{"reason"})
	e.h2Returned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tradergate_h2_memory_returns_total",
		Help: "Times the HTTP/2 server had the Go runtime collect and return free memory to the system, once at least " +
			"1024 idle connections had parked their read loops and none had for 2 s; at most once a minute.",
	})
	// Every reason's series exists from the start, so rate() and alerts
	// see a zero rather than nothing.
	e.h2ClosedBy, e.h2CutBy = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, r := range h2edge.CloseReasons() {
		e.h2ClosedBy[r] = e.h2Closed.WithLabelValues(r)
	}
	for _, r := range h2edge.StreamCutReasons() {
		e.h2CutBy[r] = e.h2Cut.WithLabelValues(r)
	}
	return e
}

// Collectors are the metrics of the client connections: the cap's and
// HTTP/2's.
func (e *Edge) Collectors() []prometheus.Collector {
	c := e.cap
	cs := []prometheus.Collector{
		e.h2Closed, e.h2Cut, e.h2Returned,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_h2_runners",
			Help: "Goroutines the HTTP/2 server keeps to run handlers and writes, busy or idle: at most the handlers and " +
				"writes under way at once, and of the idle at most 256, each ending 10 s after its last job.",
		}, func() float64 {
			if s := e.h2.Load(); s != nil {
				return float64(s.Runners())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_client_connections",
			Help: "Open client connections, HTTP/1.1 and HTTP/2, TLS handshakes included.",
		}, func() float64 { return float64(c.open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tradergate_client_connections_max",
			Help: "The cap on open client connections (server.max_connections, or its default from the memory limit).",
		}, func() float64 { return float64(c.total) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_client_connection_waits_total",
			Help: "Times the client listener found the connection cap reached and stopped accepting until a connection closed.",
		}, func() float64 { return float64(c.waits.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_client_connection_wait_seconds_total",
			Help: "Time the client listener spent not accepting, at the connection cap.",
		}, func() float64 { return c.waited().Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tradergate_client_connections_refused_total",
			Help: "Client connections closed as they were accepted: their address held server.max_connections_per_address.",
		}, func() float64 { return float64(c.refused.Load()) }),
	}
	cs = append(cs, e.lingers.collectors()...)
	// One series per listener and reason, each there from the start.
	for l, listener := range acceptListeners {
		for i, a := range acceptErrnos {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "tradergate_accept_errors_total",
				Help: "Accepts that failed for want of a resource, by listener (client, http: the plain-HTTP listener " +
					"of a TLS edge, admin) and reason: emfile (the process's descriptor limit), enfile (the system's), " +
					"enobufs, enomem. The listener retries after a back-off of 5 ms doubling to 1 s; the connection " +
					"waits in the kernel's backlog meanwhile.",
				ConstLabels: prometheus.Labels{"listener": listener, "reason": a.reason},
			}, func() float64 { return float64(e.accepts.count(acceptListener(l), i)) }))
		}
	}
	return cs
}

// h2ConnClosed counts an HTTP/2 connection that ended, for reason (one
// of h2edge.CloseReasons()).
func (e *Edge) h2ConnClosed(reason string) {
	if c, ok := e.h2ClosedBy[reason]; ok {
		c.Inc()
	}
}

// h2StreamCut counts a request h2edge cut short, for reason (one of
// h2edge.StreamCutReasons()).
func (e *Edge) h2StreamCut(reason string) {
	if c, ok := e.h2CutBy[reason]; ok {
		c.Inc()
	}
}

// hstsValue is the Strict-Transport-Security value of a TLS edge, or "".
func (e *Edge) hstsValue() string {
	if v := e.hsts.Load(); v != nil {
		return *v
	}
	return ""
}

// baseContext is the context of HTTP/1.1 requests: Serve's, or, before
// Serve (a test calling the handler), the background.
func (e *Edge) baseContext() context.Context {
	if b := e.base.Load(); b != nil {
		return *b
	}
	return context.Background()
}
