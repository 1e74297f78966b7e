// Package orderbook rebuilds an outcome token's level-2 order book at a
// time T from the stored order book events, following the recipe of
// docs/CONTRACT.md (GET /v1/orderbook/events, rules 5 and 6): the latest
// `book` snapshot at or before T, then the `price_change` events after
// that snapshot's cursor up to T, in ascending order.
//
// The package is pure: it reads pages through a PageFunc (in the edge, its
// cached events endpoint) and holds no HTTP or cache of its own. Pages are
// decoded as they arrive into the book, so memory follows the number of
// levels in the book, not the number of events.
package orderbook

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Query is one request to the events endpoint, for a single token.
type Query struct {
	TokenID   string
	EventType string // "book" or "price_change"
	Order     string // "asc" or "desc"
	Cursor    string // "" for none
	To        int64  // inclusive upper bound on the event timestamp, Unix ms
	Limit     int    // 1 to maxPageSize
}

// PageFunc returns the variant A body of one events page:
// {"message":"OK","status_code":"1","data":{"items":[…],"nextCursor":…}}.
// Rebuild returns its errors unchanged. The body is only read until
// PageFunc is called again or Rebuild returns; Rebuild keeps no reference
// to it. Rebuild checks the body's structure and every value it uses, but
// not the JSON grammar inside members it skips: the edge's pages were
// validated by its rewrite (normalize) before they were cached.
type PageFunc func(ctx context.Context, q Query) ([]byte, error)

// maxPageSize is the largest page the events endpoint serves; Rebuild asks
// for it so that a rebuild costs as few (cached) pages as possible.
const maxPageSize = 10000

// defaultMaxEvents is Options.MaxEvents when zero.
const defaultMaxEvents = 200_000

// snapshotPageSize is the page size of the snapshot lookup on an aligned
// bound: the book events between at and the bound come first on those
// descending pages, read past until the first one at or before at.
const snapshotPageSize = 8

// Options tune one Rebuild.
type Options struct {
	// Depth is the number of levels kept per side, best first; 0 keeps all.
	Depth int
	// MaxEvents bounds the price changes a rebuild may read between the
	// snapshot and T; more is a *TooManyEventsError. 0: defaultMaxEvents.
	MaxEvents int
	// Align, with Settled, lets rebuilds at nearby times read the same
	// pages: the pages' upper bound `to` is T rounded up to a multiple of
	// Align (Unix ms) when that bound is settled (before Settled), and the
	// events after T on those pages are read past, never applied. A bound
	// not yet settled stays T: its page may still grow, and would be
	// cached briefly (docs/CONTRACT.md "Order book at T"). 0: pages are
	// bounded at T.
	Align time.Duration
	// Settled is the first Unix ms that is not settled: the cache's settle
	// window before now. Only an aligned bound before it is used.
	Settled int64
}

// pageBound is the upper bound of the pages a rebuild at at reads: at
// rounded up to a multiple of align when that is before settled (aligned),
// else at (see Options.Align).
func pageBound(at int64, align time.Duration, settled int64) (to int64, aligned bool) {
	a := align.Milliseconds()
	if a <= 0 || at < 0 || at > math.MaxInt64-a {
		return at, false
	}
	to = (at + a - 1) / a * a
	if to >= settled {
		return at, false
	}
	return to, true
}

// ErrNoSnapshot: the token has no book event at or before T, and price
// changes alone cannot rebuild a book (docs/CONTRACT.md, rule 6).
var ErrNoSnapshot = errors.New("orderbook: no book snapshot at or before the requested time")

// ErrBadPage is wrapped by the errors for a page that cannot be decoded or
// breaks the query it answers (another token, an event after T, events
// out of order, more items than asked for).
var ErrBadPage = errors.New("orderbook: invalid events page")

// TooManyEventsError: more than Max price changes lie between the snapshot
// and T. Rebuild fetches at most Max+1 of them to find out.
type TooManyEventsError struct{ Max int }

func (e *TooManyEventsError) Error() string {
	return "orderbook: more than " + strconv.Itoa(e.Max) + " price changes between the snapshot and the requested time"
}

// Rebuild returns tokenID's book at time at (Unix ms). It reads the latest
// book event at or before at, then pages the price changes after it with
// pages of maxPageSize, applying BUY changes to bids and SELL changes to
// asks: a sizeAfter of 0 removes the level, any other value replaces its
// size. Levels are identified by decimal value, never by float. The pages
// are bounded as Options.Align says; the answer is the same whichever
// bound they have.
//
// On error nothing is returned: ErrNoSnapshot, a *TooManyEventsError, an
// error wrapping ErrBadPage, ctx's error (checked before each page), or
// fetch's error unchanged.
func Rebuild(ctx context.Context, fetch PageFunc, tokenID string, at int64, opt Options) (*Book, error) {
	maxEvents := opt.MaxEvents
	if maxEvents <= 0 {
		maxEvents = defaultMaxEvents
	}
	to, aligned := pageBound(at, opt.Align, opt.Settled)
	r := newReader(tokenID, at, to)

	// (a) the latest snapshot at or before at: the first book event at or
	// before at of the descending pages up to the bound. On the exact
	// bound that is the first one.
	snapLimit := 1
	if aligned {
		snapLimit = snapshotPageSize
	}
	r.desc = true
	cursor := ""
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		body, err := fetch(ctx, Query{TokenID: tokenID, EventType: evBook, Order: "desc", Cursor: cursor, To: to, Limit: snapLimit})
		if err != nil {
			return nil, err
		}
		pg, err := r.page(body, snapLimit, evBook)
		if err != nil {
			return nil, fmt.Errorf("%w: snapshot page %d: %w", ErrBadPage, n, err)
		}
		if r.haveSnap {
			break
		}
		if pg.items == 0 || !pg.more {
			return nil, ErrNoSnapshot
		}
		cursor = r.nextCursor
	}
	r.desc, r.lastTs = false, r.snapTs

	// (b), (c) the price changes after the snapshot's cursor, up to at.
	// The last pages shrink so that no more than maxEvents+1 are fetched.
	// Pages end at the first change after at, or at the last page.
	cursor = r.snapCursor
	applied := 0
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		limit := min(maxPageSize, maxEvents+1-applied)
		body, err := fetch(ctx, Query{TokenID: tokenID, EventType: evChange, Order: "asc", Cursor: cursor, To: to, Limit: limit})
		if err != nil {
			return nil, err
		}
		pg, err := r.page(body, limit, evChange)
		if err != nil {
			return nil, fmt.Errorf("%w: price change page %d: %w", ErrBadPage, n, err)
		}
		applied += pg.items - pg.past
		if applied > maxEvents {
			return nil, &TooManyEventsError{Max: maxEvents}
		}
		if !pg.more || pg.past > 0 {
			break
		}
		if pg.items == 0 {
			// A cursor with nothing before it would page forever.
			return nil, fmt.Errorf("%w: price change page %d: empty page with a nextCursor", ErrBadPage, n)
		}
		cursor = r.nextCursor
	}

	b := &Book{
		TokenID:           tokenID,
		At:                at,
		SnapshotTimestamp: r.snapTs,
		EventsApplied:     applied,
		Bids:              r.bids.sorted(true, opt.Depth),
		Asks:              r.asks.sorted(false, opt.Depth),
	}
	b.Crossed = len(b.Bids) > 0 && len(b.Asks) > 0 &&
		compareCanonical(b.Bids[0].Price, b.Asks[0].Price) >= 0
	return b, nil
}
