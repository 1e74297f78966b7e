package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/proxy/config"
	"tradergate/proxy/route"
)

// The faults of a network in between, made by Toxiproxy (in process, on
// loopback) between the edge and the legacy host, and between the
// replicas and Redis. proxy/fault_test.go makes the legacy host's own
// faults with legacysim.

// toxi is one Toxiproxy proxy in front of upstream (host:port).
type toxi struct {
	p *toxiproxy.Proxy
}

func newToxi(t *testing.T, upstream string) *toxi {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "tg", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &toxi{p: p}
}

// addr is where clients connect, the same across refuse and accept.
func (x *toxi) addr() string { return x.p.Listen }

// add puts a toxic on the proxy's connections (downstream: the answers)
// and returns its removal.
func (x *toxi) add(t *testing.T, typ, stream string, attrs map[string]any) (remove func()) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"type": typ, "stream": stream, "attributes": attrs})
	w, err := x.p.Toxics.AddToxicJson(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("toxic %s: %v", typ, err)
	}
	return sync.OnceFunc(func() {
		if err := x.p.Toxics.RemoveToxic(t.Context(), w.Name); err != nil {
			t.Errorf("remove toxic %s: %v", w.Name, err)
		}
	})
}

// refuse closes the listener (and the connections through it): dials are
// refused. accept listens again on the same address.
func (x *toxi) refuse() { x.p.Stop() }
func (x *toxi) accept(t *testing.T) {
	t.Helper()
	if err := x.p.Start(); err != nil {
		t.Fatal(err)
	}
}

// withToxiLegacy puts a Toxiproxy between the edge and its legacy host.
func withToxiLegacy(t *testing.T, out **toxi) edgeOption {
	return withConfig(func(c *config.Config) {
		u, err := url.Parse(c.Upstream.BaseURL)
		if err != nil {
			t.Fatal(err)
		}
		*out = newToxi(t, u.Host)
		u.Host = (*out).addr()
		c.Upstream.BaseURL = u.String()
	})
}

// jsonAnswer fails unless the answer is JSON: every answer of the edge is
// the contract's envelope, whatever happened on the way.
func jsonAnswer(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || !json.Valid(body) {
		t.Errorf("%s: %d %q, body %.80q: not JSON", what, resp.StatusCode, ct, body)
	}
}

// staleEdge is an edge behind a Toxiproxy holding one page, held past its
// TTL and stale-while-revalidate, inside stale-if-error.
func staleEdge(t *testing.T) (e *edge, x *toxi, held string) {
	t.Helper()
	clk := testkit.NewClock(time.Now())
	e = newEdge(t, withClock(clk.Now), withToxiLegacy(t, &x))
	held = activity(e, 0)
	if resp, _ := e.get(held); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d", resp.StatusCode)
	}
	clk.Advance(time.Minute)
	return e, x, held
}

// A hanging legacy host opens the route's breaker within a few seconds at
// the default breaker settings (slow_call), the calls outstanding end with
// it, and held pages are answered at once from then on.
func TestToxiLegacyHangOpensTheBreaker(t *testing.T) {
	e, x, held := staleEdge(t)

	x.add(t, "timeout", "downstream", map[string]any{"timeout": 0}) // hang: nothing comes back
	start := time.Now()
	const n = 30 // more than min_requests, each a page of its own
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, body := e.get(activity(e, 100+i))
			jsonAnswer(t, "uncached during the hang", resp, body)
			if resp.StatusCode != 503 && resp.StatusCode != 504 {
				t.Errorf("uncached during the hang: %d", resp.StatusCode)
			}
		})
	}
	testkit.Eventually(t, "the breaker open", func() bool { return e.srv.BreakerState(route.Activity) == "open" })
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("breaker open %v after the hang began; slow_call is 2s", took)
	}
	wg.Wait() // the outstanding calls ended with the opening, not at the timeout
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("hanging calls answered after %v", took)
	}
	t0 := time.Now()
	resp, body := e.get(held)
	jsonAnswer(t, "held page", resp, body)
	if took := time.Since(t0); resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "STALE" || took > 50*time.Millisecond {
		t.Errorf("held page with the route known to hang: %d %s after %v", resp.StatusCode, resp.Header.Get("X-Cache"), took)
	}
}

// A held page of a key whose fetch hangs, with the breaker still closed,
// is answered stale after cache.stale_after while the fetch goes on.
func TestToxiLegacyHangStaleAfter(t *testing.T) {
	e, x, held := staleEdge(t)
	remove := x.add(t, "timeout", "downstream", map[string]any{"timeout": 0})
	t.Cleanup(remove)
	start := time.Now()
	resp, body := e.get(held)
	jsonAnswer(t, "held page", resp, body)
	if took := time.Since(start); resp.StatusCode != 200 || resp.Header.Get("X-Cache") != "STALE" || took > 2*time.Second {
		t.Errorf("held page of a hanging fetch: %d %s after %v (stale_after 500ms)", resp.StatusCode, resp.Header.Get("X-Cache"), took)
	}
	// The fetch still runs: the next caller is answered at once.
	start = time.Now()
	if resp, _ := e.get(held); resp.Header.Get("X-Cache") != "STALE" || time.Since(start) > 50*time.Millisecond {
		t.Errorf("held page while its fetch runs: %s after %v", resp.Header.Get("X-Cache"), time.Since(start))
	}
	remove()
	x.refuse() // ends the hanging connection; the fetch fails, the page stays
	x.accept(t)
}

// The network's faults between the edge and the legacy host: each answer
// is JSON, with the status of its kind.
func TestToxiLegacyFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		toxic  string
		attrs  map[string]any
		refuse bool
		want   []int
	}{
		{"latency past the timeout", "latency", map[string]any{"latency": 1500}, false, []int{504}},
		{"reset by peer", "reset_peer", map[string]any{"timeout": 0}, false, []int{502}},
		{"body cut", "limit_data", map[string]any{"bytes": 300}, false, []int{502}},
		{"small segments", "slicer", map[string]any{"average_size": 16, "size_variation": 8, "delay": 10}, false, []int{200}},
		{"slow trickle", "bandwidth", map[string]any{"rate": 1}, false, []int{200, 504}},
		{"refused", "", nil, true, []int{502}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var x *toxi
			e := newEdge(t, withToxiLegacy(t, &x), withConfig(func(c *config.Config) {
				c.Upstream.Timeout = time.Second
				c.Upstream.Retry.MaxAttempts = 1
			}))
			if tc.refuse {
				x.refuse()
			} else {
				x.add(t, tc.toxic, "downstream", tc.attrs)
			}
			start := time.Now()
			resp, body := e.get(activity(e, 3))
			jsonAnswer(t, tc.name, resp, body)
			ok := false
			for _, s := range tc.want {
				ok = ok || resp.StatusCode == s
			}
			if !ok || time.Since(start) > 3*time.Second {
				t.Errorf("%d after %v, want one of %v within the timeout", resp.StatusCode, time.Since(start), tc.want)
			}
		})
	}
}

// Between the replicas and Redis: one long outage and three short ones
// in a row, dials refused. Every request is served; each key gets at most
// its local shares while Redis is out (limits.fleet_size 2: 2 x
// ceil(20/2)), Redis is counting again within a second of accepting
// connections, and exactly after. The edges' clock stands still, so that
// the key's window does not roll over (and its shares start again) in the
// middle of an outage.
func TestToxiRedisOutages(t *testing.T) {
	r := redistest.Start(t)
	x := newToxi(t, r.Addr())
	clk := testkit.NewClock(time.Now())
	fleet := fleetOf(t, 2, x.addr(), withClock(clk.Now), withLimitedKey(20, time.Minute), withConfig(func(c *config.Config) {
		c.Redis.Timeout = 100 * time.Millisecond
		c.Limits.FleetSize = 2
	}))
	get := func(i int) *http.Response {
		resp, body := fleet[i%2].do(http.MethodGet, "/v1/tx/"+fleet[0].sim.TradeTxs()[0], "Authorization", "Bearer "+keyLimited)
		jsonAnswer(t, "limited key", resp, body)
		return resp
	}
	counted := func(resp *http.Response) bool { return resp.Header.Get("X-Ratelimit-Remaining") != "" }
	testkit.Eventually(t, "Redis counts", func() bool { return counted(get(0)) && counted(get(1)) })

	for i, down := range []time.Duration{2 * time.Second, 300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond} {
		x.refuse()
		served := 0
		for end, n := time.Now().Add(down), 0; time.Now().Before(end) || n < 60; n++ {
			resp := get(n)
			if counted(resp) {
				continue // a call that went through before the refusal
			}
			switch resp.StatusCode {
			case 200:
				served++
			case 503: // past this replica's share
			default:
				t.Fatalf("outage %d: %d", i, resp.StatusCode)
			}
		}
		if served > 20 {
			t.Errorf("outage %d: %d served without Redis, want at most 2 x ceil(20/2)", i, served)
		}
		x.accept(t)
		back := time.Now()
		for j := 0; ; j++ {
			if counted(get(j)) && counted(get(j+1)) {
				break
			}
			if took := time.Since(back); took > time.Second {
				t.Fatalf("outage %d (%v): Redis not counting %v after it accepted connections", i, down, took)
			}
		}
		t.Logf("outage %d (%v): Redis counting again after %v", i, down, time.Since(back))
	}
}

// A Redis that hangs, is slow, or resets connections never holds a
// request past the bounds of its calls, and is used again once it is well.
// A request makes at most two Redis calls before it works alone: the
// quota's (redis.timeout; on_store_error applies when it fails) and the
// page's read from L2 (cache.l2.timeout, never below redis.timeout), after
// which the page is fetched unshared. The breaker opening cuts that to
// nothing, but each half-open probe pays the bound again.
func TestToxiRedisHangLatencyReset(t *testing.T) {
	r := redistest.Start(t)
	x := newToxi(t, r.Addr())
	fleet := fleetOf(t, 2, x.addr(), withConfig(func(c *config.Config) { c.Redis.Timeout = 100 * time.Millisecond }))
	cfg := fleet[0].cfg
	// slack is the legacy host's answer and the scheduling of a loaded
	// test machine, under -race.
	const slack = 400 * time.Millisecond
	bound := cfg.Redis.Timeout + max(cfg.Redis.Timeout, cfg.Cache.L2.Timeout) + slack
	if bound >= time.Second {
		t.Fatalf("bound %v: the test wants redis.timeout and cache.l2.timeout that keep a request under 1s", bound)
	}
	for _, tc := range []struct {
		name  string
		toxic string
		attrs map[string]any
	}{
		{"hang", "timeout", map[string]any{"timeout": 0}},
		{"latency", "latency", map[string]any{"latency": 300}},
		{"reset", "reset_peer", map[string]any{"timeout": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove := x.add(t, tc.toxic, "downstream", tc.attrs)
			var slowest time.Duration
			for i := range 40 {
				start := time.Now()
				resp, body := fleet[i%2].get(activity(fleet[0], i))
				took := time.Since(start)
				slowest = max(slowest, took)
				jsonAnswer(t, tc.name, resp, body)
				if resp.StatusCode != 200 || took > bound {
					t.Errorf("request %d: %d after %v, want 200 within %v (redis.timeout %v, cache.l2.timeout %v)",
						i, resp.StatusCode, took, bound, cfg.Redis.Timeout, cfg.Cache.L2.Timeout)
				}
			}
			t.Logf("slowest of 40: %v", slowest)
			remove()
			x.refuse() // drop the connections the toxic spoiled
			x.accept(t)
			testkit.Eventually(t, "Redis used again", func() bool {
				resp, _ := fleet[0].get("/v1/tx/" + fleet[0].sim.TradeTxs()[1])
				resp2, _ := fleet[1].get("/v1/tx/" + fleet[0].sim.TradeTxs()[1])
				return strings.Contains(resp2.Header.Get("Cache-Status"), "hit") && resp.StatusCode == 200
			})
		})
	}
}
