package normalize

import "strconv"

// Shape names the body layout of one endpoint (SHAPES.md numbering).
type Shape uint8

const (
	OrderBook      Shape = iota + 1 // data passes through byte for byte
	Activity                        // list of activity items
	Transfers                       // list of deposits and withdrawals
	ComboPositions                  // list of closed combo positions with legs
	Positions                       // open and closed positions
	Transaction                     // one transaction detail, or null
	WalletAddress                   // {"walletAddress": string or null}
)

var shapeNames = [...]string{
	OrderBook:      "OrderBook",
	Activity:       "Activity",
	Transfers:      "Transfers",
	ComboPositions: "ComboPositions",
	Positions:      "Positions",
	Transaction:    "Transaction",
	WalletAddress:  "WalletAddress",
}

func (s Shape) String() string {
	if s.valid() {
		return shapeNames[s]
	}
	return "Shape(" + strconv.Itoa(int(s)) + ")"
}

func (s Shape) valid() bool { return s >= OrderBook && s <= WalletAddress }

// Options select the rewrite of one endpoint's body.
type Options struct {
	Shape Shape
	// ShiftCents: upstream prices are cents (upstream.price_scale: cents);
	// shift price fields two places. False (price_scale: unit) leaves their
	// digits alone; JSON numbers still become strings either way. Order
	// book data is never shifted: its prices are 0..1 (SHAPES.md 1).
	ShiftCents bool
	// TimeField, for list shapes, names the item field whose greatest integer
	// value goes to Meta.MaxTime (e.g. "blockTimestamp"). "" skips that work.
	TimeField string
}

// Meta is what the cache policy needs to know about a page, gathered during
// the rewrite (docs/ARCHITECTURE.md "Cache policy").
type Meta struct {
	// DataNull: data was null (a transaction not indexed, or a list or
	// wallet endpoint that found nothing), or WalletAddress with
	// walletAddress null. docs/CONTRACT.md: such a 200 is not an error.
	DataNull bool
	// Items is the number of items of a list shape.
	Items int
	// NextCursor: data.nextCursor is a non-null string, so the page cannot
	// grow (docs/CONTRACT.md "Pagination").
	NextCursor bool
	// MaxTime is the greatest TimeField value among the items; meaningful
	// when HasTime.
	MaxTime int64
	// HasTime: TimeField was set, the page has items, and every item has
	// TimeField as an integer. One item without it clears HasTime, so the
	// policy never judges a page settled on the times of only some items.
	HasTime bool
}
