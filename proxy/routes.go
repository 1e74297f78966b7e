package proxy

import (
	"strings"

	"tradergate/cache"
	"tradergate/normalize"
)

// The route table: one row per endpoint of SPEC.md "Endpoints". Everything the
// edge knows about an endpoint lives in its row: the variant A path, the
// legacy path, the known query parameters with their rules, the page-size
// default, the body shape to rewrite and the item field that carries time
// (for the cache policy).

// Route names are stable identifiers: config keys (allowed routes, per-route
// cache policy), metric labels and the first part of every cache key.
const (
	RouteOrderBookEvents      = "orderbook_events"
	RouteActivity             = "activity"
	RouteDepositsWithdrawals  = "deposits_withdrawals"
	RouteComboPositionsClosed = "combo_positions_closed"
	RoutePositionsClosed      = "positions_closed"
	RoutePositionsOpen        = "positions_open"
	RouteTx                   = "tx"
	RouteWalletAddress        = "wallet_address"
)

// pathKind says what the one path parameter of a route is.
type pathKind uint8

const (
	pathNone    pathKind = iota
	pathAddress          // 0x + 40 hex (SPEC "Conventions")
	pathTxHash           // 0x + 64 hex, a 32-byte hash
)

// Route is one row of the table.
type Route struct {
	Name string
	// Pattern is the variant A path; {address} or {txHash} marks the path
	// parameter.
	Pattern string
	// Legacy is the path below upstream.base_url (which ends in /open-api);
	// the legacy host serves the same paths under that prefix (SPEC
	// "Endpoints").
	Legacy string
	Path   pathKind
	// Params are the query parameters the edge knows, in the canonical order
	// they are keyed and sent upstream. Anything else is dropped.
	Params []Param
	// Check holds the rules that span several parameters; nil when none.
	Check func(q *Query) error
	// Class, Shape and TimeField drive the rewrite and the cache policy.
	Class     cache.Class
	Shape     normalize.Shape
	TimeField string
	// TimeUnitMs is true when TimeField (and the from/to bounds) are Unix
	// milliseconds (order book events) rather than seconds.
	TimeUnitMs bool

	segs  []string // Pattern split on "/", without the leading empty one
	index int      // position in the table, for per-route bitsets and arrays
}

// Parameter names the spec does not show are assumptions (DESIGN.md
// "Decisions already taken"): the filters of deposits-withdrawals and the
// page-size parameter of endpoints 3 to 6. They are named here, once, and in
// the README.
const (
	assumedTransferType = "type"
	assumedFromTime     = "fromTimestamp"
	assumedToTime       = "toTimestamp"
	assumedMinAmount    = "minAmount"
	assumedPageSize     = "limit"
)

// Page sizes (SPEC "Limits").
const (
	orderBookLimitDefault = 1000
	orderBookLimitMax     = 10000
	pageDefault           = 20
	pageMax               = 100
)

// NewRoutes returns the route table. It is built fresh (not a package
// variable) so that nothing in the package is mutable shared state.
func NewRoutes() []*Route {
	cursor := Param{Name: "cursor", Kind: KindCursor}
	marketIDs := Param{Name: "marketIds", Kind: KindList}
	routes := []*Route{
		{
			Name:    RouteOrderBookEvents,
			Pattern: "/v1/orderbook/events",
			Legacy:  "/v1/orderbook/events",
			Params: []Param{
				// SPEC endpoint 1: up to 20/20/50 values, comma-separated,
				// repeated or both; conditionId is case-insensitive.
				{Name: "marketId", Kind: KindList, Max: 20},
				{Name: "conditionId", Kind: KindList, Max: 20, Fold: true},
				{Name: "tokenId", Kind: KindList, Max: 50},
				{Name: "eventType", Kind: KindList, Max: 2, Enum: []string{"book", "price_change"}},
				{Name: "from", Kind: KindInt, Bound: BoundLower},
				{Name: "to", Kind: KindInt, Bound: BoundUpper},
				{Name: "order", Kind: KindEnum, Enum: []string{"asc", "desc"}, Default: "asc"},
				{Name: "limit", Kind: KindPageSize, Min: 1, Max: orderBookLimitMax, DefaultInt: orderBookLimitDefault},
				cursor,
			},
			Check:      checkOrderBook,
			Class:      cache.ClassList,
			Shape:      normalize.OrderBook,
			TimeField:  "timestamp",
			TimeUnitMs: true,
		},
		{
			Name:    RouteActivity,
			Pattern: "/v1/trader/{address}/activity",
			Legacy:  "/v1/trader/{address}/activity",
			Path:    pathAddress,
			Params: []Param{
				marketIDs,
				{Name: "txHash", Kind: KindTxHash},
				{Name: "fromBlock", Kind: KindInt, Bound: BoundLower},
				{Name: "toBlock", Kind: KindInt, Bound: BoundUpper, Block: true},
				{Name: "fromTimestamp", Kind: KindInt, Bound: BoundLower},
				{Name: "toTimestamp", Kind: KindInt, Bound: BoundUpper},
				cursor,
				// SPEC endpoint 2: above 100 is capped, not refused; the
				// default is 20 here and 50 on the legacy host, so the edge
				// always sends it (DESIGN.md).
				{Name: "limit", Kind: KindPageSize, Min: 1, Max: pageMax, DefaultInt: pageDefault, Cap: true},
			},
			Check:     checkRanges("fromBlock", "toBlock", "fromTimestamp", "toTimestamp"),
			Class:     cache.ClassList,
			Shape:     normalize.Activity,
			TimeField: "blockTimestamp",
		},
		{
			Name:    RouteDepositsWithdrawals,
			Pattern: "/v1/trader/{address}/deposits-withdrawals",
			Legacy:  "/v1/trader/{address}/deposits-withdrawals",
			Path:    pathAddress,
			Params: []Param{
				{Name: assumedTransferType, Kind: KindEnum, Enum: []string{"deposit", "withdrawal"}},
				{Name: assumedFromTime, Kind: KindInt, Bound: BoundLower},
				{Name: assumedToTime, Kind: KindInt, Bound: BoundUpper},
				{Name: assumedMinAmount, Kind: KindDecimal},
				cursor,
				{Name: assumedPageSize, Kind: KindPageSize, Min: 1, Max: pageMax, DefaultInt: pageDefault},
			},
			Check:     checkRanges(assumedFromTime, assumedToTime),
			Class:     cache.ClassList,
			Shape:     normalize.Transfers,
			TimeField: "blockTimestamp",
		},
		{
			Name:    RouteComboPositionsClosed,
			Pattern: "/v1/trader/{address}/combo-positions/closed",
			Legacy:  "/v1/trader/{address}/combo-positions/closed",
			Path:    pathAddress,
			Params: []Param{
				cursor, marketIDs,
				{Name: assumedPageSize, Kind: KindPageSize, Min: 1, Max: pageMax, DefaultInt: pageDefault},
			},
			Class:     cache.ClassList,
			Shape:     normalize.ComboPositions,
			TimeField: "recentTradeTime",
		},
		{
			Name:    RoutePositionsClosed,
			Pattern: "/v1/trader/{address}/positions/closed",
			Legacy:  "/v1/trader/{address}/positions/closed",
			Path:    pathAddress,
			Params: []Param{
				cursor, marketIDs,
				{Name: assumedPageSize, Kind: KindPageSize, Min: 1, Max: pageMax, DefaultInt: pageDefault},
			},
			Class:     cache.ClassList,
			Shape:     normalize.Positions,
			TimeField: "recentTradeTime",
		},
		{
			Name:    RoutePositionsOpen,
			Pattern: "/v1/trader/{address}/positions/open",
			Legacy:  "/v1/trader/{address}/positions/open",
			Path:    pathAddress,
			Params: []Param{
				cursor,
				{Name: assumedPageSize, Kind: KindPageSize, Min: 1, Max: pageMax, DefaultInt: pageDefault},
			},
			// Open positions change with every trade: always fresh (DESIGN.md).
			Class:     cache.ClassLive,
			Shape:     normalize.Positions,
			TimeField: "recentTradeTime",
		},
		{
			Name:    RouteTx,
			Pattern: "/v1/tx/{txHash}",
			Legacy:  "/v1/tx/{txHash}",
			Path:    pathTxHash,
			Class:   cache.ClassLookup,
			Shape:   normalize.Transaction,
		},
		{
			Name:    RouteWalletAddress,
			Pattern: "/v1/trader/wallet-address/{address}",
			Legacy:  "/v1/trader/wallet-address/{address}",
			Path:    pathAddress,
			Class:   cache.ClassLookup,
			Shape:   normalize.WalletAddress,
		},
	}
	for i, r := range routes {
		r.index = i
		r.segs = strings.Split(strings.TrimPrefix(r.Pattern, "/"), "/")
	}
	return routes
}

// RouteNames lists the route names in table order.
func RouteNames() []string {
	rs := NewRoutes()
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return names
}

// router matches a request path against the table. The Go 1.22 ServeMux
// cannot hold this table: /v1/trader/wallet-address/{address} and
// /v1/trader/{address}/activity overlap on /v1/trader/wallet-address/activity
// and neither is more specific, so registration would panic. Literal segments
// win over a parameter, which resolves that one overlap the obvious way.
type router struct {
	routes []*Route
}

// match returns the route for path and the raw path parameter, or nil.
func (rt *router) match(path string) (*Route, string) {
	if !strings.HasPrefix(path, "/") {
		return nil, ""
	}
	path = path[1:]
	var best *Route
	var bestParam string
	bestScore := -1
	for _, r := range rt.routes {
		param, score, ok := matchSegs(r.segs, path)
		if ok && score > bestScore {
			best, bestParam, bestScore = r, param, score
		}
	}
	return best, bestParam
}

// matchSegs matches path (no leading slash) against segs without
// allocating; it returns the value of the one {param} segment and a score:
// the segment index where the parameter sits (a literal matched before a
// parameter is the more specific route), len(segs) when there is none.
func matchSegs(segs []string, path string) (param string, score int, ok bool) {
	last := len(segs) - 1
	for i, seg := range segs {
		var part string
		j := strings.IndexByte(path, '/')
		switch {
		case j < 0 && i == last:
			part, path = path, ""
		case j >= 0 && i != last:
			part, path = path[:j], path[j+1:]
		default:
			// Too few segments, or more (a trailing slash included).
			return "", 0, false
		}
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
