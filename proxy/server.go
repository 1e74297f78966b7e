// Package proxy is the HTTP edge: server, middleware chain, route table,
// validation, authentication, the upstream client and variant A errors.
package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

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
}

// Server is the edge.
type Server struct {
	cfg       *Config
	log       *slog.Logger
	accessLog bool
	now       func() time.Time
	router    router
	keys      atomic.Pointer[keySet]
	up        *upstream
	cache     *cache.Cache
	limiter   *limits.Limiter
	shield    *limits.Shield
	handler   http.Handler
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
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
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

	// The request's way through the edge, outermost first (DESIGN.md).
	s.handler = chain(http.HandlerFunc(s.servePage),
		s.observe,       // request id, access log
		s.recoverPanics, // a panic is a 500, not a dropped process
		s.authenticate,  // Bearer key -> principal
		s.rateLimit,     // per key, or per client IP without one; 429
		s.requireKey,    // 401
		s.route,         // 404 / 405 / 403 / 400; canonical request
		// servePage: cache, coalescing, shield, legacy call, rewrite
	)
	return s, nil
}

// CacheStats are the page cache's counters.
func (s *Server) CacheStats() cache.Stats { return s.cache.Stats() }

// Close releases what New started: the cache's background work, the
// limiter's store, idle upstream connections. Call it after Serve returns.
func (s *Server) Close() error {
	s.cache.Close()
	err := s.limiter.Close()
	s.up.close()
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
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if c.TLS.Mode != TLSOff {
		return s.serveTLS(ctx, ln, hs)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	s.up.close()
	return err
}
