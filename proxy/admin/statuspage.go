package admin

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
	"tradergate/proxy/route"
	"tradergate/proxy/status"
)

// The status page on the admin listener (GET /, /status, /status.json):
// proxy/status renders it; this file feeds it. Its last-minute figures
// come from the metrics' own counters (proxy/metrics.go, and the
// migration's per-key count: Parts.Counters; the streams' series, from
// the registry), read every few seconds by
// a status.Sampler: no request is counted a second time for the page. A snapshot of the edge is taken
// when the page is asked for. With Redis, each replica publishes its
// summary for the others' pages.

// statusState is what the admin listener keeps for its page.
type statusState struct {
	sampler *status.Sampler
	started time.Time
	replica string
	board   *status.Board // with Redis only
	// lastErr is the last legacy call's failure class, for the page.
	mu      sync.Mutex
	lastErr string
	lastAt  time.Time
}

// servers numbers the Servers of the process: a second one (tests, a
// program running several edges) posts under a replica id of its own.
var servers atomic.Int64

// NewReplica is the id under which a new Server of this process posts
// for the fleet: its host and process, numbered from the second Server
// on.
func NewReplica() string {
	host, _ := os.Hostname()
	replica := host + "-" + strconv.Itoa(os.Getpid())
	if n := servers.Add(1); n > 1 {
		replica += "-" + strconv.FormatInt(n, 10)
	}
	return replica
}

// initStatus starts the page's readings of the metrics' counters.
func (a *Admin) initStatus() {
	p := a.p
	counters := p.Counters
	if counters.Streams == nil && p.Registry != nil {
		// The streams' series are registered by proxy/stream, which keeps
		// its collectors: the panel reads them from the registry.
		counters.Streams = p.Registry
	}
	a.status = statusState{
		sampler: status.NewSampler(counters, status.SamplerOptions{
			Routes: route.Names(),
			Cache:  status.CacheLabels{Hit: cache.Hit.String(), Miss: cache.Miss.String(), Stale: cache.Stale.String()},
		}),
		started: time.Now(),
		replica: p.Replica,
	}
	if p.Fleet != nil {
		a.status.board = status.NewBoard(p.Fleet.Client(), status.BoardOptions{Prefix: p.RedisPrefix})
	}
}

// snapshot is the edge as the status page shows it, taken now.
func (a *Admin) snapshot() status.Snapshot {
	p := a.p
	version, revision := buildInfo()
	ok, _ := a.reloads.state()
	a.reloads.mu.Lock()
	cfgState := status.Config{Hash: p.ConfigHash, LastReload: a.reloads.lastAt, ReloadOK: ok, ReloadError: a.reloads.lastErr}
	a.reloads.mu.Unlock()
	snap := status.Snapshot{
		Replica: a.status.replica,
		Taken:   time.Now(),
		Ready:   p.Ready(),
		Build:   status.Build{Version: version, Revision: revision, GoVersion: runtime.Version()},
		Started: a.status.started,
		Config:  cfgState,
	}
	a.status.sampler.Fill(&snap)
	for _, r := range p.Routes {
		sr := snap.Route(r.Name)
		switch {
		case sr == nil:
		case r.EdgeBuilt:
			sr.Breaker = "" // never sent upstream: no breaker to show
		default:
			sr.Breaker = p.Upstream.BreakerState(r.Name)
		}
	}
	cs := p.Cache.Stats()
	snap.Cache.Entries, snap.Cache.Bytes, snap.Cache.MaxBytes = int64(cs.Entries), int64(cs.Bytes), p.CacheMaxBytes
	snap.Cache.CoalescedTotal = int64(cs.Coalesced)
	if p.Fleet != nil {
		snap.Cache.L2 = status.L2{Present: true, Breaker: p.Fleet.State()}
		if n := cs.L2Hits + cs.L2Stale + cs.L2Misses; n > 0 {
			snap.Cache.L2.HitRatioTotal = float64(cs.L2Hits+cs.L2Stale) / float64(n)
		}
	}
	retried, refused := p.Upstream.RetryStats()
	snap.Upstream.InFlight, snap.Upstream.MaxConcurrent = int64(p.Upstream.InFlight()), int64(p.MaxConcurrent)
	snap.Upstream.RetriesTotal, snap.Upstream.BudgetRefusedTotal = int64(retried), int64(refused)
	a.status.mu.Lock()
	snap.Upstream.LastError, snap.Upstream.LastErrorAt = a.status.lastErr, a.status.lastAt
	a.status.mu.Unlock()
	snap.Limits.StoreErrorsTotal = int64(p.Limiter.StoreErrors())
	snap.Limits.Store = status.StoreOK
	if p.Limiter.Failing() {
		snap.Limits.Store = status.StoreDown
	}
	for _, c := range p.TLS.Certificates() {
		snap.TLS = append(snap.TLS, status.Cert{Names: c.Names, NotAfter: c.NotAfter})
	}
	snap.Native = nativeView(p.Native.Report())
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
func (a *Admin) statusHandler() http.Handler {
	return status.Handler(a.snapshot, status.Options{Board: a.status.board, Secrets: a.p.Secrets})
}

// Run reads the counters for the page every few seconds and, with
// Redis, posts this replica's summary to the fleet's board and its native
// report for the fleet's GET /shadow, until ctx ends.
func (a *Admin) Run(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() { a.status.sampler.Run(ctx) })
	if a.status.board == nil {
		return wg.Wait
	}
	wg.Go(func() { a.status.board.Run(ctx, 5*time.Second, a.snapshot) })
	if a.p.Shadow != nil {
		wg.Go(func() { a.p.Shadow.run(ctx, a.p.Native.Report) })
	}
	return wg.Wait
}

// UpstreamFailed records the last legacy call that failed, for the page:
// its failure class, never its body.
func (a *Admin) UpstreamFailed(failure string) {
	a.status.mu.Lock()
	defer a.status.mu.Unlock()
	a.status.lastErr, a.status.lastAt = failure, time.Now()
}
