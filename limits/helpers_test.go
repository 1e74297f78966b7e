package limits

import (
	"context"
	"net/http"
	"net/netip"
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

// take charges one request to a fresh bucket named bucket at the
// limiter's clock, through TakeAt as the edge does.
func take(l *Limiter, bucket string, plan Plan, policy string) Decision {
	return l.TakeAt(bg, l.now(), NewBucket(bucket), plan, policy)
}

// setHeaders writes d's fields into h as the net/http front does: a field
// handed over as "" is removed.
func setHeaders(d Decision, h http.Header, now time.Time) {
	var buf []byte
	d.AppendHeaders(&buf, now, func(name, value string) {
		if value == "" {
			h.Del(name)
			return
		}
		h.Set(name, value)
	})
}

// clientIP is ClientIPFrom for a net/http request.
func clientIP(l *Limiter, r *http.Request) netip.Addr {
	return l.ClientIPFrom(parsePeer(r.RemoteAddr), r.Header.Values("X-Forwarded-For"))
}

// parsePeer reads http.Request.RemoteAddr ("ip:port", or a bare IP from
// some test servers).
func parsePeer(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalizeAddr(ap.Addr())
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalizeAddr(a)
	}
	return netip.Addr{}
}
