// Package proxy is the edge: the Server and the chain of steps a request
// takes once a front has read it (Server.serve lists them, each in the
// file its name says): the request id, metrics and the access log, the
// legacy paths, auth, rate limits, routing, counting who still calls the
// legacy paths (the counts are proxy/migration's), serving from the cache
// and the order book, and the one error table. It owns
// what the steps learn on the way (exchange.go) and builds the parts
// (New) and applies a configuration (Reload).
//
// It must not touch a connection or an HTTP library: the fronts
// (proxy/front) read requests into a wire.Request and write the
// wire.Answer the steps build (proxy/wire), and call the steps only
// through Server.Exchange. The admin listener is proxy/admin's, the
// configuration file proxy/config's; the contract as data is in
// proxy/route, the legacy host's client in proxy/upstream, TLS in
// proxy/tlsedge. docs/ARCHITECTURE.md walks the whole way of a request.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"tradergate/cache"
	"tradergate/docs"
	"tradergate/limits"
	"tradergate/proxy/admin"
	"tradergate/proxy/config"
	"tradergate/proxy/fleet"
	"tradergate/proxy/front"
	"tradergate/proxy/migration"
	"tradergate/proxy/native"
	"tradergate/proxy/route"
	"tradergate/proxy/status"
	"tradergate/proxy/stream"
	"tradergate/proxy/tlsedge"
	"tradergate/proxy/tracing"
	"tradergate/proxy/upstream"
	"tradergate/proxy/wire"
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
	// collectors; nil: a registry of the Server's own.
	Registry *prometheus.Registry
	// Getenv reads the environment variables the configuration names (the
	// Redis password); nil: os.Getenv.
	Getenv func(string) string
	// ConfigHash names the configuration file on the status page (a short
	// digest of its bytes); "" shows none.
	ConfigHash string
	// SpanProcessor, when set, receives every span whatever tracing says
	// (tests record them); nil: tracing as configured.
	SpanProcessor sdktrace.SpanProcessor
}

// Server is the edge.
type Server struct {
	cfg       *config.Config                // as started: the settings fixed until restart
	live      atomic.Pointer[config.Config] // as last loaded, for Reload to compare
	log       *slog.Logger
	accessLog bool
	now       func() time.Time
	wallClock bool // now is time.Now: one reading per request serves both
	routes    *route.Table
	keys      atomic.Pointer[keySet]
	upstream  *upstream.Client
	native    *native.Backend // the native service; every route legacy while native is off
	cache     *cache.Cache
	limiter   *limits.Limiter
	fleet     *fleet.Conn      // the replicas' shared Redis; nil: one node, nothing shared
	streams   *stream.Manager  // the server-sent event streams (streams.go)
	trace     *tracing.Tracing // nil: tracing off
	tls       *tlsedge.Edge
	metrics   *metrics
	hits      hitMemo // pages.go: the cache fields of recent hits
	registry  *prometheus.Registry
	// ready is true while Serve answers and is not draining (/readyz).
	ready atomic.Bool

	// front is the client listener: the fronts that call serve
	// (proxy/front).
	front *front.Edge

	// admin is the admin listener and what it shows (proxy/admin);
	// shadow posts this replica's comparisons for the fleet's GET
	// /shadow, nil without Redis.
	admin         *admin.Admin
	shadow        *admin.ShadowFleet
	configHash    string
	redisPassword string

	// The legacy paths' policy (legacy.go) and who still calls them
	// (proxy/migration); the OpenAPI document served at /v1/openapi.json.
	legacy    atomic.Pointer[legacyPolicy]
	migration *migration.Counts
	openAPI   []byte
	// authGuard locks out addresses that guess keys (authguard.go).
	authGuard *authGuard

	closeOnce sync.Once
}

// New builds the edge from a validated configuration.
func New(cfg *config.Config, opt Options) (*Server, error) {
	s := &Server{
		cfg:        cfg,
		log:        opt.Logger,
		accessLog:  opt.AccessLog,
		now:        opt.Now,
		routes:     route.NewTable(),
		configHash: opt.ConfigHash,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now, s.wallClock = time.Now, true
	}
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	s.live.Store(cfg)
	s.keys.Store(newKeySet(cfg.Keys, cfg.Plans, s.routes.Routes()))
	s.tls = tlsedge.New(cfg.Server.TLS, tlsedge.Options{Logger: s.log, Now: s.now})
	s.registry = opt.Registry
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if err := s.build(cfg, opt); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// build makes the parts New starts, in order; Close releases whichever of
// them exist, so a part that fails leaves nothing running.
func (s *Server) build(cfg *config.Config, opt Options) error {
	lopt := limits.Options{Now: s.now, Logger: s.log}
	if cfg.Redis.Enabled() {
		conn, err := fleet.Open(cfg.Redis, opt.Getenv, fleet.Options{Logger: s.log})
		if err != nil {
			return err
		}
		s.fleet = conn
		for _, c := range conn.Collectors() {
			if err := s.registry.Register(c); err != nil {
				return err
			}
		}
		lopt.Redis, lopt.RedisPrefix, lopt.RedisTimeout = conn.Client(), conn.Key("rl"), conn.Timeout()
		if cfg.Redis.PasswordEnv != "" {
			s.redisPassword = opt.Getenv(cfg.Redis.PasswordEnv)
		}
	}
	var err error
	if s.trace, err = tracing.New(cfg.Tracing, tracing.Options{SpanProcessor: opt.SpanProcessor}); err != nil {
		return err
	}
	// A miss on the HTTP/1.1 front runs its flight on the request's own
	// goroutine (cache/runners.go says why).
	copt := cache.Options{Now: s.now, Logger: s.log, Inline: wire.IsShared}
	uopt := upstream.Options{Logger: s.log, Observe: s.observeUpstream}
	if s.trace != nil {
		copt.Tracer = s.trace.Tracer
		uopt.Tracer = s.trace.Tracer
		uopt.Propagator = s.trace.Propagator // traceparent goes to the legacy host with every call
	}
	if s.fleet != nil {
		// The shared tier: one fetch per page across the fleet, waiters
		// bounded by the upstream timeout, failures told to them.
		copt.L2, copt.L2Prefix, copt.L2Timeout = s.fleet.Client(), s.fleet.Key("page")+":", s.fleet.Timeout()
		copt.LeaseTimeout = cfg.Upstream.Timeout
		if cfg.Native.BaseURL != "" {
			// A miss native fails is fetched from the legacy host after it.
			copt.LeaseTimeout += cfg.Native.Timeout
		}
	}
	if s.cache, err = cache.New(cfg.Cache, copt); err != nil {
		return err
	}
	if s.limiter, err = limits.New(cfg.Limits, cfg.Plans, lopt); err != nil {
		return err
	}
	s.front = front.New(cfg.Server, s, front.Options{Log: s.log, Traced: s.trace != nil, TLS: s.tls, MemoryLimit: cfg.SizedMemoryLimit(),
		StreamWriteTimeout: cfg.Streams.WriteTimeout})
	if s.metrics, err = newMetrics(s.registry, s); err != nil {
		return err
	}
	if err := register(s.registry, s.front.Collectors()); err != nil { // the client connections'
		return err
	}
	if s.authGuard, err = newAuthGuard(s.registry, cfg.Limits.AuthFailures); err != nil {
		return err
	}
	s.legacy.Store(newLegacyPolicy(cfg.Legacy))
	if s.migration, err = migration.New(s.registry, cfg, s.routes.Routes(), s.fleet, s.log); err != nil {
		return err
	}
	s.openAPI = docs.OpenAPI()
	replica := admin.NewReplica()
	nopt := native.Options{Routes: s.routes.Routes(), OpenAPI: s.openAPI, Registry: s.registry, Logger: s.log, Now: s.now}
	if s.fleet != nil {
		s.shadow = admin.NewShadowFleet(s.fleet, replica, s.log)
		nopt.Fleet = s.shadow // with Redis, GET /shadow is the fleet's
	}
	// Built even while native is off, so that a reload can turn it on and
	// its series are there for the dashboard from the start.
	if s.native, err = native.New(cfg.Native, nopt); err != nil {
		return err
	}
	uopt.BreakerChanged = s.metrics.breakerChanged
	s.upstream = upstream.New(cfg.Upstream, s.routes.Routes(), uopt)
	if s.streams, err = s.newStreams(cfg); err != nil { // streams.go
		return err
	}
	s.admin = admin.New(cfg.Admin, admin.Parts{
		Registry: s.registry, Log: s.log, Ready: s.ready.Load, Migration: s.serveMigration, Native: s.native,
		Secrets: func() []string {
			c := s.live.Load()
			return []string{c.Upstream.Key, c.Admin.Token(), s.redisPassword, c.Native.Key}
		},
		ConfigHash: s.configHash,
		Counters: status.Counters{
			Requests: s.metrics.requests, Durations: s.metrics.duration, Upstream: s.metrics.upstream,
			Refused: s.metrics.refused, KeyRequests: s.migration.Requests(),
		},
		Routes: s.routes.Routes(), Upstream: s.upstream, Cache: s.cache, Limiter: s.limiter, TLS: s.tls,
		Fleet: s.fleet, Replica: replica, Shadow: s.shadow,
		CacheMaxBytes: cfg.Cache.MaxBytes, MaxConcurrent: cfg.Upstream.MaxConcurrent, RedisPrefix: cfg.Redis.Prefix,
	}, s.now)
	return register(s.registry, s.admin.Collectors())
}

// register registers every collector of cs.
func register(reg prometheus.Registerer, cs []prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// serve is the request's way through the edge, outermost first
// (docs/ARCHITECTURE.md "The way of a request"). Each step is a method in
// the file named beside it, working on the exchange a front filled in (a
// step that needs only part of it is handed that part, and returns what
// it learns); a step that answers ends the way, and the front writes the
// answer.
func (s *Server) serve(x *exchange) {
	s.begin(x)               // observe.go: request id, clock
	defer s.finish(x)        // observe.go: metrics, access log; sees every answer
	defer s.recoverPanics(x) // observe.go: a panic is a 500, not a dropped process
	s.legacyAPI(x)           // legacy.go: /open-api/v1 paths answer in variant B
	if x.Refused != 0 {
		s.refuse(x) // refuse.go: what the front could not read; charged to the address
		return
	}
	openAPI := isOpenAPI(&x.Request, x.legacy) // openapi.go: the public document, charged to the address
	if !openAPI {
		x.principal = s.authenticate(&x.Request) // auth.go: Bearer key -> principal
		if !s.guardKeys(x) {                     // authguard.go: wrong keys counted per address; 429 once spent
			return
		}
	}
	if !s.rateLimit(x) { // ratelimit.go: per key, or per client IP; 429
		return
	}
	if !checkLength(x) { // routing.go: 414, before a 401 or a 404
		return
	}
	if openAPI {
		s.serveOpenAPI(x) // openapi.go: the contract document, without a key
		return
	}
	if !s.requireKey(x) { // auth.go: 401
		return
	}
	if s.serveStream(x) { // streams.go: the event streams, opened here
		return
	}
	if !s.route(x) { // routing.go: 404, 405, 414, 400, 403; the canonical request
		return
	}
	if !s.migrate(x) { // legacy.go: counted by API; 410 once a legacy path is retired
		return
	}
	if x.route.EdgeBuilt {
		s.serveBook(x) // book.go: the order book at T, from cached pages
		return
	}
	s.servePage(x) // pages.go: cache, coalescing, upstream, rewrite
}

// Serve answers on ln until ctx ends, then drains in-flight requests for up
// to server.shutdown_timeout (proxy/front, serve.go); the admin listener
// and the status page's readings run beside it. Listen first, then Serve,
// so that a busy port fails at start.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.front.Serve(ctx, ln, front.Beside{Start: s.startBeside, Ready: s.ready.Store, Streams: s.streamShutdown})
}

// startBeside starts what runs beside the fronts until ctx ends: the
// status page's readings and publisher, and the admin listener, which
// opens first and closes last, so /readyz can say "not ready" all
// through the drain. stop undoes it, once the fronts have stopped.
func (s *Server) startBeside(ctx context.Context) (stop func(), err error) {
	pctx, stopPublish := context.WithCancel(ctx)
	waitPublish := s.admin.Run(pctx)
	stop = func() {
		stopPublish()
		waitPublish()
		s.upstream.CloseIdle()
	}
	srv, ln, err := s.admin.Listen()
	if err != nil {
		return stop, fmt.Errorf("admin.listen: %w", err)
	}
	if srv == nil {
		return stop, nil
	}
	done := make(chan error, 1)
	go func() { done <- s.front.ServeAdmin(srv, ln) }()
	stopRest := stop
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		stopRest()
	}, nil
}

// Handler is the edge as an http.Handler.
func (s *Server) Handler() http.Handler { return s.front.Handler() }

// AdminAddr is the admin listener's address once Serve has opened it, or "".
func (s *Server) AdminAddr() string { return s.admin.Addr() }

// ReloadFailed records a reload that did not get as far as Reload (the file
// did not load or validate): the edge serves on with what it had.
func (s *Server) ReloadFailed(err error) { s.admin.Reloaded(admin.ReloadFailed, err) }

// Close releases what New started: the cache's background work, the
// limiter's store, the upstream client, the native service's client and
// its shadow workers, the shared Redis (after everything
// that uses it). Call it after Serve returns.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.streams != nil {
			s.streams.Close() // first: its polls read the cache
		}
		if s.cache != nil {
			s.cache.Close()
		}
		if s.limiter != nil {
			err = s.limiter.Close()
		}
		if s.upstream != nil {
			s.upstream.Close()
		}
		if s.native != nil {
			s.native.Close() // after the cache: no flight calls it any more
		}
		if s.migration != nil {
			s.migration.Close() // its last counts go to Redis first
		}
		if s.fleet != nil {
			err = errors.Join(err, s.fleet.Close())
		}
		err = errors.Join(err, s.trace.Close())
	})
	return err
}

// ReloadCertificates re-reads server.tls.cert_file and key_file in mode
// files and serves the new pair to every handshake from now on; open
// connections keep theirs. A pair that does not load, or whose certificate
// has expired, is an error and the previous pair stays. In the other modes
// there is nothing to re-read and it returns nil. main calls it on SIGHUP.
func (s *Server) ReloadCertificates() error { return s.tls.ReloadCertificates() }
