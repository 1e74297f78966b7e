// Package native moves the backend off the legacy host: a native service
// serves the /v1 contract (docs/openapi.json) itself, and each route takes
// its misses from it by mode (legacy, shadow, canary, native; see Mode).
// The package decides which side serves a miss, fetches from native with
// a breaker per route, checks native's answers against the contract,
// compares them with the legacy-derived answers in the background, rolls
// a route back to legacy when native's error or difference ratio passes
// its bound, and reports all of it (GET /shadow, metrics).
//
// It knows only the native service: the legacy host, the cache, client
// quotas and the legacy shield stay with the caller, which on a miss
// calls, in order:
//
//	switch b.Decide(route, keyID) {
//	case native.Native:
//		body, err := b.Fetch(ctx, route, pathAndQuery, accept) // on error: serve legacy
//	case native.Legacy:
//		// the legacy fetch, as always; once the answer is written:
//		b.Shadow(route, immutable, legacyBody, pathAndQuery)
//	}
//
// It imports proxy/route, its neighbour, because the routes it serves and
// validates are the contract's routes: a second table here would drift.
package native

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"tradergate/proxy/route"
)

// Side is who serves one miss.
type Side uint8

const (
	// Legacy: the legacy host, translated, as always.
	Legacy Side = iota
	// Native: the native service (Fetch), the legacy host as the fallback.
	Native
)

func (s Side) String() string {
	if s == Native {
		return "native"
	}
	return "legacy"
}

// Options are what a Backend takes from its owner rather than from the
// configuration.
type Options struct {
	// Routes are the route table's routes (route.Table.Routes); the
	// package keeps no table of its own. Required.
	Routes []*route.Route
	// OpenAPI is the contract native's answers are checked against
	// (docs.OpenAPI()); nil: answers are not checked, and no answer is a
	// contract break.
	OpenAPI []byte
	// Registry receives the metrics; nil: they are kept unregistered.
	Registry prometheus.Registerer
	// Logger receives rollbacks and shadow failures; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the rollback windows and the report; nil:
	// time.Now.
	Now func() time.Time
	// Fleet, when set, merges this replica's report with the other
	// replicas' for GET /shadow; nil: the report is this replica's.
	Fleet Aggregator
}

// Backend is the native side of the edge. It is safe for concurrent use.
type Backend struct {
	opt Options
	log *slog.Logger
	now func() time.Time
	// The contract is read from Options.OpenAPI once a route leaves
	// legacy (at New or at the first check after a Reload): an edge that
	// never uses native does not pay for reading the document.
	contractOnce sync.Once
	contract     *contract // nil: answers are not checked
	contractErr  error
	metrics      *metrics
	routes       map[string]*routeState // fixed at New: read without a lock
	names        []string               // route names in table order
	gen          atomic.Pointer[generation]
	shadow       *shadowPool

	reloadMu sync.Mutex // one Reload at a time
}

// generation is one loaded configuration: its client, and per route its
// mode, breakers and rollback. Reload swaps it whole; calls started on
// the old one finish on it.
type generation struct {
	cfg    Config
	cli    *client // nil: base_url is empty
	routes map[string]*routeGen
}

// routeGen is a route's part of a generation.
type routeGen struct {
	rc        RouteConfig
	canaryCut uint64 // canary: key hashes below it (of canaryScale) go native
	serveBr   *breaker
	shadowBr  *breaker
	rb        *rollback
}

// canaryScale is the resolution of canary percentages: 0.01%.
const canaryScale = 10000

// New builds the Backend of cfg (defaults applied, validated). Close
// releases what it starts.
func New(cfg Config, opt Options) (*Backend, error) {
	if len(opt.Routes) == 0 {
		return nil, errors.New("native: no routes")
	}
	b := &Backend{opt: opt, log: opt.Logger, now: opt.Now, routes: map[string]*routeState{}}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	for _, rt := range opt.Routes {
		if rt.EdgeBuilt {
			continue // never reaches a backend
		}
		b.routes[rt.Name] = newRouteState(rt.Name)
		b.names = append(b.names, rt.Name)
	}
	if cfg.Enabled() {
		if err := b.loadContract(); err != nil {
			return nil, err
		}
	}
	m, err := newMetrics(opt.Registry, b.names)
	if err != nil {
		return nil, fmt.Errorf("native: metrics: %w", err)
	}
	b.metrics = m
	b.gen.Store(b.newGeneration(cfg))
	b.shadow = newShadowPool(cfg.Shadow, b.compare)
	return b, nil
}

func (b *Backend) newGeneration(cfg Config) *generation {
	g := &generation{cfg: cfg, routes: map[string]*routeGen{}}
	if cfg.BaseURL != "" {
		g.cli = newClient(cfg)
	}
	for _, name := range b.names {
		rc := cfg.Routes[name]
		if rc.Mode == "" {
			rc.Mode = ModeLegacy
		}
		if g.cli == nil {
			rc.Mode = ModeLegacy // Validate refuses this; stay safe anyway
		}
		armed := rc.Mode == ModeCanary || rc.Mode == ModeNative
		g.routes[name] = &routeGen{
			rc:        rc,
			canaryCut: uint64(rc.Percent * canaryScale / 100),
			serveBr:   newBreaker("native " + name),
			shadowBr:  newBreaker("native shadow " + name),
			rb:        newRollback(cfg.Rollback, armed),
		}
		b.metrics.rolledBack.WithLabelValues(name).Set(0)
	}
	return g
}

// Reload applies cfg (defaults applied, validated): a new client with the
// credential read anew, closed breakers, and every rollback re-armed. The
// figures of the report and the shadow workers (native.shadow) are kept.
func (b *Backend) Reload(cfg Config) {
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	old := b.gen.Swap(b.newGeneration(cfg))
	if old.cli != nil {
		old.cli.close() // idle connections only; calls in flight finish
	}
}

// Close stops the shadow workers (a comparison in flight is abandoned,
// those queued are dropped) and closes idle connections. Call it after
// the last Fetch and Shadow.
func (b *Backend) Close() {
	b.shadow.close()
	if g := b.gen.Load(); g.cli != nil {
		g.cli.close()
	}
}

// Decide says who serves a miss of route for the key keyID (the key's id
// from the configuration, never the key). A route rolled back, unknown or
// legacy is Legacy; in canary mode a key's side depends only on its id,
// so one key always sees the same backend.
func (b *Backend) Decide(routeName, keyID string) Side {
	rg := b.gen.Load().routes[routeName]
	if rg == nil {
		return Legacy
	}
	switch rg.rc.Mode {
	case ModeNative:
		if !rg.rb.rolledBack() {
			return Native
		}
	case ModeCanary:
		if xxhash.Sum64String(keyID)%canaryScale < rg.canaryCut && !rg.rb.rolledBack() {
			return Native
		}
	}
	return Legacy
}

// Fetch gets the page of a validated request from native for a client:
// pathAndQuery is its /v1 path and canonical query (route.Request's
// SuccessorPath). It makes one call through the route's breaker, within
// native.timeout, and checks the answer against the contract. accept,
// when not nil, is the caller's own check of a body that kept the
// contract (the edge reads the cache policy's facts from it); its error
// makes the answer a BadBody. On any error (an *Error, whose Result says
// what happened) the caller serves the legacy-derived answer instead. The
// body is the caller's.
func (b *Backend) Fetch(ctx context.Context, routeName, pathAndQuery string, accept func(body []byte) error) ([]byte, error) {
	g := b.gen.Load()
	rg, rs := g.routes[routeName], b.routes[routeName]
	if rg == nil || g.cli == nil {
		return nil, fmt.Errorf("native: route %q is not served by native", routeName)
	}
	body, e := g.cli.get(ctx, rg.serveBr, pathAndQuery)
	if e == nil {
		if v := b.violations(routeName, body); len(v) > 0 {
			body, e = nil, &Error{Result: ContractBreak, Status: 200, Err: errors.New(strings.Join(v, "; "))}
		} else if accept != nil {
			if err := accept(body); err != nil {
				body, e = nil, &Error{Result: BadBody, Status: 200, Err: err}
			}
		}
	}
	r := OK
	if e != nil {
		r = e.Result
	}
	b.called(rs, rg, r, tally{})
	if e != nil {
		return nil, e
	}
	return body, nil
}

// loadContract reads the contract from Options.OpenAPI, once.
func (b *Backend) loadContract() error {
	b.contractOnce.Do(func() {
		if b.opt.OpenAPI == nil {
			return
		}
		if b.contract, b.contractErr = newContract(b.opt.OpenAPI, b.opt.Routes); b.contractErr != nil {
			b.contractErr = fmt.Errorf("native: %w", b.contractErr)
		}
	})
	return b.contractErr
}

// violations checks body against the route's contract. A document that
// does not load breaks every answer: clients stay on legacy.
func (b *Backend) violations(routeName string, body []byte) []string {
	if err := b.loadContract(); err != nil {
		return []string{err.Error()}
	}
	if b.contract == nil {
		return nil
	}
	return b.contract.check(routeName, body)
}

// called counts a native call's result and what a comparison found, and
// rolls the route back when that passes a bound.
func (b *Backend) called(rs *routeState, rg *routeGen, r Result, t tally) {
	rs.results[r].Add(1)
	b.metrics.requests.WithLabelValues(rs.name, r.String()).Inc()
	if r == Canceled {
		return
	}
	t.calls = 1
	if r.failed() {
		t.errors = 1
	}
	if tripped, reason := rg.rb.record(b.now(), t); tripped {
		b.metrics.rolledBack.WithLabelValues(rs.name).Set(1)
		b.log.Warn("native route rolled back to legacy", "route", rs.name, "mode", string(rg.rc.Mode), "reason", reason)
	}
}

// sampled draws whether one miss is compared.
func sampled(share float64) bool {
	return share >= 1 || share > 0 && rand.Float64() < share
}
