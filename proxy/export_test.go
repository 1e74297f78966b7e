package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"tradergate/cache"
)

// FastHandler is the HTTP/1.1 front's handler, for benchmarks and tests
// that drive it with a fasthttp.RequestCtx of their own.
func (s *Server) FastHandler() fasthttp.RequestHandler { return s.front.FastHandler() }

// RetryStats are the retries made and those the budget refused.
func (s *Server) RetryStats() (retried, refused uint64) { return s.upstream.RetryStats() }

// BreakerState is the state of a route's breaker ("closed", "open",
// "half-open"), or "" for an unknown route.
func (s *Server) BreakerState(route string) string { return s.upstream.BreakerState(route) }

// Registry is where the edge's metrics are registered.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// CacheStats are the page cache's counters.
func (s *Server) CacheStats() cache.Stats { return s.cache.Stats() }
