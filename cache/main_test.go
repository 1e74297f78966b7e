package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tradergate/internal/testkit"
	"tradergate/normalize"
)

// TestMain fails the package if any goroutine outlives the tests: flights,
// refreshes and ristretto's own goroutines must all end with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClock is the injected clock tests move by hand.
func newClock() *testkit.Clock { return testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

// newTestCache builds a cache on clk, closed at the end of the test.
func newTestCache(t testing.TB, cfg Config, clk *testkit.Clock, opt Options) *Cache {
	t.Helper()
	if clk != nil {
		opt.Now = clk.Now
	}
	c, err := New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// liveFacts are the facts of an always-fresh page on route "r".
var liveFacts = Facts{Route: "r", Class: normalize.ClassLive}

// counting returns a Fetch that answers body with facts and counts calls.
func counting(n *atomic.Int64, body string, facts Facts) Fetch {
	return func(context.Context, func() bool) ([]byte, Facts, error) {
		n.Add(1)
		return []byte(body), facts, nil
	}
}

func mustGet(t *testing.T, c *Cache, key string, fetch Fetch, want Status) *Entry {
	t.Helper()
	e, st, err := c.get(context.Background(), key, fetch)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if st != want {
		t.Fatalf("Get(%q): status %v, want %v", key, st, want)
	}
	return e
}
