package front

import (
	"math"
	"testing"

	"tradergate/cache"
)

// The default cap is a quarter of the memory limit at connBudget a
// connection, with a floor; the per-address cap a quarter of the total
// unless set, and -1 lifts it.
func TestConnLimits(t *testing.T) {
	var c Config
	c.ApplyDefaults()
	// server.memory_limit's default: 1.5 x the default cache + 32 MiB.
	const def = cache.DefaultMaxBytes + cache.DefaultMaxBytes/2 + 32<<20
	for _, tc := range []struct {
		name                 string
		total, perAddr       int
		limit                int64
		wantTotal, wantPerIP int
	}{
		{"from the process's limit", 0, 0, 1 << 30, 4096, 1024},
		{"no process limit: server.memory_limit's default", 0, 0, math.MaxInt64, int(def / 4 / connBudget), int(def/4/connBudget) / 4},
		{"a small limit: the floor", 0, 0, 64 << 20, minMaxConnections, minMaxConnections / 4},
		{"set", 100, 0, 1 << 30, 100, 25},
		{"set, per address set", 100, 7, 1 << 30, 100, 7},
		{"per address lifted", 100, -1, 1 << 30, 100, 0},
		{"a cap of 1", 1, 0, 1 << 30, 1, 1},
	} {
		c.MaxConnections, c.MaxConnectionsPerAddress = tc.total, tc.perAddr
		total, perAddr := connLimits(c, tc.limit, def)
		if total != tc.wantTotal || perAddr != tc.wantPerIP {
			t.Errorf("%s: connLimits = %d, %d; want %d, %d", tc.name, total, perAddr, tc.wantTotal, tc.wantPerIP)
		}
	}
	// What docs/CONFIGURATION.md states for the default memory limit.
	if got := defaultMaxConnections(def); got != 1664 {
		t.Errorf("default cap with the default memory limit: %d, docs say 1664", got)
	}
}
