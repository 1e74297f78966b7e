package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"tradergate/cache/fetcherr"
)

// A miss goes through a flight: one per key at a time, that checks the
// store again, fetches (through the shared tier when it is on,
// l2flight.go), classifies and stores the page, and hands it to every
// caller waiting on the key. The first caller of a key leads its flight:
// it hands the flight to a runner (runners.go) and waits for it like the
// others, so a miss costs no goroutine of its own, and a caller whose ctx
// ends stops waiting while the flight goes on for the others and for the
// store. A leader whose ctx ends only when everyone's does
// (Options.Inline), and that has no held page to serve in the meantime,
// runs the flight itself, under its ctx.

// flights are the running flights, one per key at most.
type flights struct {
	mu sync.Mutex
	m  map[string]*call
}

// call is a flight of a key, as its leader began it; the callers that join
// it wait on done.
type call struct {
	c     *Cache
	ctx   context.Context
	key   string
	fetch Fetch
	// held is an expired entry the caller saw: the page to serve if the
	// fetch fails (stale_if_error).
	held *Entry
	// since: a page stored before it does not answer (GetSince).
	since time.Time
	// inline: the leader runs the flight on its own goroutine (start),
	// under its ctx (fly).
	inline bool
	// res and err are the flight's outcome, set before done is closed
	// (land).
	res  result
	err  error
	done chan struct{}
}

// result is what a flight hands to its callers.
type result struct {
	e  *Entry
	st Status
	// fetched: the flight's Fetch ran, and report is what it said; for
	// the caller that started the flight (Result.Report).
	fetched bool
	report  Report
}

// miss waits for the flight of key, starting it if none runs. A caller
// whose ctx ends stops waiting; the flight goes on for the others and for
// the store.
func (c *Cache) miss(ctx context.Context, key string, fetch Fetch, held *Entry, since time.Time) (Result, error) {
	if err := ctx.Err(); err != nil {
		// The client is gone already: no upstream call on its behalf.
		c.stats.misses.Add(1)
		return Result{Status: Miss}, err
	}
	// A held page answers a slow fetch (Config.StaleAfter): once the key's
	// fetch has run staleAfter without answering, counted from when it
	// began, whoever began it (this caller, a refresh, another caller's
	// miss, a fetch that a caller left to refresh the page). A fetch begun
	// just now is no sign of a failing host: the caller waits what is left.
	var staleAfter <-chan time.Time
	if d := c.cfg.Load().staleAfter; d >= 0 && held != nil && held.servableOnError(c.now()) {
		if running, ok := c.wants.busyFor(key); ok {
			if d -= running; d <= 0 {
				c.stats.count(Stale)
				return Result{Entry: held, Status: Stale}, nil
			}
		}
		t := time.NewTimer(d)
		defer t.Stop()
		staleAfter = t.C
	}
	cl := &call{c: c, ctx: ctx, key: key, fetch: fetch, held: held, since: since,
		// A held page served at stale_after needs a leader free to leave.
		inline: staleAfter == nil && c.inline != nil && c.inline(ctx)}
	w := c.wants.wait(key)
	defer c.wants.waited(key, w)
	f, leader := c.join(cl, true) // an inline leader's flight has landed
	defer c.stats.waiting.Add(-1)
	if !leader && c.tracer != nil {
		defer c.traceWait(ctx, time.Now())
	}
	if leader && cl.inline && ctx.Err() != nil {
		// The flight ended with ctx (fly): this caller's answer is the
		// end of its ctx, as a caller's who left the wait.
		c.stats.misses.Add(1)
		return Result{Status: Miss}, ctx.Err()
	}
	select {
	case <-staleAfter:
		// The fetch goes on, as the page's refresh: not abandoned.
		w.kept.Store(true)
		c.stats.count(Stale)
		return Result{Entry: held, Status: Stale}, nil
	case <-f.done:
		// The close orders these loads after land's stores.
		if !leader {
			c.stats.coalesced.Add(1)
		}
		res := f.res
		out := Result{Entry: res.e, Status: res.st}
		if leader && res.fetched {
			out.Fetched, out.Report = true, res.report
		}
		if f.err != nil {
			c.stats.misses.Add(1)
			out.Entry, out.Status = nil, Miss
			return out, f.err
		}
		c.stats.count(res.st)
		return out, nil
	case <-ctx.Done():
		c.stats.misses.Add(1)
		return Result{Status: Miss}, ctx.Err()
	}
}

// join returns the flight of cl.key: the one running, or cl, which the
// caller then leads: join starts it (and, inline, runs it: start). A
// caller that waits (a miss, not a refresh) is counted in stats.waiting
// once it has joined, before an inline flight runs; it takes itself off.
func (c *Cache) join(cl *call, waits bool) (f *call, leader bool) {
	c.flights.mu.Lock()
	f = c.flights.m[cl.key]
	if leader = f == nil; leader {
		if c.flights.m == nil {
			c.flights.m = make(map[string]*call)
		}
		cl.done = make(chan struct{})
		c.flights.m[cl.key] = cl
		f = cl
	}
	c.flights.mu.Unlock()
	if waits {
		c.stats.waiting.Add(1)
	}
	if leader {
		c.start(cl)
	}
	return f, leader
}

// forget gives up key's place: a caller from now on starts a flight of
// its own, while the one running lands for those that joined it.
func (c *Cache) forget(key string) {
	c.flights.mu.Lock()
	delete(c.flights.m, key)
	c.flights.mu.Unlock()
}

// land keeps cl's outcome, takes cl out of the running flights (unless
// forget did) and wakes its callers.
func (c *Cache) land(cl *call, res result, err error) {
	cl.res, cl.err = res, err
	c.flights.mu.Lock()
	if c.flights.m[cl.key] == cl {
		delete(c.flights.m, cl.key)
	}
	c.flights.mu.Unlock()
	close(cl.done)
}

// traceWait records, for a caller that joined another's flight, the span
// of its wait (the flight's own work is traced by whoever started it).
func (c *Cache) traceWait(ctx context.Context, start time.Time) {
	_, span := c.tracer.Start(ctx, "cache.coalesced_wait", trace.WithTimestamp(start))
	span.End()
}

// refresh starts the background refresh of a stale entry, unless one runs
// already (stale_while_revalidate). It joins the flight of
// the key, so a refresh and the misses of the same key make one upstream
// call between them.
func (c *Cache) refresh(ctx context.Context, key string, e *Entry, fetch Fetch) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	if !c.enter() {
		e.refreshing.Store(false)
		return
	}
	c.stats.refreshes.Add(1)
	cl := &call{c: c, ctx: ctx, key: key, fetch: fetch, held: e}
	go func() {
		defer c.wg.Done()
		// Cleared even on failure, so a later stale hit may try again; on
		// success e is replaced and the flag no longer matters.
		defer e.refreshing.Store(false)
		f, _ := c.join(cl, false)
		<-f.done // a flight always lands (fly), closed or not
		if err := f.err; err != nil {
			// Nobody else receives this error unless a miss joined the
			// flight, and that miss returns it: a debug line only.
			c.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelDebug, "cache: background refresh failed",
				slog.String("key", key), slog.Any("error", err))
		}
	}()
}

// fly runs the flight of cl on its runner (or its leader's goroutine,
// inline) and lands it with its outcome (the result goes with an error
// too: it carries the Fetch's report), a panic as an error: recovered
// here, it is the flight's callers' error, not the end of the process. A
// fetch that ends its goroutine (runtime.Goexit: a test's FailNow) ends
// the runner with it; its callers get errFlightExited rather than wait
// for a result that never comes.
//
// The flight's context carries the leader's values and, run on a runner,
// ends only with Close (flightContext): it serves every caller and the
// store, so no one caller's cancellation may end it. Inline, it is the
// leader's ctx, which ends only when every caller's does, and before
// Close is called (Options.Inline); a flight that failed then gives the
// callers that joined it the ctx's cause (wire.ErrShuttingDown on the
// HTTP/1.1 front), not the fetch's cancellation, which would read as
// their own client gone.
func (cl *call) fly() {
	c := cl.c
	defer c.wg.Done() // the flight's registration (start)
	returned := false
	defer func() {
		if returned {
			return
		}
		if p := recover(); p != nil {
			// The stack is only here: log it once for all the waiters.
			c.log.LogAttrs(context.WithoutCancel(cl.ctx), slog.LevelError, "cache: panic in flight",
				slog.String("key", cl.key), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			c.land(cl, result{}, fmt.Errorf("cache: flight of %q panicked: %v", cl.key, p))
		} else {
			c.land(cl, result{}, errFlightExited)
		}
	}()
	ctx := cl.ctx
	if !cl.inline {
		ctx = flightContext{Context: c.stop, values: ctx}
	}
	res, err := c.flight(ctx, cl.key, cl.fetch, cl.held, cl.since)
	returned = true
	if err != nil && cl.inline && cl.ctx.Err() != nil {
		err = fmt.Errorf("cache: the flight's leader stopped: %w", context.Cause(cl.ctx))
	}
	c.land(cl, res, err)
}

// errFlightExited: the fetch ended its goroutine (runtime.Goexit).
var errFlightExited = errors.New("cache: the flight's goroutine exited")

// flightContext is the context of a flight on a runner: it ends with its
// Context, the cache's stop (Close), and carries the values of the
// leader's. It is what context.WithoutCancel of the leader's, cancelled by
// a context.AfterFunc on stop, would be, less a context, a cancel and a
// registration on stop per miss: its Done is stop's own channel.
type flightContext struct {
	context.Context // stop: the end, and no values of its own
	values          context.Context
}

// Value asks stop first. stop holds no values but the context package's
// own record of its cancellation, and finding that here registers a
// context derived from the flight's (the fetch's timeout) with stop
// itself, rather than with a goroutine that watches the flight's Done. The
// leader's record of its own cancellation is hidden, as WithoutCancel
// hides it.
func (f flightContext) Value(key any) any {
	if v := f.Context.Value(key); v != nil {
		return v
	}
	return f.values.Value(key)
}

// flight is the running flight of one key: what its steps share.
type flight struct {
	c *Cache
	// ctx carries the leader's values (request id) and ends with Close,
	// or, inline, is the leader's (fly).
	ctx   context.Context
	key   string
	fetch Fetch
	want  *want // the callers waiting, for the fetch's abandoned
	// held is the page to serve if the fetch fails (stale-if-error);
	// heldL2 says it came from the shared tier.
	held   *Entry
	heldL2 bool
	// since: a page stored before it does not answer (GetSince).
	since time.Time
	// fetched: the Fetch ran, and report is what it said (result).
	fetched bool
	report  Report
}

// flight checks the store again, then asks the shared tier (l2flight.go)
// or fetches and stores the page itself, under ctx (fly).
func (c *Cache) flight(ctx context.Context, key string, fetch Fetch, held *Entry, since time.Time) (result, error) {
	// Check again inside the flight (groupcache load()): a flight that ended
	// between the caller's lookup and this one has stored the page.
	if e := c.store.get(key); e != nil {
		switch e.stateSince(c.now(), since) {
		case fresh:
			return result{e: e, st: Hit}, nil
		case revalidate, expired:
			held = e
		}
	}

	w := c.wants.acquire(key)
	defer c.wants.release(key, w)
	f := &flight{c: c, ctx: ctx, key: key, fetch: fetch, want: w, held: held, since: since}

	var r result
	var err error
	if s := c.cfg.Load(); c.l2 != nil && s.l2 {
		r, err = f.shared()
	} else {
		r, err = f.fetchLocal()
	}
	r.fetched, r.report = f.fetched, f.report
	return r, err
}

// fetchLocal fetches the page and stores it in this replica's memory by
// policy: Miss, or Bypass when the policy does not keep it; on failure,
// the held page or the error (failed).
func (f *flight) fetchLocal() (result, error) {
	e, err := f.fetchEntry()
	if err != nil {
		return f.failed(err)
	}
	return f.keep(e), nil
}

// fetchEntry calls the Fetch and builds the entry of its page, classified
// by the policy of its route.
func (f *flight) fetchEntry() (*Entry, error) {
	c := f.c
	start := c.now()
	c.stats.fetches.Add(1)
	body, facts, err := f.fetch(f.ctx, f.want.abandoned)
	f.fetched, f.report = true, facts.Report
	if err != nil {
		return nil, err
	}
	s := c.cfg.Load()
	p := s.policy(facts.Route)
	ttl, immutable := p.classify(facts, start)
	return c.newEntry(s, p, body, start, ttl, immutable), nil
}

// keep stores e in memory unless the policy gave it no TTL (Bypass).
func (f *flight) keep(e *Entry) result {
	if e.TTL <= 0 {
		return result{e: e, st: Bypass}
	}
	f.c.store.put(f.key, e, f.c.lifetime(e))
	return result{e: e, st: Miss}
}

// failed is the answer to a failed fetch: the held page when the error
// allows it (stale-if-error), else the error, which is never cached.
func (f *flight) failed(err error) (result, error) {
	c, held := f.c, f.held
	now := c.now()
	if held != nil && held.servableOnError(now) && fetcherr.Transient(err) {
		// The error is not returned, so it is logged.
		c.log.LogAttrs(f.ctx, slog.LevelWarn, "cache: fetch failed; the held page stays in use",
			slog.String("key", f.key), slog.Duration("age", held.Age(now)), slog.Any("error", err))
		return result{e: held, st: staleStatus(f.heldL2)}, nil
	}
	return result{}, err
}

func staleStatus(fromL2 bool) Status {
	if fromL2 {
		return StaleL2
	}
	return Stale
}

// lifetime is what is left of e's TTL plus its longer stale window: how long
// the store keeps it.
func (c *Cache) lifetime(e *Entry) time.Duration {
	return e.TTL + max(e.swr, e.sie) - e.Age(c.now())
}

// newEntry builds the entry of a fetched page. Stored is the time the fetch
// began: the page is at least that old, so its age is never understated
// (RFC 9111 section 4.2.3 counts from the request time likewise).
func (c *Cache) newEntry(s *settings, p Policy, body []byte, stored time.Time, ttl time.Duration, immutable bool) *Entry {
	if cap(body)-len(body) > len(body)/8+8<<10 {
		// A body read into a much larger buffer would hold all of it, and
		// the store charges capacity: keep a copy. Less spare room than
		// this is what Go's size classes give any allocation of len(body).
		body = bytes.Clone(body)
	}
	e := &Entry{
		Stored:    stored,
		TTL:       ttl,
		Immutable: immutable,
		swr:       max(p.StaleWhileRevalidate, 0),
		sie:       max(p.StaleIfError, 0),
	}
	c.newForms(e, body, nil, 0, s.compressMin >= 0 && len(body) > s.compressMin)
	e.ETag, e.gzipETag = etags(body)
	return e
}
