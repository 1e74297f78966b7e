// Package cache is the edge's page cache: variant A pages kept in
// a bytes-bounded ristretto store, under the immutable-vs-fresh policy of
// docs/ARCHITECTURE.md "Cache policy", with identical misses coalesced into
// one upstream call and stale pages served while a refresh runs or when the
// upstream fails.
//
// The package knows nothing of HTTP: the proxy builds the key from the
// canonical request, passes a Fetch that calls the legacy host and
// normalizes, and turns the returned Entry and Status into headers.
package cache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"tradergate/internal/poison"
)

// errClosed is returned by Get once Close has begun.
var errClosed = errors.New("cache: closed")

// Fetch produces a fresh page: the variant A body and its Facts, for one
// key at a time. ctx carries the starting call's values, not its
// cancellation (others wait on the same fetch); only Close cancels it, so
// Fetch applies its own upstream deadline. abandoned reports whether every
// caller has stopped waiting (never for a background refresh), so that a
// fetch nobody wants makes no retry. Fetch may outlive the Get that passed
// it, so it must not use per-request state; the cache owns body once
// returned and never modifies it. facts.Report goes back to the caller
// whose Get started the flight, whether the Fetch failed or not.
type Fetch func(ctx context.Context, abandoned func() bool) (body []byte, facts Facts, err error)

// Report is what a Fetch tells the caller that started its flight of how
// it got the page, for that caller alone (its access log, what it does
// with a page it fetched): the cache carries it back (Result.Report) and
// reads none of it.
type Report struct {
	// Origin names, in the caller's terms, who was asked for the page
	// last; "" when nobody was.
	Origin string
	// Status is that origin's status for the page, 0 when none came, and
	// Took how long its call took.
	Status int
	Took   time.Duration
}

// Result is how Get answered.
type Result struct {
	Entry  *Entry
	Status Status
	// Fetched: this call started the flight whose Fetch ran for it, and
	// Report is what that Fetch reported. Zero for a hit, a joined
	// flight, a stale page served while the fetch goes on.
	Fetched bool
	Report  Report
}

// Options are the injected dependencies of a Cache.
type Options struct {
	// Now is the clock; nil: time.Now. Tests move it instead of sleeping.
	Now func() time.Time
	// Logger receives what the cache handles without returning it: a stale
	// page served in place of an error, a failed background refresh, a
	// recovered panic. nil: nothing is logged.
	Logger *slog.Logger

	// L2 is the shared tier's Redis (l2.go), shared by every replica. nil:
	// no shared tier, the cache is this replica's alone. Config.L2 can turn
	// it off without removing the client. The cache never closes it.
	L2 redis.UniversalClient
	// L2Prefix starts every Redis key and the notice channel (the proxy
	// gives fleet's Conn.Key("page") and a colon); replicas that share pages
	// must share it, and it must not contain braces. Required with L2.
	L2Prefix string
	// L2Timeout is the least bound of each Redis call (the redis section's
	// timeout, fleet's Conn.Timeout); Config.L2.Timeout, when longer, bounds
	// them. One that takes longer fails and the flight works alone.
	// Required with L2.
	L2Timeout time.Duration
	// LeaseTimeout is how long a replica holds the lease of a key while it
	// fetches, and how long the others wait for its page before fetching
	// themselves: the upstream timeout. Required with L2.
	LeaseTimeout time.Duration
	// Tracer, when set, records a span for a wait on another caller's
	// flight and one for each visit of the shared tier, under the span in
	// the caller's context. nil: no spans.
	Tracer trace.Tracer
	// Inline says whether a caller under ctx leads its flight on its own
	// goroutine rather than handing it to a runner (runners.go). It may
	// when ctx ends only when the ctx of every other caller does, as the
	// HTTP/1.1 front's does at the drain's deadline: such a leader never
	// stops waiting before the others would, so the flight, which then
	// ends with its ctx, is cut short for nobody. Such a ctx must also
	// end before Close is called, as the front's ends when it stops
	// serving: Close waits for an inline flight and does not end it. nil:
	// every flight goes to a runner.
	Inline func(ctx context.Context) bool
}

// Cache is the page cache. It is safe for concurrent use.
type Cache struct {
	store   *store
	flights flights // the running flights, by key (miss.go)
	z       compressor
	cfg     atomic.Pointer[settings]
	now     func() time.Time
	tracer  trace.Tracer // nil: no spans
	log     *slog.Logger
	inline  func(context.Context) bool // Options.Inline; nil: never

	// Background work (flights, refreshes) is owned here: it registers in
	// wg under mu unless closed, and its contexts end with stop.
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
	stop   context.Context
	cancel context.CancelFunc

	stats counters
	// fileErrLogged: a page file failed to be made and was logged at
	// warning level; later failures are logged at debug (files.go).
	fileErrLogged atomic.Bool
	// maxFiles bounds the page files open at once (files.go).
	maxFiles int64
	wants    wants // callers waiting per key, for the fetch's abandoned
	// runs hands a flight to a parked runner (runners.go); unbuffered.
	runs       chan *call
	runnerIdle time.Duration
	l2         *l2 // nil: no shared tier
}

// New builds a Cache from cfg (zero fields take their defaults).
func New(cfg Config, opt Options) (*Cache, error) {
	s, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	maxBytes := cfg.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	st, err := newStore(maxBytes)
	if err != nil {
		return nil, err
	}
	c := &Cache{
		store:  st,
		now:    opt.Now,
		log:    opt.Logger,
		tracer: opt.Tracer,
		inline: opt.Inline,
		runs:   make(chan *call),
		// Set once here: tests shorten it before the first flight.
		runnerIdle: runnerIdle,
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.maxFiles = maxPageFiles()
	c.fileSettings(s)
	c.cfg.Store(s)
	// Of Background, with no values: a flight's context asks stop for a
	// value before its leader's (flightContext).
	c.stop, c.cancel = context.WithCancel(context.Background())
	if opt.L2 != nil {
		if c.l2, err = newL2(opt); err != nil {
			st.close()
			return nil, err
		}
		c.l2.setTimeout(s)
		c.l2.listen(c.stop)
	}
	return c, nil
}

// SetConfig replaces the policy figures and compress_min_bytes for entries
// stored from now on; entries already held keep theirs. MaxBytes is fixed at
// New and ignored here. An invalid cfg is refused and the running one kept.
// It returns the error rather than half-applying: a reload must not
// half-apply.
func (c *Cache) SetConfig(cfg Config) error {
	s, err := resolve(cfg)
	if err != nil {
		return err
	}
	if cfg.MaxBytes != 0 && cfg.MaxBytes != c.store.max {
		// Not an error: the rest of the reload applies.
		c.log.Warn("cache: max_bytes changes on restart only", slog.Int64("running", c.store.max), slog.Int64("configured", cfg.MaxBytes))
	}
	c.fileSettings(s)
	if c.l2 != nil {
		c.l2.setTimeout(s)
	}
	c.cfg.Store(s)
	return nil
}

// Close cancels the contexts of fetches running on runners, waits for
// every flight and background refresh to end, and closes the store. Calls
// of Get that are still running may return an error saying the cache is
// closed, or a fetch error; call Close after the server has stopped
// serving.
func (c *Cache) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if c.l2 != nil {
		c.l2.close()
	}
	c.store.close()
}

// enter registers one piece of background work, or reports that the cache
// is closed. Registering under mu, which Close takes before Wait, keeps the
// WaitGroup rule: no Add from zero runs concurrently with Wait.
func (c *Cache) enter() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// Fresh returns the page for key when this replica holds it fresh, and
// nil otherwise, without starting anything: the common case of a hit, for
// callers that would otherwise build a Fetch only to have it unused (a
// fresh hit never calls it). Counted as a Hit. On nil, call Get.
func (c *Cache) Fresh(key string, now time.Time) *Entry {
	e := c.store.get(key)
	if e == nil || e.state(now) != fresh {
		return nil
	}
	c.stats.hits.Add(1)
	return e
}

// Get returns the page for key:
//
//   - a fresh entry: Hit;
//   - inside stale_while_revalidate: the entry as Stale, while one
//     background refresh runs (shared with any miss of the same key);
//   - otherwise the result of a flight (miss.go), shared by every identical
//     concurrent call: Miss, Bypass when the policy says not to store, Stale
//     when the fetch failed with an error that allows it (fetcherr.Transient:
//     the legacy host failing or shielded, never the client's fault) and
//     the entry is inside stale_if_error, or the error (errors are never
//     cached).
//
// When ctx ends before the flight, Get returns ctx.Err() at once; the flight
// goes on for the other callers and for the store.
//
// key is the caller's memory, read during the call: what outlives it (a
// flight, a refresh, the stored entry) keeps the copy ownKey makes.
func (c *Cache) Get(ctx context.Context, key string, fetch Fetch) (Result, error) {
	return c.GetSince(ctx, key, time.Time{}, fetch)
}

// GetSince is Get for a caller that must see what the legacy host said
// since a moment: a page fetched before since (its Stored time), fresh or
// stale, here or in the shared tier, is fetched again, or taken from a
// flight of the key that fetches it anew; it still answers as
// stale_if_error allows when that fetch fails. A stream's poller reads so
// (proxy/stream): with its interval at the route's fresh TTL, the page it
// read at its last poll is still fresh at the next by a hair, and then
// inside stale_while_revalidate, so a poll that found nothing new would
// find nothing new twice more, whatever came meanwhile.
func (c *Cache) GetSince(ctx context.Context, key string, since time.Time, fetch Fetch) (Result, error) {
	e := c.store.get(key)
	if e != nil {
		switch e.stateSince(c.now(), since) {
		case fresh:
			c.stats.hits.Add(1)
			return Result{Entry: e, Status: Hit}, nil
		case revalidate:
			c.refresh(ctx, ownKey(key), e, fetch)
			c.stats.stale.Add(1)
			return Result{Entry: e, Status: Stale}, nil
		case unusable:
			e = nil
		}
	}
	return c.miss(ctx, ownKey(key), fetch, e, since)
}

// ownKey copies a caller's key where the cache starts work that may
// outlive the call (miss, refresh): the flight, its waiters, a refresh
// and the store keep the copy, never the caller's memory, which may be a
// buffer it reuses.
func ownKey(key string) string { return poison.Copy(key) }
