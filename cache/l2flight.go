package cache

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// The flight of a key when the shared tier is on (l2.go): read L2, else
// take the lease and fetch, or wait for the holder's fetch.

// leaseHeld is what a flight that fetches for the fleet must finish: the
// lease token (empty when the flight fetches without it, after waiting in
// vain) and the keys to store the page under.
type leaseHeld struct {
	k     sharedKeys
	token string
}

// next is what a waiter does after await.
type next uint8

const (
	answered next = iota // await has the answer
	retake               // the lease is free and nothing was stored: bid again
	alone                // fetch without sharing: Redis failed, or the page is not shared
	timedOut             // waited the whole bound: fetch, and share the page
)

// sharedFlight is the flight of key after the L1 re-check, with held the
// page it may serve stale.
func (c *Cache) sharedFlight(ctx context.Context, key string, fetch Fetch, held *Entry, s *settings) (any, error) {
	if c.tracer != nil {
		var span trace.Span
		ctx, span = c.tracer.Start(ctx, "cache.l2")
		defer span.End()
	}
	l := c.l2
	k := l.keys(key)
	now := c.now()
	// A refresh never waits: when another replica holds the lease, the page
	// is being fetched, and the held one serves meanwhile.
	refresh := held != nil && held.state(now) == revalidate
	heldL2 := false
	b, err := l.get(ctx, k)
	switch {
	case err != nil:
		c.l2Failed(ctx, "read", err)
		return c.fetchLocal(ctx, key, fetch, held, false, nil)
	case b == nil:
		c.stats.l2Misses.Add(1)
	default:
		e, err := c.fromShared(b)
		if err != nil {
			c.stats.l2Corrupt.Add(1)
			break
		}
		switch e.state(now) {
		case fresh:
			c.stats.l2Hits.Add(1)
			c.store.put(key, e, c.lifetime(e))
			return result{e: e, st: HitL2}, nil
		case revalidate:
			c.stats.l2Stale.Add(1)
			if !refresh {
				// Served at once, as a stale page of L1 is; the callers start
				// the one refresh (miss).
				c.store.put(key, e, c.lifetime(e))
				return result{e: e, st: StaleL2, refresh: true}, nil
			}
			if e.Stored.After(held.Stored) {
				held, heldL2 = e, true
			}
		case expired:
			c.stats.l2Stale.Add(1)
			if held == nil || e.Stored.After(held.Stored) {
				held, heldL2 = e, true
			}
		default:
			c.stats.l2Misses.Add(1)
		}
	}

	waited := false
	var deadline time.Time
	for {
		token, holder, err := l.acquire(ctx, k)
		switch {
		case err != nil:
			c.l2Failed(ctx, "lease", err)
			return c.fetchLocal(ctx, key, fetch, held, heldL2, nil)
		case token != "":
			ls := &leaseHeld{k, token}
			// Look again under the lease, as the flight looks again in L1:
			// the holder before us may have stored the page and let the
			// lease go between our read and our lease.
			if b, err := l.get(ctx, k); err == nil && b != nil {
				if e, err := c.fromShared(b); err == nil && e.state(c.now()) == fresh {
					c.finish(ctx, ls, nil, 0, nil) // let the lease go
					c.stats.l2Hits.Add(1)
					c.store.put(key, e, c.lifetime(e))
					return result{e: e, st: HitL2}, nil
				}
			}
			return c.fetchLocal(ctx, key, fetch, held, heldL2, ls)
		case refresh:
			return result{e: held, st: staleStatus(heldL2)}, nil
		}
		if !waited {
			waited = true
			deadline = time.Now().Add(l.lease)
			c.stats.l2LockWaits.Add(1)
		}
		r, err, then := c.await(ctx, key, k, holder, deadline, held, heldL2)
		switch then {
		case answered:
			if err != nil {
				return nil, err
			}
			return r, nil
		case alone:
			return c.fetchLocal(ctx, key, fetch, held, heldL2, nil)
		case timedOut:
			c.stats.l2LockWaitTimeouts.Add(1)
			return c.fetchLocal(ctx, key, fetch, held, heldL2, &leaseHeld{k: k})
		}
	}
}

// await waits for the holder's fetch, until deadline: woken by its notice,
// or by polling when none comes.
func (c *Cache) await(ctx context.Context, key string, k sharedKeys, holder string, deadline time.Time, held *Entry, heldL2 bool) (result, error, next) {
	l := c.l2
	wake, stop := l.watch(k.hash)
	defer stop()
	tick := time.NewTimer(pollInterval)
	defer tick.Stop()
	for {
		value, mark, cur, err := l.peek(ctx, k)
		if err != nil {
			c.l2Failed(ctx, "wait", err)
			return result{}, nil, alone
		}
		if value != nil {
			// The value present while the holder fetches is the old one, past
			// its TTL: only a fresh one is the holder's.
			if e, err := c.fromShared(value); err == nil && e.state(c.now()) == fresh {
				c.store.put(key, e, c.lifetime(e))
				return result{e: e, st: MissL2}, nil, answered
			}
		}
		if kind, payload, ok := readMarker(mark, holder); ok {
			if kind == markFailed {
				v, err := c.failed(ctx, key, held, heldL2, l.decodeErr(payload))
				r, _ := v.(result)
				return r, err, answered
			}
			return result{}, nil, alone
		}
		switch cur {
		case holder:
		case "":
			// Released with nothing for us, or expired with its holder.
			return result{}, nil, retake
		default:
			holder = cur // a new holder: wait for it instead
		}
		left := time.Until(deadline)
		if left <= 0 {
			return result{}, nil, timedOut
		}
		tick.Reset(min(pollInterval, left))
		select {
		case <-wake:
		case <-tick.C:
		case <-ctx.Done():
			return result{}, ctx.Err(), answered
		}
	}
}

// fetchLocal fetches the page, stores it in L1 by policy and, when ls is
// not nil, shares it through L2 and ends the lease.
func (c *Cache) fetchLocal(ctx context.Context, key string, fetch Fetch, held *Entry, heldL2 bool, ls *leaseHeld) (any, error) {
	start := c.now()
	c.stats.fetches.Add(1)
	body, facts, err := fetch(ctx)
	if err != nil {
		if ls != nil && ls.token != "" {
			c.finish(ctx, ls, nil, 0, marker(ls.token, markFailed, c.l2.encodeErr(err)))
		}
		return c.failed(ctx, key, held, heldL2, err)
	}
	s := c.cfg.Load()
	p := s.policy(facts.Route)
	ttl, immutable := p.Classify(facts, start)
	e := c.newEntry(s, p, body, start, ttl, immutable)
	if ttl <= 0 {
		if ls != nil && ls.token != "" {
			c.finish(ctx, ls, nil, 0, marker(ls.token, markAlone, nil))
		}
		return result{e: e, st: Bypass}, nil
	}
	c.store.put(key, e, c.lifetime(e))
	if ls != nil {
		c.share(ctx, ls, e, s)
	}
	return result{e: e, st: Miss}, nil
}

// share stores e in L2 and ends the lease. The gzip form it stores is made
// here, once, and serves the L1 entry as well.
func (c *Cache) share(ctx context.Context, ls *leaseHeld, e *Entry, s *settings) {
	body, identity := e.GzipBody(), false
	if body == nil {
		body, identity = e.Body(), true
	}
	if valueHeader+len(e.ETag)+len(body)+valueSum > s.l2Max {
		if ls.token != "" {
			c.finish(ctx, ls, nil, 0, marker(ls.token, markAlone, nil))
		}
		return
	}
	if c.finish(ctx, ls, encodeValue(e, body, identity), c.lifetime(e), nil) {
		c.stats.l2Stores.Add(1)
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

// failed is the answer to a failed fetch: the held page when the error
// allows it (stale-if-error), else the error, which is never cached.
func (c *Cache) failed(ctx context.Context, key string, held *Entry, heldL2 bool, err error) (any, error) {
	now := c.now()
	if held != nil && held.servableOnError(now) && c.staleOK(err) {
		// The error is not returned, so it is logged.
		c.log.LogAttrs(ctx, slog.LevelWarn, "cache: fetch failed; the held page stays in use",
			slog.String("key", key), slog.Duration("age", held.Age(now)), slog.Any("error", err))
		return result{e: held, st: staleStatus(heldL2)}, nil
	}
	return nil, err
}

func staleStatus(fromL2 bool) Status {
	if fromL2 {
		return StaleL2
	}
	return Stale
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
