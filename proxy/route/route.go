// Package route is the /v1 contract as data: the route table, path
// matching, the query rules, and the canonical form of a request, which
// keys the cache and is what the edge sends upstream. It is pure: no
// server, no upstream, no HTTP library.
//
// The rules come from the contract as docs/CONTRACT.md writes it down.
package route

import (
	"strconv"
	"strings"

	"tradergate/normalize"
)

// The route table: one row per endpoint of docs/CONTRACT.md "Routes".
// Everything the edge knows about an endpoint lives in its row: the variant
// A path, the legacy path, the known query parameters with their rules, the
// page-size default, the body shape to rewrite and the item field that
// carries time (for the cache policy).

// Route names are stable identifiers: config keys (allowed routes, per-route
// cache policy), metric labels and the first part of every cache key.
const (
	OrderBookEvents      = "orderbook_events"
	Activity             = "activity"
	depositsWithdrawals  = "deposits_withdrawals"
	comboPositionsClosed = "combo_positions_closed"
	positionsClosed      = "positions_closed"
	positionsOpen        = "positions_open"
	tx                   = "tx"
	walletAddress        = "wallet_address"
	// orderBookBook is the edge's own route: the order book at a time T,
	// rebuilt from OrderBookEvents pages (docs/CONTRACT.md#orderbook-book).
	orderBookBook = "orderbook_book"
)

// pathKind says what the one path parameter of a route is.
type pathKind uint8

const (
	pathNone    pathKind = iota
	pathAddress          // 0x + 40 hex
	pathTxHash           // 0x + 64 hex, a 32-byte hash
)

// Route is one row of the table. Its fields are read by the cache policy,
// the upstream client and the rewrite; nothing writes them after Table.
type Route struct {
	Name string
	// Pattern is the variant A path; {address} or {txHash} marks the path
	// parameter.
	Pattern string
	// Legacy is the path below upstream.base_url (which ends in /open-api);
	// the legacy host serves the same paths under that prefix.
	Legacy string
	// Class, Shape and TimeField drive the rewrite and the cache policy.
	Class     normalize.Class
	Shape     normalize.Shape
	TimeField string
	// TimeUnitMs is true when TimeField (and the from/to bounds) are Unix
	// milliseconds (order book events) rather than seconds.
	TimeUnitMs bool
	// EdgeBuilt is true for a route the edge answers itself from other
	// routes' pages; it has no Legacy path and is never sent upstream.
	EdgeBuilt bool

	path pathKind
	// params are the query parameters the edge knows, in the canonical
	// order they are keyed and sent upstream. Anything else is dropped.
	params []param
	// check holds the rules that span several parameters; nil when none.
	check func(q *query) error
	segs  []string // Pattern split on "/", without the leading empty one
	index int      // position in the table
}

// Index is the route's position in the table, from 0: per-route arrays
// and bitsets (breakers, metric series, a key's allowed routes) use it.
func (r *Route) Index() int { return r.index }

// Parameter names the contract does not show are assumptions
// (docs/CONTRACT.md "Assumptions"): the filters of deposits-withdrawals and
// the page-size parameter of endpoints 3 to 6. They are named here, once.
const (
	assumedTransferType = "type"
	assumedFromTime     = "fromTimestamp"
	assumedToTime       = "toTimestamp"
	assumedMinAmount    = "minAmount"
	assumedPageSize     = "limit"
)

// Page sizes (docs/CONTRACT.md "Limits").
const (
	orderBookLimitDefault = 1000
	orderBookLimitMax     = 10000
	pageDefault           = 20
	pageMax               = 100
	// legacyActivityDefault is the legacy host's activity page size when
	// none is given (its guide says 50); requests on the legacy path get it.
	legacyActivityDefault = 50
	bookDepthMax          = 100000
)

// Table is the route table with its matcher. It is built fresh by
// NewTable (not a package variable), so nothing in the package is mutable
// shared state.
type Table struct {
	routes []*Route
	memo   *memo // the requests validated lately (memo.go)
}

// NewTable returns the route table.
func NewTable() *Table {
	cursor := param{name: "cursor", kind: kindCursor}
	marketIDs := param{name: "marketIds", kind: kindList}
	routes := []*Route{
		{
			Name:    OrderBookEvents,
			Pattern: "/v1/orderbook/events",
			Legacy:  "/v1/orderbook/events",
			params: []param{
				// Up to 20/20/50 values, comma-separated, repeated or both;
				// conditionId is case-insensitive.
				{name: "marketId", kind: kindList, max: 20},
				{name: "conditionId", kind: kindList, max: 20, fold: true},
				{name: "tokenId", kind: kindList, max: 50},
				{name: "eventType", kind: kindList, max: 2, enum: []string{"book", "price_change"}},
				{name: "from", kind: kindInt, bound: boundLower},
				{name: "to", kind: kindInt, bound: boundUpper},
				{name: "order", kind: kindEnum, enum: []string{"asc", "desc"}, def: "asc"},
				{name: "limit", kind: kindPageSize, min: 1, max: orderBookLimitMax, defInt: orderBookLimitDefault},
				cursor,
			},
			check:      checkOrderBook,
			Class:      normalize.ClassList,
			Shape:      normalize.OrderBook,
			TimeField:  "timestamp",
			TimeUnitMs: true,
		},
		{
			Name:    Activity,
			Pattern: "/v1/trader/{address}/activity",
			Legacy:  "/v1/trader/{address}/activity",
			path:    pathAddress,
			params: []param{
				marketIDs,
				{name: "txHash", kind: kindTxHash},
				{name: "fromBlock", kind: kindInt, bound: boundLower},
				{name: "toBlock", kind: kindInt, bound: boundUpper, block: true},
				{name: "fromTimestamp", kind: kindInt, bound: boundLower},
				{name: "toTimestamp", kind: kindInt, bound: boundUpper},
				cursor,
				// Above 100 is capped, not refused; the default is 20 here
				// and 50 on the legacy host, so the edge always sends it.
				{name: "limit", kind: kindPageSize, min: 1, max: pageMax, defInt: pageDefault, cap: true, legacyDef: legacyActivityDefault},
			},
			check:     checkRanges("fromBlock", "toBlock", "fromTimestamp", "toTimestamp"),
			Class:     normalize.ClassList,
			Shape:     normalize.Activity,
			TimeField: "blockTimestamp",
		},
		{
			Name:    depositsWithdrawals,
			Pattern: "/v1/trader/{address}/deposits-withdrawals",
			Legacy:  "/v1/trader/{address}/deposits-withdrawals",
			path:    pathAddress,
			params: []param{
				{name: assumedTransferType, kind: kindEnum, enum: []string{"deposit", "withdrawal"}},
				{name: assumedFromTime, kind: kindInt, bound: boundLower},
				{name: assumedToTime, kind: kindInt, bound: boundUpper},
				{name: assumedMinAmount, kind: kindDecimal},
				cursor,
				{name: assumedPageSize, kind: kindPageSize, min: 1, max: pageMax, defInt: pageDefault},
			},
			check:     checkRanges(assumedFromTime, assumedToTime),
			Class:     normalize.ClassList,
			Shape:     normalize.Transfers,
			TimeField: "blockTimestamp",
		},
		{
			Name:    comboPositionsClosed,
			Pattern: "/v1/trader/{address}/combo-positions/closed",
			Legacy:  "/v1/trader/{address}/combo-positions/closed",
			path:    pathAddress,
			params: []param{
				cursor, marketIDs,
				{name: assumedPageSize, kind: kindPageSize, min: 1, max: pageMax, defInt: pageDefault},
			},
			Class:     normalize.ClassList,
			Shape:     normalize.ComboPositions,
			TimeField: "recentTradeTime",
		},
		{
			Name:    positionsClosed,
			Pattern: "/v1/trader/{address}/positions/closed",
			Legacy:  "/v1/trader/{address}/positions/closed",
			path:    pathAddress,
			params: []param{
				cursor, marketIDs,
				{name: assumedPageSize, kind: kindPageSize, min: 1, max: pageMax, defInt: pageDefault},
			},
			Class:     normalize.ClassList,
			Shape:     normalize.Positions,
			TimeField: "recentTradeTime",
		},
		{
			Name:    positionsOpen,
			Pattern: "/v1/trader/{address}/positions/open",
			Legacy:  "/v1/trader/{address}/positions/open",
			path:    pathAddress,
			params: []param{
				cursor,
				{name: assumedPageSize, kind: kindPageSize, min: 1, max: pageMax, defInt: pageDefault},
			},
			// Open positions change with every trade: always fresh
			// (docs/ARCHITECTURE.md "Cache policy").
			Class:     normalize.ClassLive,
			Shape:     normalize.Positions,
			TimeField: "recentTradeTime",
		},
		{
			Name:    tx,
			Pattern: "/v1/tx/{txHash}",
			Legacy:  "/v1/tx/{txHash}",
			path:    pathTxHash,
			Class:   normalize.ClassLookup,
			Shape:   normalize.Transaction,
		},
		{
			Name:    walletAddress,
			Pattern: "/v1/trader/wallet-address/{address}",
			Legacy:  "/v1/trader/wallet-address/{address}",
			path:    pathAddress,
			Class:   normalize.ClassLookup,
			Shape:   normalize.WalletAddress,
		},
		{
			Name:      orderBookBook,
			Pattern:   "/v1/orderbook/book",
			EdgeBuilt: true,
			params: []param{
				{name: "tokenId", kind: kindList, max: 1},
				{name: "at", kind: kindInt},
				// depth 0 (absent): every level.
				{name: "depth", kind: kindPageSize, min: 1, max: bookDepthMax},
			},
			check: checkBook,
			Class: normalize.ClassLive,
			Shape: normalize.OrderBook,
		},
	}
	for i, r := range routes {
		r.index = i
		r.segs = strings.Split(strings.TrimPrefix(r.Pattern, "/"), "/")
		if len(r.segs) > maxSegments {
			panic("route: " + r.Pattern + " has more than maxSegments segments")
		}
		for j := range r.params {
			p := &r.params[j]
			p.defText, p.maxText = strconv.Itoa(p.defInt), strconv.Itoa(p.max)
			if p.legacyDef != 0 {
				p.legacyDefText = strconv.Itoa(p.legacyDef)
			}
		}
	}
	return &Table{routes: routes, memo: newMemo(memoSlots)}
}

// Routes lists the routes in table order; callers must not modify them.
func (t *Table) Routes() []*Route { return t.routes }

// ByName returns the named route, or nil.
func (t *Table) ByName(name string) *Route {
	for _, r := range t.routes {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Names lists the route names in table order.
func Names() []string {
	rs := NewTable().routes
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return names
}

// Match returns the route for a request path and its raw path parameter,
// or nil. The Go 1.22 ServeMux cannot hold this table:
// /v1/trader/wallet-address/{address} and /v1/trader/{address}/activity
// overlap on /v1/trader/wallet-address/activity and neither is more
// specific, so registration would panic. Literal segments win over a
// parameter, which resolves that one overlap the obvious way.
func (t *Table) Match(path string) (*Route, string) {
	if !strings.HasPrefix(path, "/") {
		return nil, ""
	}
	// The path is cut into segments once, and only routes with as many
	// segments are compared: matching runs on every request.
	var parts [maxSegments]string
	n := 0
	for rest := path[1:]; ; n++ {
		if n == len(parts) {
			return nil, "" // longer than any route
		}
		seg, after, more := strings.Cut(rest, "/")
		parts[n] = seg
		if !more {
			n++
			break
		}
		rest = after
	}
	var best *Route
	var bestParam string
	bestScore := -1
	for _, r := range t.routes {
		if len(r.segs) != n {
			continue
		}
		param, score, ok := matchSegs(r.segs, parts[:n])
		if ok && score > bestScore {
			best, bestParam, bestScore = r, param, score
		}
	}
	return best, bestParam
}

// maxSegments bounds the segments of a route's pattern (NewTable checks
// it): a path with more matches none.
const maxSegments = 8

// LegacyPrefix is where the legacy paths sit at the edge: the same paths
// as the /v1 routes, below it, as the legacy host serves them.
const LegacyPrefix = "/open-api"

// MatchLegacy is Match for a path on the legacy API (LegacyPrefix +
// Pattern). Only routes the legacy host has (not EdgeBuilt ones) match.
func (t *Table) MatchLegacy(path string) (*Route, string) {
	rest, ok := strings.CutPrefix(path, LegacyPrefix)
	if !ok {
		return nil, ""
	}
	r, param := t.Match(rest)
	if r == nil || r.EdgeBuilt {
		return nil, ""
	}
	return r, param
}

// matchSegs matches a path's segments against segs, as many as them; it
// returns the value of the one {param} segment and a score: the segment
// index where the parameter sits (a literal matched before a parameter is
// the more specific route), len(segs) when there is none. An empty
// segment (a doubled or trailing slash) matches neither a literal nor a
// parameter.
func matchSegs(segs, parts []string) (param string, score int, ok bool) {
	for i, seg := range segs {
		part := parts[i]
		if strings.HasPrefix(seg, "{") {
			if part == "" {
				return "", 0, false
			}
			param, score = part, i
			continue
		}
		if part != seg {
			return "", 0, false
		}
	}
	if param == "" {
		score = len(segs)
	}
	return param, score, true
}
