//go:build poison

package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"tradergate/internal/poison"
	"tradergate/internal/testkit"
)

// A background refresh outlives the stale hit that started it, and the
// hit's exchange goes back to the pool when its answer is written: the
// refresh's Fetch must read copies only. Here a stale hit starts a
// refresh whose first legacy call is held until the hit's exchange has
// gone back (poisoned, under the tag), then failed with a 503, so that the
// retry builds its call again from what the refresh kept. With the copies
// made, every call carries the first request's path and id; with them
// left out on purpose (poison.SkipCopies), the retry reads the fill and
// the calls differ: the poisoning catches a missing copy through the
// whole way of a request, not only in a unit test.
func TestPoisonCatchesAMissingCopyOnTheWay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		skip   bool
		caught bool
	}{
		{"copied", false, false},
		{"copies left out", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			poison.SkipCopies(tc.skip)
			defer poison.SkipCopies(false)
			calls, want, broken := refreshCalls(t)
			intact := broken == "" && len(calls) == 3 && calls[0] == want && calls[1] == want && calls[2] == want
			if intact == tc.caught {
				t.Errorf("%s; legacy calls %q, want three of %q: %v", broken, calls, want, !tc.caught)
			}
			if tc.caught {
				t.Logf("caught: %s; legacy calls %q", broken, calls)
			}
		})
	}
}

// refreshCalls runs the stale hit and its held refresh, and returns the
// legacy calls made (path, query and request id), the call every one of
// them should be, and what went wrong on the way before them, if anything
// did (an answer other than the one expected).
func refreshCalls(t *testing.T) (calls []string, want, broken string) {
	clk := testkit.NewClock(time.Now())
	var (
		mu   sync.Mutex
		gate = make(chan struct{})
		held bool
	)
	e := newEdge(t, withLimitedKey(1<<40, time.Hour), withClock(clk.Now), withUpstream(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			wait := held
			held = false // only the refresh's first call is held
			calls = append(calls, r.URL.EscapedPath()+"?"+r.URL.RawQuery+" id="+r.Header.Get("X-Request-Id"))
			mu.Unlock()
			if wait {
				<-gate
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"success":false,"code":"503","message":"busy","data":null}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	wallet := e.sim.Wallets()[0]
	fast := e.srv.FastHandler()
	ctx := &fasthttp.RequestCtx{}
	readFastRequest(ctx, "/v1/trader/"+wallet+"/activity?limit=7", "X-Request-Id: first-request-0001")
	fast(ctx)
	want = "/open-api/v1/trader/" + wallet + "/activity?limit=7 id=first-request-0001"
	if got := string(ctx.Response.Header.Peek("X-Cache")); got != "MISS" {
		return nil, want, fmt.Sprintf("first answer: %d, X-Cache %q", ctx.Response.StatusCode(), got)
	}

	// Past the fresh TTL, inside stale-while-revalidate: served stale, and
	// a refresh starts in the background and waits at the gate, while the
	// stale hit's exchange goes back to the pool.
	clk.Advance(1500 * time.Millisecond)
	mu.Lock()
	held = true
	mu.Unlock()
	ctx.Response.Reset()
	readFastRequest(ctx, "/v1/trader/"+wallet+"/activity?limit=7", "X-Request-Id: first-request-0001")
	fast(ctx)
	if got := string(ctx.Response.Header.Peek("X-Cache")); got != "STALE" {
		close(gate)
		return nil, want, fmt.Sprintf("second answer: %d %q, X-Cache %q", ctx.Response.StatusCode(), ctx.Response.Body(), got)
	}
	testkit.Eventually(t, "the refresh to reach the legacy host", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == 2
	})
	close(gate)
	// The retry comes within the retry backoff; one whose call cannot be
	// built from garbage never comes, and the wait ends.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n >= 3 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(calls), want, ""
}
