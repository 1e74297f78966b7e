package proxy_test

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/legacysim"
	"tradergate/limits"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

const keyLimited = "test-key-limited"

// withLimitedKey adds a key whose own allowance overrides its plan's.
func withLimitedKey(requests int64, window time.Duration) edgeOption {
	return withConfig(func(c *config.Config) {
		c.Keys = append(c.Keys, config.KeyConfig{ID: "limited", SHA256: proxy.HashKey(keyLimited), Plan: "free",
			Routes: []string{"*"}, Limit: &limits.Plan{Requests: requests, Window: window}})
	})
}

// withRedis puts the limiter's counters in Redis. The store timeout is
// generous: these tests count, and a store call that outlasts 100ms on a
// loaded test machine would be served by the fail mode instead (tested on
// its own in TestRateLimitRedisDown).
func withRedis(addr string) edgeOption {
	return withConfig(func(c *config.Config) {
		c.Redis.Addrs = []string{addr}
		c.Redis.Timeout = 2 * time.Second
	})
}

// parallel sends n requests at once and counts the statuses.
func parallel(e *edge, n int, path string, headers ...string) map[int]int {
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, _ := e.do(http.MethodGet, path, headers...)
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

func TestRateLimitExactUnderConcurrency(t *testing.T) {
	for _, mode := range []string{"memory", "redis"} {
		t.Run(mode, func(t *testing.T) {
			opts := []edgeOption{withLimitedKey(50, time.Minute)}
			if mode == "redis" {
				opts = append(opts, withRedis(redistest.Start(t).Addr()))
			}
			e := newEdge(t, opts...)
			counts := parallel(e, 200, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer "+keyLimited)
			if counts[200] != 50 || counts[429] != 150 {
				t.Errorf("statuses %v, want exactly 50 served and 150 refused", counts)
			}
		})
	}
}

func TestRateLimitAcrossTwoEdges(t *testing.T) {
	r := redistest.Start(t)
	a := newEdge(t, withLimitedKey(20, time.Minute), withRedis(r.Addr()))
	b := newEdge(t, withLimitedKey(20, time.Minute), withRedis(r.Addr()))
	served := 0
	for i := range 40 {
		e := a
		if i%2 == 1 {
			e = b
		}
		resp, _ := e.do(http.MethodGet, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer "+keyLimited)
		if resp.StatusCode == 200 {
			served++
		}
	}
	if served != 20 {
		t.Errorf("two edges served %d of an allowance of 20", served)
	}
}

func TestRateLimitWindowAndHeaders(t *testing.T) {
	edgeClock := testkit.NewClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	e := newEdge(t, withClock(edgeClock.Now), withLimitedKey(3, time.Minute))
	auth := []string{"Authorization", "Bearer " + keyLimited}
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	paths := []string{tx, tx, "/v1/nothing"} // a hit and a 404 carry the fields too
	for i, p := range paths {
		resp, _ := e.do(http.MethodGet, p, auth...)
		h := resp.Header
		if h.Get("X-RateLimit-Limit") != "3" || h.Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) || h.Get("X-RateLimit-Reset") == "" {
			t.Errorf("request %d (%s, %d): limit %q remaining %q reset %q", i, p, resp.StatusCode,
				h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"))
		}
		if h.Get("RateLimit-Policy") != `"free";q=3;w=60` || h.Get("RateLimit") == "" {
			t.Errorf("IETF fields: %q %q", h.Get("RateLimit-Policy"), h.Get("RateLimit"))
		}
	}
	resp, body := e.do(http.MethodGet, tx, auth...)
	failure(t, resp, body, 429, "Rate limit exceeded")
	reset, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	retry, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	now := edgeClock.Now()
	wait := time.Unix(reset, 0).Sub(now)
	if retry < 1 || time.Duration(retry)*time.Second < wait || time.Duration(retry-1)*time.Second >= wait {
		t.Errorf("Retry-After %d does not agree with X-RateLimit-Reset %d at %v", retry, reset, now.Unix())
	}
	// docs/CONTRACT.md "Limits" rule 2: a retry before the reset is refused again.
	edgeClock.Advance(wait - time.Second)
	if resp, _ := e.do(http.MethodGet, tx, auth...); resp.StatusCode != 429 {
		t.Errorf("before the reset: %d", resp.StatusCode)
	}
	edgeClock.Advance(time.Second)
	resp, _ = e.do(http.MethodGet, tx, auth...)
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("after the reset: %d remaining %q", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
}

func TestRateLimitRedisDown(t *testing.T) {
	for _, mode := range []string{limits.OnStoreErrorAllow, limits.OnStoreErrorDeny} {
		t.Run(mode, func(t *testing.T) {
			r := redistest.Start(t)
			e := newEdge(t, withLimitedKey(100, time.Minute), withRedis(r.Addr()),
				withConfig(func(c *config.Config) { c.Limits.OnStoreError = mode }))
			auth := []string{"Authorization", "Bearer " + keyLimited}
			tx := "/v1/tx/" + e.sim.TradeTxs()[0]
			if resp, _ := e.do(http.MethodGet, tx, auth...); resp.StatusCode != 200 {
				t.Fatalf("with Redis: %d", resp.StatusCode)
			}
			r.Stop()
			for range 5 {
				start := time.Now()
				resp, body := e.do(http.MethodGet, tx, auth...)
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("request took %v with Redis down", took)
				}
				switch mode {
				case limits.OnStoreErrorAllow:
					if resp.StatusCode != 200 {
						t.Errorf("allow mode: %d %s", resp.StatusCode, body)
					}
				case limits.OnStoreErrorDeny:
					failure(t, resp, body, 503, "Rate limit unavailable")
				}
			}
		})
	}
}

func TestAnonymousBucketAndTrustedProxies(t *testing.T) {
	anon := withConfig(func(c *config.Config) { c.Limits.Anonymous = limits.Plan{Requests: 3, Window: time.Minute} })
	t.Run("bad keys are limited per address", func(t *testing.T) {
		e := newEdge(t, anon)
		for i := range 3 {
			resp, body := e.do(http.MethodGet, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer guess-"+strconv.Itoa(i))
			failure(t, resp, body, 401, "Missing or invalid API key")
			if resp.Header.Get("X-RateLimit-Limit") != "3" || resp.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) {
				t.Errorf("401 %d: limit %q remaining %q", i, resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"))
			}
		}
		resp, body := e.do(http.MethodGet, "/v1/tx/"+e.sim.TradeTxs()[0], "Authorization", "Bearer guess-4")
		failure(t, resp, body, 429, "Rate limit exceeded")
		// X-Forwarded-For from an untrusted peer changes nothing.
		resp, _ = e.do(http.MethodGet, "/v1/nothing", "X-Forwarded-For", "203.0.113.9")
		if resp.StatusCode != 429 {
			t.Errorf("spoofed X-Forwarded-For: %d", resp.StatusCode)
		}
		// A valid key has its own bucket.
		if resp, _ := e.get("/v1/tx/" + e.sim.TradeTxs()[0]); resp.StatusCode != 200 {
			t.Errorf("valid key after the address bucket is spent: %d", resp.StatusCode)
		}
	})
	t.Run("trusted proxy", func(t *testing.T) {
		e := newEdge(t, anon, withConfig(func(c *config.Config) { c.Limits.TrustedProxies = []string{"127.0.0.1/32", "::1/128"} }))
		for range 3 {
			e.do(http.MethodGet, "/v1/nothing", "X-Forwarded-For", "203.0.113.7")
		}
		if resp, _ := e.do(http.MethodGet, "/v1/nothing", "X-Forwarded-For", "203.0.113.7"); resp.StatusCode != 429 {
			t.Errorf("client behind the proxy after its allowance: %d", resp.StatusCode)
		}
		if resp, _ := e.do(http.MethodGet, "/v1/nothing", "X-Forwarded-For", "203.0.113.8"); resp.StatusCode != 401 {
			t.Errorf("another client behind the same proxy: %d", resp.StatusCode)
		}
	})
}

func TestShieldCapsLegacyConcurrency(t *testing.T) {
	e := newEdge(t, withConfig(func(c *config.Config) {
		c.Upstream.MaxConcurrent = 5
		c.Upstream.QueueTimeout = 20 * time.Second
	}))
	e.sim.SetFaults(legacysim.Faults{Latency: 50 * time.Millisecond})
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			// Distinct pages: every request is a miss of its own.
			resp, _ := e.get("/v1/trader/" + e.sim.Wallets()[0] + "/activity?limit=" + strconv.Itoa(i+1))
			if resp.StatusCode == 200 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	st := e.sim.Stats()
	if st.MaxInFlight > 5 || st.MaxInFlight < 1 || ok.Load() != 40 {
		t.Errorf("max in flight at the legacy host %d (cap 5); %d of 40 served", st.MaxInFlight, ok.Load())
	}

	t.Run("queue timeout", func(t *testing.T) {
		e := newEdge(t, withConfig(func(c *config.Config) {
			c.Upstream.MaxConcurrent = 1
			c.Upstream.QueueTimeout = 50 * time.Millisecond
			c.Upstream.Timeout = time.Second
		}))
		e.sim.SetFaults(legacysim.Faults{Hang: true})
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.get("/v1/trader/" + e.sim.Wallets()[0] + "/activity") // holds the only slot
		}()
		testkit.Eventually(t, "the slot to be taken", func() bool { return e.sim.Stats().InFlight == 1 })
		resp, body := e.get("/v1/trader/" + e.sim.Wallets()[1] + "/activity")
		failure(t, resp, body, 503, "Upstream busy")
		if resp.Header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
		<-done // the hung call ends at upstream.timeout
	})
}
