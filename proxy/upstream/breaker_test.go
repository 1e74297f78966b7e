package upstream

import (
	"context"
	"testing"
	"time"

	"tradergate/cache/configerr"
	"tradergate/internal/testkit"
	"tradergate/proxy/route"
)

func testBreaker(t *testing.T, c BreakerConfig) *routeBreaker {
	t.Helper()
	c.applyDefaults()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	routes := route.NewTable().Routes()
	return newBreakers(c, routes, nil)[routes[0].Index()]
}

// A hang gives no outcome at all: the calls' slow_call must open the
// breaker, and opening must end the calls still outstanding.
func TestBreakerSlowCallsOpenIt(t *testing.T) {
	b := testBreaker(t, BreakerConfig{MinRequests: 4, SlowCall: 30 * time.Millisecond})
	var ctxs []context.Context
	var calls []*breakerCall
	for range 4 {
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		call, err := b.allow(cancel)
		if err != nil {
			t.Fatal(err)
		}
		ctxs, calls = append(ctxs, ctx), append(calls, call)
	}
	testkit.Eventually(t, "the breaker open after slow calls", func() bool { return b.open() != nil })
	for i, ctx := range ctxs {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d not cancelled when the breaker opened", i)
		}
		if !calls[i].end() {
			t.Errorf("call %d: end does not say the breaker opened during it", i)
		}
		calls[i].record(ctx.Err()) // counted once, and not again
	}
	if _, err := b.allow(func() {}); err == nil {
		t.Error("an open breaker allowed a call")
	}
}

// A call that ended before the breaker opened is not cancelled by the
// opening, and its end says so.
func TestBreakerOpeningSparesEndedCalls(t *testing.T) {
	b := testBreaker(t, BreakerConfig{MinRequests: 3})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended, err := b.allow(cancel)
	if err != nil {
		t.Fatal(err)
	}
	if ended.end() {
		t.Error("end of a call before any opening says the breaker opened")
	}
	ended.record(nil)
	for range 2 {
		call, err := b.allow(func() {})
		if err != nil {
			t.Fatal(err)
		}
		call.end()
		call.record(mapStatus(503, "down", 0))
	}
	if b.open() == nil {
		t.Fatal("two failures of three calls did not open the breaker")
	}
	if ctx.Err() != nil {
		t.Error("the opening cancelled a call that had ended before it")
	}
}

// A fast success is not a slow call: its timer must not count later.
func TestBreakerFastCallsStayClosed(t *testing.T) {
	b := testBreaker(t, BreakerConfig{MinRequests: 2, SlowCall: 20 * time.Millisecond, HalfOpenProbes: 1})
	for range 10 {
		call, err := b.allow(func() {})
		if err != nil {
			t.Fatal(err)
		}
		call.end()
		call.record(nil)
	}
	// Past slow_call of every call: a timer that was not stopped would
	// have recorded ten failures by now.
	<-time.After(5 * 20 * time.Millisecond)
	if b.open() != nil {
		t.Fatal("successful calls opened the breaker")
	}
}

// A 401/403 refuses the edge's own key: a failure, deliberately; a 404 is
// the client's and is not.
func TestBreakerCountsCredentialRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		opens bool
	}{
		{"401 credential", mapStatus(401, "bad key", 0), true},
		{"403 credential", mapStatus(403, "forbidden", 0), true},
		{"404 refused", mapStatus(404, "no such wallet", 0), false},
		{"429 rate limited", mapStatus(429, "slow down", time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBreaker(t, BreakerConfig{MinRequests: 3})
			for range 3 {
				call, err := b.allow(func() {})
				if err != nil {
					t.Fatal(err)
				}
				call.end()
				call.record(tc.err)
			}
			if got := b.open() != nil; got != tc.opens {
				t.Errorf("open %v after 3 × %v, want %v", got, tc.err, tc.opens)
			}
		})
	}
}

func TestBreakerSlowCallValidated(t *testing.T) {
	c := BreakerConfig{SlowCall: 10 * time.Second}
	c.applyDefaults()
	var errs configerr.List
	errs.Append(c.validate())
	if len(errs) != 1 || errs[0].Path != "upstream.breaker.slow_call" {
		t.Errorf("slow_call = interval: %v", errs)
	}
}
