// Package migration counts who still calls the legacy paths, and what:
// each valid request of a known key by API (legacy or v1), legacy calls
// also by route with the time of the last one, whatever the answer (a 410
// is a client still to move). It owns those counts, their series
// (tradergate_migration_requests_total), their sums on the fleet's Redis,
// and the report GET /migration answers (Report).
//
// The counts are the replica's own, or, with Redis, the fleet's: each
// replica adds what it counted to one hash per key (<prefix>:migration:<key
// id>) about once a second and before it reports, so requests never wait on
// Redis and a Redis that fails costs nothing but a late report.
//
// It decides nothing about a request: whether a path is legacy, the
// deprecation headers, the successor link and the 410 of a retired API stay
// with the caller's steps (proxy/legacy.go), which tell it what to count
// once a request is valid:
//
//	k := counts.Key(keyID) // once per key; remember it
//	k.Count(route.Index(), legacy, now)
//
// It reads the configuration (keys, the legacy section), the route table
// for the routes' names, and the fleet's connection; it never sees a
// request, a key's secret or its hash, and writes no answer.
package migration

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/proxy/config"
	"tradergate/proxy/fleet"
	"tradergate/proxy/route"
)

// flushEvery is how often a replica adds its counts to Redis.
const flushEvery = time.Second

// The api label values of tradergate_migration_requests_total.
const (
	apiLegacy = "legacy"
	apiV1     = "v1"
)

// Counts holds every key's counts since start.
type Counts struct {
	routes   []*route.Route
	requests *prometheus.CounterVec // key_id, api
	fleet    *fleet.Conn            // nil: the counts are this replica's
	log      *slog.Logger

	mu   sync.RWMutex
	keys map[string]*Key
	// flushMu makes flushes take turns; it guards Key.sent.
	flushMu sync.Mutex

	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once
}

// Key is one key's counts since start. Times are Unix milliseconds, 0 for
// none.
type Key struct {
	v1, legacy          atomic.Int64
	firstLegacy, lastLe atomic.Int64
	routes              []routeUse // by route index
	v1Series, legSeries prometheus.Counter

	// What has been added to Redis so far; only flush touches it, under
	// Counts.flushMu.
	sent struct {
		v1, legacy, first, last int64
		routes                  []routeSent
	}
}

type routeUse struct{ n, last atomic.Int64 }

type routeSent struct{ n, last int64 }

// New makes the counts of the routes (the route table's, by index),
// registers their series on reg and makes a series for every key of cfg.
// With conn, the counts are added to the fleet's Redis until Close.
func New(reg prometheus.Registerer, cfg *config.Config, routes []*route.Route, conn *fleet.Conn, log *slog.Logger) (*Counts, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Counts{
		routes: routes,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tradergate_migration_requests_total",
			Help: `Valid requests of each configured key, by API: "legacy" (/open-api/v1) or "v1". This replica's own.`,
		}, []string{"key_id", "api"}),
		fleet: conn,
		log:   log,
		keys:  map[string]*Key{},
		stop:  make(chan struct{}),
	}
	if err := reg.Register(c.requests); err != nil {
		return nil, err
	}
	c.Configure(cfg)
	if conn != nil {
		c.done.Add(1)
		go c.flushLoop()
	}
	return c, nil
}

// Configure makes the series of every configured key, so that a key that
// never called shows as 0. A key that leaves the configuration keeps its
// counts.
func (c *Counts) Configure(cfg *config.Config) {
	for _, k := range cfg.Keys {
		c.Key(k.ID)
	}
}

// Requests is tradergate_migration_requests_total, for the status page's
// figures.
func (c *Counts) Requests() *prometheus.CounterVec { return c.requests }

// Key returns the counts of a key id, made on first use. The caller may
// keep it as long as it keeps c.
func (c *Counts) Key(id string) *Key {
	c.mu.RLock()
	k := c.keys[id]
	c.mu.RUnlock()
	if k != nil {
		return k
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k = c.keys[id]; k == nil {
		k = &Key{
			routes:    make([]routeUse, len(c.routes)),
			v1Series:  c.requests.WithLabelValues(id, apiV1),
			legSeries: c.requests.WithLabelValues(id, apiLegacy),
		}
		k.sent.routes = make([]routeSent, len(c.routes))
		c.keys[id] = k
	}
	return k
}

// Count counts one valid request of the key on route index rt (the
// route table's, as given to New) at now, on the legacy paths or on /v1.
// It allocates nothing: it runs on every request, hits included.
func (k *Key) Count(rt int, legacy bool, now time.Time) {
	if !legacy {
		k.v1.Add(1)
		k.v1Series.Inc()
		return
	}
	k.legacy.Add(1)
	k.legSeries.Inc()
	t := max(now.UnixMilli(), 1)
	storeMin(&k.firstLegacy, t)
	storeMax(&k.lastLe, t)
	r := &k.routes[rt]
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

// Close stops adding the counts to Redis, once the last of them are
// added. Counting goes on.
func (c *Counts) Close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.done.Wait()
	})
}

// snap is a key's counts at one moment.
type snap struct {
	v1, legacy, first, last int64
	routes                  []routeSent
}

func (k *Key) snapshot() snap {
	s := snap{v1: k.v1.Load(), legacy: k.legacy.Load(), first: k.firstLegacy.Load(), last: k.lastLe.Load(),
		routes: make([]routeSent, len(k.routes))}
	for i := range k.routes {
		s.routes[i] = routeSent{k.routes[i].n.Load(), k.routes[i].last.Load()}
	}
	return s
}
