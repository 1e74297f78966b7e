package stream

import (
	"net/url"
	"strings"
)

// paths are the stream paths, by the route they stream: the route's path
// with "/stream" added (docs/CONTRACT.md, "Streams").
var paths = map[string]string{
	"/v1/orderbook/stream":                             RouteOrderBook,
	"/v1/trader/{address}/activity/stream":             RouteActivity,
	"/v1/trader/{address}/deposits-withdrawals/stream": RouteTransfers,
}

// Match finds a stream path: the route it streams and its address.
func Match(path string) (name, address string, ok bool) {
	if !strings.HasSuffix(path, "/stream") {
		return "", "", false
	}
	if name, ok := paths[path]; ok {
		return name, "", true
	}
	rest, found := strings.CutPrefix(path, "/v1/trader/")
	if !found {
		return "", "", false
	}
	address, tail, found := strings.Cut(rest, "/")
	if !found || address == "" {
		return "", "", false
	}
	name, ok = paths["/v1/trader/{address}/"+tail]
	return name, address, ok
}

// params are the query parameters a stream takes, by route: its route's
// filters, and where to start (cursor, from or fromTimestamp). The rest
// are dropped, as unknown parameters are (docs/CONTRACT.md, "Query
// parameters").
var params = map[string][]string{
	RouteOrderBook: {"marketId", "conditionId", "tokenId", "eventType", "from", "cursor"},
	RouteActivity:  {"marketIds", "fromTimestamp", "cursor"},
	RouteTransfers: {"type", "minAmount", "fromTimestamp", "cursor"},
}

// filters are the filters of each route, the parts of its canonical
// stream.
var filters = map[string][]string{
	RouteOrderBook: {"marketId", "conditionId", "tokenId", "eventType"},
	RouteActivity:  {"marketIds"},
	RouteTransfers: {"type", "minAmount"},
}

// Filters are the parameters of route name that make its canonical
// stream.
func Filters(name string) []string { return filters[name] }

// StartParam is the parameter of route name that starts a stream at a
// time.
func StartParam(name string) string {
	if name == RouteOrderBook {
		return "from"
	}
	return "fromTimestamp"
}

// KeepParams is rawQuery with only the parameters stream route name
// takes, as they were sent. The caller has found every escape whole
// (route.CheckQuery).
func KeepParams(name, rawQuery string) string {
	keep := params[name]
	var b strings.Builder
	for piece := range strings.SplitSeq(rawQuery, "&") {
		n, _, _ := strings.Cut(piece, "=")
		if n, err := url.QueryUnescape(n); err == nil {
			for _, k := range keep {
				if n == k {
					if b.Len() > 0 {
						b.WriteByte('&')
					}
					b.WriteString(piece)
					break
				}
			}
		}
	}
	return b.String()
}
