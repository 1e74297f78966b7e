package normalize

// Class is the caching class of a route: which rule of the cache policy
// judges its pages (cache/policy.go, docs/ARCHITECTURE.md "Cache policy").
// proxy/route gives each route its class and cache judges by it; the type
// lives here, beside Shape, because both stand on this package and cache
// may not import proxy/.
type Class uint8

const (
	// ClassList: list pages that settle (order book events, activity,
	// deposits-withdrawals, closed positions, closed combo positions).
	ClassList Class = iota + 1
	// ClassLive: open positions, always fresh.
	ClassLive
	// ClassLookup: transaction detail and wallet mapping; found: immutable,
	// null: NegativeTTL.
	ClassLookup
)
