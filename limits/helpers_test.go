package limits

import (
	"context"
	"testing"
	"time"

	"tradergate/internal/testkit/redistest"
	"tradergate/proxy/fleet"
)

// storeKinds runs a test against the memory store and against a fresh
// redis-server of its own. Counting tests give Redis a generous timeout:
// they test counting, and the machine may be loaded.
var storeKinds = []struct {
	name string
	opt  func(t *testing.T, o Options) Options
}{
	{"memory", func(_ *testing.T, o Options) Options { return o }},
	{"redis", func(t *testing.T, o Options) Options {
		return shared(t, []string{redistest.Start(t).Addr()}, countingStoreTimeout, o)
	}},
}

const countingStoreTimeout = 10 * time.Second

// shared opens the replicas' Redis client on addrs, as the edge does from
// its redis section, and returns o using it. timeout is redis.timeout (zero:
// its default). The Conn is closed after the test, after the limiters that
// use it (t.Cleanup runs last-registered first).
func shared(t testing.TB, addrs []string, timeout time.Duration, o Options) Options {
	t.Helper()
	c, err := fleet.Open(fleet.Config{Addrs: addrs, Timeout: timeout}, func(string) string { return "" }, fleet.Options{})
	if err != nil {
		t.Fatalf("fleet.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Conn.Close: %v", err)
		}
	})
	o.Redis, o.RedisPrefix, o.RedisTimeout = c.Client(), c.Key("rl"), c.Timeout()
	return o
}

func newLimiter(t testing.TB, cfg Config, opt Options) *Limiter {
	t.Helper()
	l, err := New(cfg, map[string]Plan{"free": {Requests: 60, Window: time.Minute}}, opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

var bg = context.Background()

// t0 is a whole second, a quarter second before which tests start, so that
// rounding to whole seconds is exercised.
var t0 = time.Unix(1_800_000_000, 0)
