package orderbook

import (
	"time"

	"tradergate/cache/configerr"
)

// Config is the `orderbook:` section: the bounds of the edge's order book
// route (GET /v1/orderbook/book).
type Config struct {
	// MaxEvents is the most price changes one rebuild may read between the
	// snapshot and the requested time; a request past it is refused (422)
	// before the edge reads more. Zero: 200000.
	MaxEvents int `yaml:"max_events"`
	// Align is the span whose rebuilds share their pages: a settled time
	// T is read from pages bounded at T rounded up to a multiple of Align
	// (Options.Align). Zero: 1m. Negative: every page is bounded at T
	// exactly. At most 1h, in whole milliseconds.
	Align time.Duration `yaml:"align"`
}

// defaultAlign is Config.Align when zero.
const defaultAlign = time.Minute

// maxAlign bounds Align: the events between T and the bound are read in
// vain, and a wide span holds more of them.
const maxAlign = time.Hour

// ApplyDefaults fills the zero fields with the defaults their comments name.
func (c *Config) ApplyDefaults() {
	if c.MaxEvents == 0 {
		c.MaxEvents = defaultMaxEvents
	}
	if c.Align == 0 {
		c.Align = defaultAlign
	}
}

// Validate reports every problem, each naming its field path, joined.
func (c *Config) Validate() error {
	var errs configerr.List
	if c.MaxEvents < 1 || c.MaxEvents > 10_000_000 {
		errs.Add("orderbook.max_events", "must be 1 to 10000000, got %d", c.MaxEvents)
	}
	if c.Align > maxAlign || c.Align > 0 && c.Align%time.Millisecond != 0 {
		errs.Add("orderbook.align", "must be whole milliseconds, at most %v (negative: off), got %v", maxAlign, c.Align)
	}
	return errs.Err()
}
