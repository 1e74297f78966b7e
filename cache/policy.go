package cache

import (
	"time"

	"tradergate/normalize"
)

// Facts are what the policy knows about one request and its page.
type Facts struct {
	// Route is the route name; it selects the per-route Policy.
	Route string
	// Class is the route's caching class: which rule below judges the page.
	Class normalize.Class
	// Cursor: the request names its page by cursor.
	Cursor bool
	// Upper is the request's inclusive upper bound (to, toTimestamp,
	// toBlock), when HasUpper.
	Upper    int64
	HasUpper bool
	// UpperIsBlock: Upper is a block height (toBlock), whose age the edge
	// cannot judge.
	UpperIsBlock bool
	// TimeUnit is the unit of Upper and Meta.MaxTime: time.Millisecond for
	// order book events, time.Second elsewhere (docs/CONTRACT.md#conventions). Zero:
	// time.Second.
	TimeUnit time.Duration
	// Meta is what the rewrite learnt of the page.
	Meta normalize.Meta
	// Report is not the policy's: it is what the Fetch tells the caller
	// that started its flight (Result.Report). A failed Fetch returns it
	// too; it is the only field read then.
	Report Report
}

// classify decides how long a page may be served and whether it is
// immutable, by docs/ARCHITECTURE.md "Cache policy":
//
//   - normalize.ClassLive is always fresh.
//   - normalize.ClassLookup: found is immutable; null gets NegativeTTL.
//   - normalize.ClassList: null data gets NegativeTTL; a page is immutable when (1) the
//     request pins a range (Cursor or HasUpper), (2) every item is older than
//     the settle window, and (3) the page cannot grow. Otherwise fresh.
//   - An unset or unknown class is fresh: never immutable by mistake.
//
// For (2): with item times (Meta.HasTime) the newest item must be settled;
// without them only an empty page or a settled upper bound proves it. For
// (3): a non-null nextCursor closes the page (docs/CONTRACT.md#pagination), and so does
// a settled upper bound, which a block height never is (its age is unknown).
//
// ttl <= 0 means "do not cache" (a figure turned off with a negative value);
// immutable is then false.
func (p Policy) classify(f Facts, now time.Time) (ttl time.Duration, immutable bool) {
	p = p.withDefaults()
	switch {
	case f.Class == normalize.ClassLive:
		return keep(p.FreshTTL, false)
	case f.Meta.DataNull:
		// docs/CONTRACT.md#envelopes: a lookup (or list) that found
		// nothing is a 200 with data null; it may be found seconds later.
		return keep(p.NegativeTTL, false)
	case f.Class == normalize.ClassLookup:
		// A transaction or a wallet mapping, once indexed, does not change.
		return keep(p.ImmutableTTL, true)
	case f.Class != normalize.ClassList:
		return keep(p.FreshTTL, false)
	}
	if !f.Cursor && !f.HasUpper {
		// The head of a list: new items arrive on it.
		return keep(p.FreshTTL, false)
	}
	unit := f.TimeUnit
	if unit <= 0 {
		unit = time.Second
	}
	cutoff := settledBefore(now, p.SettleWindow, unit)
	upperSettled := f.HasUpper && !f.UpperIsBlock && f.Upper < cutoff
	var allOld bool
	switch {
	case f.Meta.Items == 0:
		allOld = true
	case f.Meta.HasTime:
		allOld = f.Meta.MaxTime < cutoff
	default:
		// Items without (usable) times: only the bound speaks for them.
		allOld = upperSettled
	}
	cannotGrow := f.Meta.NextCursor || upperSettled
	if allOld && cannotGrow {
		return keep(p.ImmutableTTL, true)
	}
	return keep(p.FreshTTL, false)
}

// keep turns a figure switched off (negative) into "do not cache".
func keep(ttl time.Duration, immutable bool) (time.Duration, bool) {
	if ttl <= 0 {
		return 0, false
	}
	return ttl, immutable
}

// settledBefore returns, in unit, the first time that is not settled: an item
// stamped t (covering [t, t+unit)) is settled when t < settledBefore, i.e.
// the whole unit it stands for lies before now - window. Flooring keeps the
// judgement conservative by at most one unit.
func settledBefore(now time.Time, window, unit time.Duration) int64 {
	edge := now.Add(-window).UnixNano()
	u := int64(unit)
	q := edge / u
	if edge%u < 0 {
		q-- // floor, for times before 1970 (only ever in tests)
	}
	return q
}
