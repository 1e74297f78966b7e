package proxy

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"tradergate/proxy/admin"
	"tradergate/proxy/config"
	"tradergate/proxy/fleet"
	"tradergate/proxy/route"
)

// The migration report: who still calls the legacy paths, and what. Each
// valid request of a known key is counted by API (legacy or v1), legacy
// calls also by route with the time of the last one, whatever the answer
// (a 410 is a client still to move). The counts are the replica's own, or,
// with Redis, the fleet's: each replica adds what it counted to one hash
// per key (<prefix>:migration:<key id>) about once a second and before it
// reports, so requests never wait on Redis and a Redis that fails costs
// nothing but a late report.

// migrationFlushEvery is how often a replica adds its counts to Redis.
const migrationFlushEvery = time.Second

// The api label values of tradergate_migration_requests_total.
const (
	apiLegacy = "legacy"
	apiV1     = "v1"
)

// migration holds the legacy section as last loaded and the counts.
type migration struct {
	policy   atomic.Pointer[legacyPolicy]
	routes   []*route.Route
	requests *prometheus.CounterVec // key_id, api
	fleet    *fleet.Conn            // nil: the counts are this replica's
	log      *slog.Logger

	mu   sync.RWMutex
	keys map[string]*keyUse
	// flushMu makes flushes take turns; it guards keyUse.sent.
	flushMu sync.Mutex

	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once
}

// keyUse is one key's counts since start. Times are Unix milliseconds, 0
// for none.
type keyUse struct {
	v1, legacy          atomic.Int64
	firstLegacy, lastLe atomic.Int64
	routes              []routeUse // by route index
	v1Series, legSeries prometheus.Counter

	// What has been added to Redis so far; only flush touches it, under
	// migration.flushMu.
	sent struct {
		v1, legacy, first, last int64
		routes                  []routeSent
	}
}

type routeUse struct{ n, last atomic.Int64 }

type routeSent struct{ n, last int64 }

func newMigration(reg prometheus.Registerer, cfg *config.Config, routes []*route.Route, conn *fleet.Conn, log *slog.Logger) (*migration, error) {
	m := &migration{
		routes: routes,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_migration_requests_total",
			Help: `Valid requests of each configured key, by API: "legacy" (/open-api/v1) or "v1". This replica's own.`,
		}, []string{"key_id", "api"}),
		fleet: conn,
		log:   log,
		keys:  map[string]*keyUse{},
		stop:  make(chan struct{}),
	}
	if err := reg.Register(m.requests); err != nil {
		return nil, err
	}
	m.configure(cfg)
	if conn != nil {
		m.done.Add(1)
		go m.flushLoop()
	}
	return m, nil
}

// configure applies the legacy section and makes the series of every
// configured key, so that a key that never called shows as 0. A key that
// leaves the configuration keeps its counts.
func (m *migration) configure(cfg *config.Config) {
	m.policy.Store(newLegacyPolicy(cfg.Legacy))
	for _, k := range cfg.Keys {
		m.use(k.ID)
	}
}

// use returns the counts of a key id, made on first use.
func (m *migration) use(id string) *keyUse {
	m.mu.RLock()
	u := m.keys[id]
	m.mu.RUnlock()
	if u != nil {
		return u
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if u = m.keys[id]; u == nil {
		u = &keyUse{
			routes:    make([]routeUse, len(m.routes)),
			v1Series:  m.requests.WithLabelValues(id, apiV1),
			legSeries: m.requests.WithLabelValues(id, apiLegacy),
		}
		u.sent.routes = make([]routeSent, len(m.routes))
		m.keys[id] = u
	}
	return u
}

// record counts one valid request of key p on rt at now.
func (m *migration) record(p *principal, rt *route.Route, legacy bool, now time.Time) {
	// A principal belongs to one Server's key set, and the Server's
	// migration lives as long as it: the pointer never goes stale.
	u := p.use.Load()
	if u == nil {
		u = m.use(p.KeyID)
		p.use.Store(u)
	}
	if !legacy {
		u.v1.Add(1)
		u.v1Series.Inc()
		return
	}
	u.legacy.Add(1)
	u.legSeries.Inc()
	t := max(now.UnixMilli(), 1)
	storeMin(&u.firstLegacy, t)
	storeMax(&u.lastLe, t)
	r := &u.routes[rt.Index()]
	r.n.Add(1)
	storeMax(&r.last, t)
}

func storeMax(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// storeMin keeps the smallest non-zero value.
func storeMin(a *atomic.Int64, v int64) {
	for cur := a.Load(); (cur == 0 || v < cur) && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// migrate counts the request of a key by API, and, on a legacy path,
// links the /v1 successor and refuses it with 410 once retired there
// (legacy.go). It runs once the request is valid.
func (s *Server) migrate(x *exchange) bool {
	s.migration.record(x.principal, x.route, x.legacy, x.now)
	if !x.legacy {
		return true
	}
	return s.retire(x)
}

// flushLoop adds the counts to Redis every migrationFlushEvery until
// close, and once more then.
func (m *migration) flushLoop() {
	defer m.done.Done()
	t := time.NewTicker(migrationFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = m.flush(context.Background())
		case <-m.stop:
			_ = m.flush(context.Background())
			return
		}
	}
}

func (m *migration) close() {
	m.closeOnce.Do(func() {
		close(m.stop)
		m.done.Wait()
	})
}

// addScript adds counts to a key's hash and keeps the earliest "first" and
// the latest "last" times: several replicas write the same hash, each with
// what it saw since its last flush. ARGV is triples of op, field, value.
const addScript = `
for i = 1, #ARGV, 3 do
  local op, f, v = ARGV[i], ARGV[i+1], tonumber(ARGV[i+2])
  if op == 'add' then
    redis.call('HINCRBY', KEYS[1], f, v)
  else
    local cur = tonumber(redis.call('HGET', KEYS[1], f))
    if cur == nil or (op == 'max' and v > cur) or (op == 'min' and v < cur) then
      redis.call('HSET', KEYS[1], f, v)
    end
  end
end
return 0`

// flush adds to Redis what each key counted since the last flush that
// succeeded, within redis.timeout. What fails is added next time.
func (m *migration) flush(ctx context.Context) error {
	// One flush at a time (the loop's, a report's); requests never wait
	// for one: the key list is copied under the read lock.
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.RLock()
	uses := make(map[string]*keyUse, len(m.keys))
	for id, u := range m.keys {
		uses[id] = u
	}
	m.mu.RUnlock()
	type pending struct {
		u    *keyUse
		snap keyUseSnap
		args []any
	}
	var todo []pending
	var keys []string
	for id, u := range uses {
		snap := u.snapshot()
		var args []any
		addInt := func(op, field string, v int64) { args = append(args, op, field, v) }
		if d := snap.v1 - u.sent.v1; d > 0 {
			addInt("add", "v1", d)
		}
		if d := snap.legacy - u.sent.legacy; d > 0 {
			addInt("add", "legacy", d)
		}
		if snap.first != 0 && snap.first != u.sent.first {
			addInt("min", "first", snap.first)
		}
		if snap.last != 0 && snap.last != u.sent.last {
			addInt("max", "last", snap.last)
		}
		for i, r := range snap.routes {
			name := m.routes[i].Name
			if d := r.n - u.sent.routes[i].n; d > 0 {
				addInt("add", "n:"+name, d)
			}
			if r.last != 0 && r.last != u.sent.routes[i].last {
				addInt("max", "t:"+name, r.last)
			}
		}
		if len(args) > 0 {
			todo = append(todo, pending{u, snap, args})
			keys = append(keys, m.fleet.Key("migration", id))
		}
	}
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.fleet.Timeout())
	defer cancel()
	cmds, err := m.fleet.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range todo {
			p.Eval(ctx, addScript, []string{keys[i]}, t.args...)
		}
		return nil
	})
	for i, c := range cmds {
		if c.Err() == nil {
			todo[i].u.sent.v1, todo[i].u.sent.legacy = todo[i].snap.v1, todo[i].snap.legacy
			todo[i].u.sent.first, todo[i].u.sent.last = todo[i].snap.first, todo[i].snap.last
			copy(todo[i].u.sent.routes, todo[i].snap.routes)
		}
	}
	if err != nil {
		m.log.Debug("migration counts not added to redis; retried", "err", err)
	}
	return err
}

// keyUseSnap is a key's counts at one moment.
type keyUseSnap struct {
	v1, legacy, first, last int64
	routes                  []routeSent
}

func (u *keyUse) snapshot() keyUseSnap {
	s := keyUseSnap{v1: u.v1.Load(), legacy: u.legacy.Load(), first: u.firstLegacy.Load(), last: u.lastLe.Load(),
		routes: make([]routeSent, len(u.routes))}
	for i := range u.routes {
		s.routes[i] = routeSent{u.routes[i].n.Load(), u.routes[i].last.Load()}
	}
	return s
}

// The report, as GET /migration on the admin listener answers it.
type migrationReport struct {
	// Scope is "fleet" (every replica's counts, from Redis) or "replica"
	// (this one's: no Redis, or Redis did not answer).
	Scope       string          `json:"scope"`
	Enabled     bool            `json:"legacy_enabled"`
	Deprecation *string         `json:"deprecation"`
	Sunset      *string         `json:"sunset"`
	GuideURL    *string         `json:"guide_url"`
	Keys        []keyMigrationR `json:"keys"`
}

type keyMigrationR struct {
	KeyID          string          `json:"key_id"`
	Legacy         string          `json:"legacy"` // allow or retired, as configured; "" for a key no longer configured
	V1Requests     int64           `json:"v1_requests"`
	LegacyRequests int64           `json:"legacy_requests"`
	FirstLegacyUse *string         `json:"first_legacy_use"`
	LastLegacyUse  *string         `json:"last_legacy_use"`
	LegacyRoutes   []routeMigrateR `json:"legacy_routes"`
}

type routeMigrateR struct {
	Route    string `json:"route"`
	Requests int64  `json:"requests"`
	LastCall string `json:"last_call"`
}

// report builds the report of the running configuration cfg.
func (m *migration) report(ctx context.Context, cfg *config.Config) migrationReport {
	p := m.policy.Load()
	rep := migrationReport{Scope: "replica", Enabled: p.enabled, Keys: []keyMigrationR{}}
	if cfg.Legacy.Deprecation != "" {
		rep.Deprecation = &cfg.Legacy.Deprecation
	}
	if cfg.Legacy.Sunset != "" {
		rep.Sunset = &cfg.Legacy.Sunset
	}
	if cfg.Legacy.GuideURL != "" {
		rep.GuideURL = &cfg.Legacy.GuideURL
	}
	legacyOf := map[string]string{}
	for _, k := range cfg.Keys {
		legacyOf[k.ID] = cmp.Or(k.Legacy, config.LegacyAllow)
	}
	m.mu.RLock()
	ids := make([]string, 0, len(m.keys))
	snaps := map[string]keyUseSnap{}
	for id, u := range m.keys {
		ids = append(ids, id)
		snaps[id] = u.snapshot()
	}
	m.mu.RUnlock()
	slices.Sort(ids)
	if m.fleet != nil {
		if fleetSnaps, err := m.fleetCounts(ctx, ids); err == nil {
			rep.Scope, snaps = "fleet", fleetSnaps
		} else {
			m.log.Warn("migration report: redis did not answer; this replica's counts only", "err", err)
		}
	}
	for _, id := range ids {
		s := snaps[id]
		k := keyMigrationR{KeyID: id, Legacy: legacyOf[id], V1Requests: s.v1, LegacyRequests: s.legacy,
			FirstLegacyUse: msTime(s.first), LastLegacyUse: msTime(s.last), LegacyRoutes: []routeMigrateR{}}
		for i, r := range s.routes {
			if r.n > 0 {
				k.LegacyRoutes = append(k.LegacyRoutes, routeMigrateR{m.routes[i].Name, r.n, *msTime(r.last)})
			}
		}
		rep.Keys = append(rep.Keys, k)
	}
	return rep
}

// fleetCounts adds this replica's counts to Redis, then reads every
// replica's sums for ids.
func (m *migration) fleetCounts(ctx context.Context, ids []string) (map[string]keyUseSnap, error) {
	if err := m.flush(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.fleet.Timeout())
	defer cancel()
	cmds, err := m.fleet.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.HGetAll(ctx, m.fleet.Key("migration", id))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]keyUseSnap, len(ids))
	for i, id := range ids {
		h, err := cmds[i].(*redis.MapStringStringCmd).Result()
		if err != nil {
			return nil, err
		}
		num := func(f string) int64 { n, _ := strconv.ParseInt(h[f], 10, 64); return n }
		s := keyUseSnap{v1: num("v1"), legacy: num("legacy"), first: num("first"), last: num("last"),
			routes: make([]routeSent, len(m.routes))}
		for j, r := range m.routes {
			s.routes[j] = routeSent{num("n:" + r.Name), num("t:" + r.Name)}
		}
		out[id] = s
	}
	return out, nil
}

func msTime(ms int64) *string {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	return &t
}

// serveMigration answers GET /migration on the admin listener.
func (s *Server) serveMigration(w http.ResponseWriter, r *http.Request) {
	b, err := json.Marshal(s.migration.report(r.Context(), s.live.Load()))
	if err != nil {
		admin.WriteJSON(w, http.StatusInternalServerError, `{"status":"error"}`)
		return
	}
	admin.WriteJSON(w, http.StatusOK, strings.TrimSpace(string(b)))
}

// retire answers 410 to a legacy request once that API is retired for it,
// and links every legacy answer to the /v1 request that serves the same
// data. It runs once the request is valid: the successor is its canonical
// form.
func (s *Server) retire(x *exchange) bool {
	p := s.migration.policy.Load()
	successor := x.req.SuccessorPath()
	x.SetHeader("Link", successorLink([]byte(successor), p.links))
	var why string
	switch {
	case !p.sunset.IsZero() && !x.now.Before(p.sunset):
		why = "This API was retired on " + p.sunset.UTC().Format(time.RFC3339)
	case x.principal.legacyRetired:
		why = "This API is retired for this API key"
	default:
		for _, w := range p.brownouts {
			if !x.now.Before(w.start) && x.now.Before(w.end) {
				why = "This API is unavailable during a scheduled brownout until " +
					w.end.UTC().Format(time.RFC3339) + ", ahead of its retirement"
				break
			}
		}
	}
	if why == "" {
		return true
	}
	x.fail(&edgeError{kind: failLegacyRetired, message: why + "; use " + successor + " instead"})
	return false
}
