package proxy

import (
	"context"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"tradergate/cache"
	"tradergate/proxy/native"
	"tradergate/proxy/status"
)

// The status page on the admin listener (GET /, /status, /status.json):
// proxy/status renders it; this file feeds it. Its last-minute figures
// come from the metrics' own counters (metrics.go, and the migration's
// per-key count), read every few seconds by a status.Sampler: no request
// is counted a second time for the page. A snapshot of the edge is taken
// when the page is asked for. With Redis, each replica publishes its
// summary for the others' pages.

// statusState is what the Server keeps for its page.
type statusState struct {
	sampler *status.Sampler
	started time.Time
	replica string
	board   *status.Board // with Redis only
	shadow  *shadowFleet  // with Redis only: GET /shadow's posts
	// lastErr is the last legacy call's failure class, for the page.
	mu      sync.Mutex
	lastErr string
	lastAt  time.Time
}

// servers numbers the Servers of the process: a second one (tests, a
// program running several edges) posts under a replica id of its own.
var servers atomic.Int64

func (s *Server) initStatus(routes []string) {
	host, _ := os.Hostname()
	s.status = statusState{
		sampler: status.NewSampler(status.Counters{
			Requests: s.metrics.requests, Durations: s.metrics.duration, Upstream: s.metrics.upstream,
			Refused: s.metrics.refused, KeyRequests: s.migration.requests,
		}, status.SamplerOptions{
			Routes: routes,
			Cache:  status.CacheLabels{Hit: cache.Hit.String(), Miss: cache.Miss.String(), Stale: cache.Stale.String()},
		}),
		started: time.Now(),
		replica: host + "-" + strconv.Itoa(os.Getpid()),
	}
	if n := servers.Add(1); n > 1 {
		s.status.replica += "-" + strconv.FormatInt(n, 10)
	}
	if s.fleet != nil {
		s.status.board = status.NewBoard(s.fleet.Client(), status.BoardOptions{Prefix: s.cfg.Redis.Prefix})
		s.status.shadow = newShadowFleet(s.fleet, s.status.replica, s.log)
	}
}

// snapshot is the edge as the status page shows it, taken now.
func (s *Server) snapshot() status.Snapshot {
	version, revision := buildInfo()
	ok, _ := s.reloads.state()
	s.reloads.mu.Lock()
	cfgState := status.Config{Hash: s.configHash, LastReload: s.reloads.lastAt, ReloadOK: ok, ReloadError: s.reloads.lastErr}
	s.reloads.mu.Unlock()
	snap := status.Snapshot{
		Replica: s.status.replica,
		Taken:   time.Now(),
		Ready:   s.ready.Load(),
		Build:   status.Build{Version: version, Revision: revision, GoVersion: runtime.Version()},
		Started: s.status.started,
		Config:  cfgState,
	}
	s.status.sampler.Fill(&snap)
	for _, r := range s.routes.Routes() {
		sr := snap.Route(r.Name)
		switch {
		case sr == nil:
		case r.EdgeBuilt:
			sr.Breaker = "" // never sent upstream: no breaker to show
		default:
			sr.Breaker = s.upstream.BreakerState(r.Name)
		}
	}
	cs := s.cache.Stats()
	snap.Cache.Entries, snap.Cache.Bytes, snap.Cache.MaxBytes = int64(cs.Entries), int64(cs.Bytes), s.cfg.Cache.MaxBytes
	snap.Cache.CoalescedTotal = int64(cs.Coalesced)
	if s.fleet != nil {
		snap.Cache.L2 = status.L2{Present: true, Breaker: s.fleet.State()}
		if n := cs.L2Hits + cs.L2Stale + cs.L2Misses; n > 0 {
			snap.Cache.L2.HitRatioTotal = float64(cs.L2Hits+cs.L2Stale) / float64(n)
		}
	}
	retried, refused := s.upstream.RetryStats()
	snap.Upstream.InFlight, snap.Upstream.MaxConcurrent = int64(s.upstream.InFlight()), int64(s.cfg.Upstream.MaxConcurrent)
	snap.Upstream.RetriesTotal, snap.Upstream.BudgetRefusedTotal = int64(retried), int64(refused)
	s.status.mu.Lock()
	snap.Upstream.LastError, snap.Upstream.LastErrorAt = s.status.lastErr, s.status.lastAt
	s.status.mu.Unlock()
	snap.Limits.StoreErrorsTotal = int64(s.limiter.StoreErrors())
	snap.Limits.Store = status.StoreOK
	if s.limiter.Failing() {
		snap.Limits.Store = status.StoreDown
	}
	for _, c := range s.tls.Certificates() {
		snap.TLS = append(snap.TLS, status.Cert{Names: c.Names, NotAfter: c.NotAfter})
	}
	snap.Native = nativeView(s.native.Report())
	return snap
}

// nativeView is the native panel of the page: the routes that left the
// legacy host (or rolled back), from native's report; nil while none has.
func nativeView(rep native.Report) *status.Native {
	var v status.Native
	for _, r := range rep.Routes {
		if r.Mode == native.ModeLegacy && !r.Rollback.RolledBack {
			continue
		}
		nr := status.NativeRoute{
			Name: r.Route, Mode: string(r.Mode), EffectiveMode: string(r.EffectiveMode), Percent: r.Percent,
			RolledBack: r.Rollback.RolledBack, Reason: r.Rollback.Reason,
			Compared: r.Compared, Different: r.Different, Skipped: r.Skipped, NativeErrors: r.NativeErrors, Dropped: r.Dropped,
		}
		if r.Rollback.At != nil {
			nr.RolledBackAt = *r.Rollback.At
		}
		v.Routes = append(v.Routes, nr)
	}
	if !rep.Enabled && len(v.Routes) == 0 {
		return nil
	}
	return &v
}

// statusHandler is the page's handler; secrets are scrubbed from anything
// it shows, in case one found its way into an error text.
func (s *Server) statusHandler() http.Handler {
	return status.Handler(s.snapshot, status.Options{
		Board: s.status.board,
		Secrets: func() []string {
			c := s.live.Load()
			return []string{c.Upstream.Key, c.Admin.token, s.redisPassword, c.Native.Key}
		},
	})
}

// runStatus reads the counters for the page every few seconds and, with
// Redis, posts this replica's summary to the fleet's board and its native
// report for the fleet's GET /shadow, until ctx ends.
func (s *Server) runStatus(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() { s.status.sampler.Run(ctx) })
	if s.status.board == nil {
		return wg.Wait
	}
	wg.Go(func() { s.status.board.Run(ctx, 5*time.Second, s.snapshot) })
	wg.Go(func() { s.status.shadow.run(ctx, s.native.Report) })
	return wg.Wait
}
