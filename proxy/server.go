// Package proxy is the HTTP edge: server, middleware chain, route table,
// validation, authentication, the upstream client and variant A errors.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"tradergate/cache"
	"tradergate/limits"
)

// Options are the parts a Server takes from its caller rather than from the
// configuration file.
type Options struct {
	// Logger receives access and error lines; nil discards them.
	Logger *slog.Logger
	// AccessLog writes one line per request.
	AccessLog bool
	// Now is the clock; nil means time.Now. Tests move it.
	Now func() time.Time
	// Registry receives the edge's metrics and the Go and process
	// collectors; nil: a registry of the Server's own (Server.Registry).
	Registry *prometheus.Registry
}

// Server is the edge.
type Server struct {
	cfg       *Config                // as started: the settings fixed until restart
	live      atomic.Pointer[Config] // as last loaded, for Reload to compare
	log       *slog.Logger
	accessLog bool
	now       func() time.Time
	wallClock bool // now is time.Now: one reading per request serves both
	ids       *idSource
	router    router
	keys      atomic.Pointer[keySet]
	up        *upstream
	cache     *cache.Cache
	limiter   *limits.Limiter
	shield    *limits.Shield
	breakers  atomic.Pointer[breakers] // swapped on reload
	budget    *retryBudget
	metrics   *metrics
	registry  *prometheus.Registry
	handler   http.Handler
	// ready is true while Serve answers and is not draining (/readyz).
	ready     atomic.Bool
	adminAddr atomic.Value // string, once the admin listener is open

	// Background work owned by the Server, ended by Close.
	transitions chan transition
	stop        chan struct{}
	bg          sync.WaitGroup
	closeOnce   sync.Once

	// TLS at the edge (issue 6); tls*.go own these.
	tlsFiles certFiles // mode files: the certificate new handshakes get
}

// New builds the edge from a validated configuration.
func New(cfg *Config, opt Options) (*Server, error) {
	s := &Server{
		cfg:       cfg,
		log:       opt.Logger,
		accessLog: opt.AccessLog,
		now:       opt.Now,
		router:    router{routes: NewRoutes()},
		up:        newUpstream(cfg.Upstream),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now, s.wallClock = time.Now, true
	}
	s.ids = newIDSource()
	s.live.Store(cfg)
	s.keys.Store(newKeySet(cfg.Keys, cfg.Plans, s.router.routes))
	var err error
	if s.cache, err = cache.New(cfg.Cache, cache.Options{Now: s.now, StaleOK: staleOK, Logger: s.log}); err != nil {
		return nil, err
	}
	if s.limiter, err = limits.New(cfg.Limits, cfg.Plans, limits.Options{Now: s.now, Logger: s.log}); err != nil {
		s.cache.Close()
		return nil, err
	}
	s.shield = limits.NewShield(cfg.Upstream.shield())
	s.budget = newRetryBudget(cfg.Upstream.Retry)
	s.registry = opt.Registry
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if s.metrics, err = newMetrics(s.registry, s); err != nil {
		s.cache.Close()
		_ = s.limiter.Close()
		return nil, err
	}
	bs := newBreakers(cfg.Upstream.Breaker, s.router.routes, s.breakerChanged)
	s.breakers.Store(&bs)
	s.transitions, s.stop = make(chan transition, 64), make(chan struct{})
	s.bg.Add(1)
	go s.logTransitions()

	// The request's way through the edge, outermost first (DESIGN.md).
	s.handler = chain(http.HandlerFunc(s.servePage),
		s.observe,       // request id, metrics, access log
		s.recoverPanics, // a panic is a 500, not a dropped process
		s.authenticate,  // Bearer key -> principal
		s.rateLimit,     // per key, or per client IP without one; 429
		s.requireKey,    // 401
		s.route,         // 404 / 405 / 403 / 400; canonical request
		// servePage: cache, coalescing, shield, legacy call, rewrite
	)
	return s, nil
}

// transition is a breaker's change of state, on its way to the log.
type transition struct {
	route    string
	from, to gobreaker.State
}

// breakerChanged is called by gobreaker under its lock, so it only hands
// the transition to logTransitions (STYLE.md: callbacks under a lock stay
// cheap); if that falls behind, the line is dropped rather than blocking a
// request.
func (s *Server) breakerChanged(route string, from, to gobreaker.State) {
	s.metrics.breakerChanged(route, to)
	select {
	case s.transitions <- transition{route, from, to}:
	default:
	}
}

// logTransitions writes the breaker transition lines until Close.
func (s *Server) logTransitions() {
	defer s.bg.Done()
	for {
		select {
		case t := <-s.transitions:
			s.log.Warn("circuit breaker", "route", t.route, "from", t.from.String(), "to", t.to.String())
		case <-s.stop:
			return
		}
	}
}

// RetryStats are the retries made and those the budget refused.
func (s *Server) RetryStats() (retried, refused uint64) { return s.budget.counts() }

// BreakerState is the state of a route's breaker ("closed", "open",
// "half-open"), or "" for an unknown route.
func (s *Server) BreakerState(route string) string {
	for _, r := range s.router.routes {
		if r.Name == route {
			return (*s.breakers.Load())[r.index].cb.State().String()
		}
	}
	return ""
}

// Registry is where the edge's metrics are registered.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// CacheStats are the page cache's counters.
func (s *Server) CacheStats() cache.Stats { return s.cache.Stats() }

// Close releases what New started: the cache's background work, the
// limiter's store, idle upstream connections. Call it after Serve returns.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cache.Close()
		err = s.limiter.Close()
		s.up.close()
		close(s.stop)
		s.bg.Wait()
	})
	return err
}

// Handler is the edge as an http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers on ln until ctx ends, then drains in-flight requests for up
// to server.shutdown_timeout. Listen first, then Serve, so that a busy port
// fails at start (STYLE.md "Shape").
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	c := s.cfg.Server
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// Handlers run under base: not cancelled by the signal (in-flight
	// requests drain), but told errShuttingDown when the drain time is
	// nearly over, so that they answer a clear 503 instead of being cut off.
	base, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)
	hs.BaseContext = func(net.Listener) context.Context { return base }

	// The admin listener opens first and closes last, so /readyz can say
	// "not ready" all through the drain (issue 7).
	admin, adminLn, err := s.adminServer()
	if err != nil {
		ln.Close()
		return fmt.Errorf("admin.listen: %w", err)
	}
	adminDone := make(chan error, 1)
	if admin != nil {
		go func() { adminDone <- admin.Serve(adminLn) }()
		defer func() {
			actx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = admin.Shutdown(actx)
			<-adminDone
		}()
	}

	// The edge's servers: the client listener and, with TLS on, the
	// plain-HTTP listener for ACME challenges and redirects (issue 6). They
	// start together and drain together within one shutdown_timeout.
	servers := []serving{{hs, func() error { return hs.Serve(ln) }}}
	ready := func(context.Context) error { return nil }
	if c.TLS.Mode != TLSOff {
		edge, err := s.startTLS(ln, hs)
		if err != nil {
			ln.Close()
			s.up.close()
			return err
		}
		defer edge.close() // after the servers stopped: certmagic's cache
		servers, ready = edge.servers, edge.ready
	}
	errc := make(chan error, len(servers))
	for _, sv := range servers {
		go func() { errc <- sv.serve() }()
	}
	running := len(servers)
	// Mode acme obtains its certificates now, while the listeners answer
	// the CA's challenges; a failure stops everything.
	err = ready(ctx)
	if err == nil {
		s.ready.Store(true)
		select {
		case err = <-errc: // one stopped by itself: stop the others too
			running--
		case <-ctx.Done():
		}
	} else if ctx.Err() != nil {
		err = nil // told to stop while starting
	}
	// Draining: not ready any more, but still answering for drain_delay, so
	// load balancers notice before connections are refused.
	s.ready.Store(false)
	if err == nil && c.DrainDelay > 0 {
		t := time.NewTimer(c.DrainDelay)
		select {
		case <-t.C:
		case err = <-errc:
			running--
			t.Stop()
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	grace := min(c.ShutdownTimeout/5, time.Second)
	last := time.AfterFunc(c.ShutdownTimeout-grace, func() { hardStop(errShuttingDown) })
	defer last.Stop()
	for _, sv := range servers {
		if serr := sv.hs.Shutdown(sctx); serr != nil {
			// Past the deadline: what is left is cut off.
			sv.hs.Close()
			if err == nil {
				err = serr
			}
		}
	}
	for ; running > 0; running-- {
		if serr := <-errc; err == nil && !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
	}
	s.up.close()
	return err
}
