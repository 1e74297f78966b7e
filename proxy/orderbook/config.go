package orderbook

import "fmt"

// Config is the `orderbook:` section: the bounds of the edge's order book
// route (GET /v1/orderbook/book).
type Config struct {
	// MaxEvents is the most price changes one rebuild may read between the
	// snapshot and the requested time; a request past it is refused (422)
	// before the edge reads more. Zero: 200000.
	MaxEvents int `yaml:"max_events"`
}

// ApplyDefaults fills the zero fields with the defaults their comments name.
func (c *Config) ApplyDefaults() {
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultMaxEvents
	}
}

// Validate reports every problem, each naming its field path, joined.
func (c *Config) Validate() error {
	if c.MaxEvents < 1 || c.MaxEvents > 10_000_000 {
		return fmt.Errorf("orderbook.max_events: must be 1 to 10000000, got %d", c.MaxEvents)
	}
	return nil
}
