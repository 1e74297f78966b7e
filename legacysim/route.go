package legacysim

import "strings"

// route is one of the eight legacy endpoints, in the order and with the
// names of docs/CONTRACT.md#routes, as the counters of Stats.ByRoute and
// Faults.Route name them.
type route uint8

const (
	routeNone route = iota // unknown path: variant B 404
	routeOrderbook
	routeActivity
	routeTransfers
	routeCombos
	routeClosed
	routeOpen
	routeTx
	routeWallet
	numRoutes
)

func (r route) String() string {
	switch r {
	case routeOrderbook:
		return "orderbook_events"
	case routeActivity:
		return "activity"
	case routeTransfers:
		return "deposits_withdrawals"
	case routeCombos:
		return "combo_positions_closed"
	case routeClosed:
		return "positions_closed"
	case routeOpen:
		return "positions_open"
	case routeTx:
		return "tx"
	case routeWallet:
		return "wallet_address"
	}
	return ""
}

// basePath is the path prefix of the legacy host (docs/CONTRACT.md#routes:
// upstream.base_url ends in /open-api).
const basePath = "/open-api"

// matchRoute maps a request path to its route and path parameter (address
// or txHash). A hand-written matcher rather than ServeMux patterns:
// /v1/trader/wallet-address/{address} and /v1/trader/{address}/activity
// both match /v1/trader/wallet-address/activity, which ServeMux rejects as
// a conflict. The literal segment wins, so that path is wallet_address with
// the malformed address "activity" (a 400).
func matchRoute(path string) (route, string) {
	rest, ok := strings.CutPrefix(path, basePath+"/v1/")
	if !ok {
		return routeNone, ""
	}
	seg := strings.Split(rest, "/")
	for _, s := range seg {
		if s == "" {
			return routeNone, ""
		}
	}
	switch {
	case len(seg) == 2 && seg[0] == "orderbook" && seg[1] == "events":
		return routeOrderbook, ""
	case len(seg) == 2 && seg[0] == "tx":
		return routeTx, seg[1]
	case len(seg) < 3 || seg[0] != "trader":
		return routeNone, ""
	case len(seg) == 3 && seg[1] == "wallet-address":
		return routeWallet, seg[2]
	}
	addr := seg[1]
	switch strings.Join(seg[2:], "/") {
	case "activity":
		return routeActivity, addr
	case "deposits-withdrawals":
		return routeTransfers, addr
	case "combo-positions/closed":
		return routeCombos, addr
	case "positions/closed":
		return routeClosed, addr
	case "positions/open":
		return routeOpen, addr
	}
	return routeNone, ""
}
