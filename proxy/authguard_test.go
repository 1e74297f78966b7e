package proxy_test

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/limits"
	"tradergate/proxy/config"
)

// withAuthFailures sets limits.auth_failures, an anonymous allowance
// large enough to stay out of the way, and trusts loopback's
// X-Forwarded-For, so that a test can speak from several addresses.
func withAuthFailures(requests int64) edgeOption {
	return withConfig(func(c *config.Config) {
		c.Limits.AuthFailures = limits.Plan{Requests: requests, Window: time.Minute}
		c.Limits.Anonymous = limits.Plan{Requests: 1000, Window: time.Minute}
		c.Limits.TrustedProxies = []string{"127.0.0.1"}
	})
}

// counterValue reads an unlabelled counter of the edge's registry.
func counterValue(t *testing.T, e *edge, name string) float64 {
	t.Helper()
	return onlyMetric(t, e, name).GetCounter().GetValue()
}

// onlyMetric gathers the edge's registry and returns the one series of
// the unlabelled metric name.
func onlyMetric(t *testing.T, e *edge, name string) *dto.Metric {
	t.Helper()
	mfs, err := e.srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0]
		}
	}
	t.Fatalf("no unlabelled metric %s", name)
	return nil
}

// Key guessing is slowed: once an address has spent limits.auth_failures
// on wrong keys, no key is accepted from it, the right one included,
// until the window ends; other addresses are not touched.
func TestKeyGuessingLocksTheAddressOut(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	e := newEdge(t, withAuthFailures(5), withClock(clk.Now))
	tx := "/v1/tx/" + e.sim.TradeTxs()[0]
	from := func(addr, key string) *http.Response {
		resp, body := e.do(http.MethodGet, tx, "Authorization", "Bearer "+key, "X-Forwarded-For", addr)
		if resp.StatusCode == 429 {
			failure(t, resp, body, 429, "Rate limit exceeded")
		}
		return resp
	}
	const guesser, other = "192.0.2.7", "192.0.2.8"
	for i := range 5 {
		if resp := from(guesser, "guess-"+string(rune('a'+i))); resp.StatusCode != 401 {
			t.Fatalf("guess %d: %d, want 401", i, resp.StatusCode)
		}
	}
	resp := from(guesser, "guess-f")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit-Policy") == "" {
		t.Fatalf("guess past the allowance: %d, Retry-After %q, policy %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit-Policy"))
	}
	if resp := from(guesser, keyAll); resp.StatusCode != 429 {
		t.Fatalf("the right key from the locked-out address: %d, want 429", resp.StatusCode)
	}
	if resp := from(other, keyAll); resp.StatusCode != 200 {
		t.Fatalf("the right key from another address: %d, want 200", resp.StatusCode)
	}
	if got := counterValue(t, e, "tradergate_auth_failures_total"); got != 6 {
		t.Errorf("tradergate_auth_failures_total %v, want 6", got)
	}
	if got := counterValue(t, e, "tradergate_auth_lockouts_total"); got != 2 {
		t.Errorf("tradergate_auth_lockouts_total %v, want 2", got)
	}
	clk.Advance(time.Minute)
	if resp := from(guesser, keyAll); resp.StatusCode != 200 {
		t.Fatalf("the right key once the window ended: %d, want 200", resp.StatusCode)
	}
}

// With Redis the failures are counted once for the fleet: guesses spread
// over two replicas lock the address out on both.
func TestKeyGuessingCountedAcrossTheFleet(t *testing.T) {
	r := redistest.Start(t)
	a := newEdge(t, withAuthFailures(4), withRedis(r.Addr()))
	b := newEdge(t, withAuthFailures(4), withRedis(r.Addr()))
	tx := "/v1/tx/" + a.sim.TradeTxs()[0]
	for i := range 4 {
		e := []*edge{a, b}[i%2]
		if resp, _ := e.do(http.MethodGet, tx, "Authorization", "Bearer wrong", "X-Forwarded-For", "192.0.2.9"); resp.StatusCode != 401 {
			t.Fatalf("guess %d: %d, want 401", i, resp.StatusCode)
		}
	}
	for _, e := range []*edge{a, b} {
		if resp, _ := e.do(http.MethodGet, tx, "Authorization", "Bearer wrong", "X-Forwarded-For", "192.0.2.9"); resp.StatusCode != 429 {
			t.Fatalf("a fifth guess: %d, want 429", resp.StatusCode)
		}
		if resp, _ := e.do(http.MethodGet, tx, "Authorization", "Bearer "+keyAll, "X-Forwarded-For", "192.0.2.9"); resp.StatusCode != 429 {
			t.Fatalf("the right key after the fleet's lockout: %d, want 429", resp.StatusCode)
		}
	}
}
