package cache

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"tradergate/cache/fetcherr"
)

// The flight of a key when the shared tier is on (l2.go): read L2, else
// take the lease and fetch for the fleet, or wait for the holder's fetch.

// leaseHeld is what a flight that fetches for the fleet must finish: the
// keys to store the page under and the lease token (empty when the flight
// fetches without the lease, after waiting for it in vain).
type leaseHeld struct {
	k     sharedKeys
	token string
}

// waitEnd is how a wait for another replica's fetch ended (await).
type waitEnd uint8

const (
	waitAnswered   waitEnd = iota // the holder's page or error, or the caller's ctx ended
	waitLeaseFree                 // the lease is free and no page was stored: bid for it again
	waitFetchAlone                // Redis failed, or the holder did not share the page: fetch unshared
	waitTimedOut                  // waited the whole bound: fetch, and share the page
)

// shared is the flight of a key through the shared tier: a fresh page
// from L2, or one fetched under the lease, or the holder's.
func (f *flight) shared() (result, error) {
	c := f.c
	if c.tracer != nil {
		var span trace.Span
		f.ctx, span = c.tracer.Start(f.ctx, "cache.l2")
		defer span.End()
	}
	k := c.l2.keys(f.key)
	// A refresh never waits: when another replica holds the lease, the page
	// is being fetched, and the held one serves meanwhile.
	refresh := f.held != nil && f.held.state(c.now()) == revalidate
	if r, ok, err := f.readShared(k, refresh); ok {
		return r, err
	}
	return f.leaseOrWait(k, refresh)
}

// readShared reads the page from L2. ok is true when that answered the
// flight: a fresh page, a stale one to serve at once, or a Redis failure
// after which the flight fetched alone. A page L2 holds past its freshness
// becomes the held page when it is newer than the caller's.
func (f *flight) readShared(k sharedKeys, refresh bool) (_ result, ok bool, _ error) {
	c := f.c
	b, err := c.l2.get(f.ctx, k)
	switch {
	case err != nil:
		c.l2Failed(f.ctx, "read", err)
		r, err := f.fetchLocal()
		return r, true, err
	case b == nil:
		c.stats.l2Misses.Add(1)
		return result{}, false, nil
	}
	e, err := c.fromShared(b)
	if err != nil {
		c.stats.l2Corrupt.Add(1)
		return result{}, false, nil
	}
	switch e.stateSince(c.now(), f.since) {
	case fresh:
		c.stats.l2Hits.Add(1)
		c.store.put(f.key, e, c.lifetime(e))
		return result{e: e, st: HitL2}, true, nil
	case revalidate:
		c.stats.l2Stale.Add(1)
		if !refresh {
			// Served at once, as a stale page of L1 is, and refreshed in
			// the background: by this flight, so that the refresh starts
			// even when every caller has stopped waiting.
			c.store.put(f.key, e, c.lifetime(e))
			f.refreshShared(e)
			return result{e: e, st: StaleL2}, true, nil
		}
		if e.Stored.After(f.held.Stored) {
			f.held, f.heldL2 = e, true
		}
	case expired:
		c.stats.l2Stale.Add(1)
		if f.held == nil || e.Stored.After(f.held.Stored) {
			f.held, f.heldL2 = e, true
		}
	default:
		c.stats.l2Misses.Add(1)
	}
	return result{}, false, nil
}

// refreshShared starts the refresh of e, the stale page this flight
// serves from L2. The refresh is a flight of the same key, and this one
// still holds the key's place among the running flights: it gives it up
// first, or the refresh would join it and end with the stale page. A
// caller that comes from now on finds e in the store and serves it, or
// joins the refresh.
func (f *flight) refreshShared(e *Entry) {
	f.c.forget(f.key)
	f.c.refresh(f.ctx, f.key, e, f.fetch)
}

// leaseOrWait bids for the lease of the page: the winner fetches for the
// fleet; the others wait for the holder's page, bidding again when the
// lease comes free without one.
func (f *flight) leaseOrWait(k sharedKeys, refresh bool) (result, error) {
	c, l := f.c, f.c.l2
	waited := false
	var deadline time.Time
	for {
		token, holder, err := l.acquire(f.ctx, k)
		switch {
		case err != nil:
			c.l2Failed(f.ctx, "lease", err)
			return f.fetchLocal()
		case token != "":
			return f.fetchUnderLease(&leaseHeld{k, token})
		case refresh:
			return result{e: f.held, st: staleStatus(f.heldL2)}, nil
		}
		if !waited {
			waited = true
			deadline = time.Now().Add(l.lease)
			c.stats.l2LockWaits.Add(1)
		}
		r, end, err := f.await(k, holder, deadline)
		switch end {
		case waitAnswered:
			return r, err
		case waitLeaseFree:
			continue
		case waitFetchAlone:
			return f.fetchLocal()
		case waitTimedOut:
			c.stats.l2LockWaitTimeouts.Add(1)
			return f.fetchForFleet(&leaseHeld{k: k})
		}
	}
}

// answers reports whether a page of L2 answers the flight: fresh, and
// not older than its caller may take (GetSince).
func (f *flight) answers(e *Entry) bool {
	return e.stateSince(f.c.now(), f.since) == fresh
}

// fetchUnderLease looks in L2 once more, as the flight looks again in L1:
// the holder before this one may have stored the page and let the lease go
// between the read and the lease. Else it fetches for the fleet.
func (f *flight) fetchUnderLease(ls *leaseHeld) (result, error) {
	c := f.c
	if b, err := c.l2.get(f.ctx, ls.k); err == nil && b != nil {
		if e, err := c.fromShared(b); err == nil && f.answers(e) {
			c.finish(f.ctx, ls, nil, 0, nil) // let the lease go
			c.stats.l2Hits.Add(1)
			c.store.put(f.key, e, c.lifetime(e))
			return result{e: e, st: HitL2}, nil
		}
	}
	return f.fetchForFleet(ls)
}

// await waits for the holder's fetch, until deadline: woken by its notice,
// or by polling when none comes.
func (f *flight) await(k sharedKeys, holder string, deadline time.Time) (result, waitEnd, error) {
	c, l := f.c, f.c.l2
	wake, stop := l.watch(k.hash)
	defer stop()
	tick := time.NewTimer(pollInterval)
	defer tick.Stop()
	for {
		value, mark, cur, err := l.peek(f.ctx, k)
		if err != nil {
			c.l2Failed(f.ctx, "wait", err)
			return result{}, waitFetchAlone, nil
		}
		if value != nil {
			// The value present while the holder fetches is the old one, past
			// its TTL: only a fresh one is the holder's.
			if e, err := c.fromShared(value); err == nil && f.answers(e) {
				c.store.put(f.key, e, c.lifetime(e))
				return result{e: e, st: MissL2}, waitAnswered, nil
			}
		}
		if kind, payload, ok := readMarker(mark, holder); ok {
			if kind == markFailed {
				r, err := f.failed(fetcherr.Decode(payload))
				return r, waitAnswered, err
			}
			return result{}, waitFetchAlone, nil
		}
		switch cur {
		case holder:
		case "":
			// Released with nothing for us, or expired with its holder.
			return result{}, waitLeaseFree, nil
		default:
			holder = cur // a new holder: wait for it instead
		}
		left := time.Until(deadline)
		if left <= 0 {
			return result{}, waitTimedOut, nil
		}
		tick.Reset(min(pollInterval, left))
		select {
		case <-wake:
		case <-tick.C:
		case <-f.ctx.Done():
			return result{}, waitAnswered, f.ctx.Err()
		}
	}
}

// fetchForFleet fetches as fetchLocal does, then ends the lease: the page
// shared through L2, or a marker telling the waiters why not.
func (f *flight) fetchForFleet(ls *leaseHeld) (result, error) {
	c := f.c
	e, err := f.fetchEntry()
	if err != nil {
		if ls.token != "" {
			c.finish(f.ctx, ls, nil, 0, marker(ls.token, markFailed, fetcherr.Encode(err)))
		}
		return f.failed(err)
	}
	r := f.keep(e)
	if r.st == Bypass {
		c.unshared(f.ctx, ls)
		return r, nil
	}
	c.share(f.ctx, ls, e)
	return r, nil
}

// share stores e in L2 and ends the lease. The gzip form it stores is made
// here, once, and serves the L1 entry as well.
func (c *Cache) share(ctx context.Context, ls *leaseHeld, e *Entry) {
	body, identity := e.GzipBody(), false
	if body == nil {
		body, identity = e.Body(), true
	}
	if valueHeader+len(e.ETag)+len(body)+valueSum > c.cfg.Load().l2Max {
		c.unshared(ctx, ls)
		return
	}
	if c.finish(ctx, ls, encodeValue(e, body, identity), c.lifetime(e), nil) {
		c.stats.l2Stores.Add(1)
	}
}

// unshared ends the lease with a marker telling the waiters to fetch
// alone: the page is not shared (BYPASS, or too large for L2).
func (c *Cache) unshared(ctx context.Context, ls *leaseHeld) {
	if ls.token != "" {
		c.finish(ctx, ls, nil, 0, marker(ls.token, markAlone, nil))
	}
}

// finish stores value for ttl or mark, releases the lease and sends the
// notice; it reports whether Redis took them.
func (c *Cache) finish(ctx context.Context, ls *leaseHeld, value []byte, ttl time.Duration, mark []byte) bool {
	if ttl <= 0 {
		value = nil
	}
	if err := c.l2.finish(ctx, ls.k, ls.token, value, ttl, mark); err != nil {
		c.l2Failed(ctx, "store", err)
		return false
	}
	return value != nil
}

// l2Failed counts a failed Redis call; the flight goes on alone. Debug
// only: a Redis outage would otherwise log once per miss, and the counter
// and the client's breaker say it already.
func (c *Cache) l2Failed(ctx context.Context, op string, err error) {
	c.stats.l2Errors.Add(1)
	c.log.LogAttrs(ctx, slog.LevelDebug, "cache: shared tier failed; working alone", slog.String("op", op), slog.Any("error", err))
}

// fromShared builds the entry of a shared value.
func (c *Cache) fromShared(b []byte) (*Entry, error) {
	v, err := decodeValue(b)
	if err != nil {
		return nil, err
	}
	e := &Entry{
		ETag:      v.etag,
		Stored:    v.stored,
		TTL:       v.ttl,
		Immutable: v.immutable,
		gzipETag:  strings.TrimSuffix(v.etag, `"`) + `-gzip"`,
		swr:       v.swr,
		sie:       v.sie,
	}
	if v.identity {
		c.newForms(e, v.body, nil, v.idLen, false)
	} else {
		c.newForms(e, nil, v.body, v.idLen, false)
	}
	return e, nil
}
