package limits

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
	"tradergate/proxy/fleet"
)

// slack is added to the Redis timeout in "no hang" checks: it absorbs scheduling
// under -race on a loaded machine; it does not measure speed. Without the
// bounds a call would wait go-redis's defaults (5s, 3 retries) or forever.
const slack = 2 * time.Second

// timedTake is Take with its duration.
func timedTake(l *Limiter, bucket string, plan Plan) (Decision, time.Duration) {
	start := time.Now()
	d := take(l, bucket, plan, "free")
	return d, time.Since(start)
}

func TestRedisKilledMidTest(t *testing.T) {
	srv := redistest.Start(t)
	plan := Plan{Requests: 100, Window: time.Minute}
	const bucket = "key:kid-7f3a" // must never appear in a log line
	clk := testkit.NewClock(t0)
	const timeout = 200 * time.Millisecond
	addrs := []string{srv.Addr()}

	var allowLog, denyLog testkit.LogBuffer
	allow := newLimiter(t, Config{OnStoreError: OnStoreErrorAllow}, shared(t, addrs, timeout, Options{Now: clk.Now, Logger: allowLog.Logger()}))
	deny := newLimiter(t, Config{OnStoreError: OnStoreErrorDeny}, shared(t, addrs, timeout, Options{Now: clk.Now, Logger: denyLog.Logger()}))

	for _, l := range []*Limiter{allow, deny} {
		if d := take(l, bucket, plan, "free"); !d.Allowed || d.StoreErr != nil {
			t.Fatalf("before the kill: %+v", d)
		}
	}

	srv.Stop()

	const n = 20
	for i := range n {
		for _, tc := range []struct {
			l    *Limiter
			want bool
		}{{allow, true}, {deny, false}} {
			d, took := timedTake(tc.l, bucket, plan)
			if took > timeout+slack {
				t.Fatalf("Take %d took %v with Redis down; the timeout is %v", i, took, timeout)
			}
			if d.Allowed != tc.want || !errors.Is(d.StoreErr, errStoreUnavailable) {
				t.Fatalf("Take %d: Allowed %v StoreErr %v; want %v and a store error", i, d.Allowed, d.StoreErr, tc.want)
			}
			if d.Reset.IsZero() || d.Limit != plan.Requests {
				t.Fatalf("Take %d: %+v, want Limit and Reset known without the store", i, d)
			}
		}
	}
	for name, l := range map[string]*Limiter{"allow": allow, "deny": deny} {
		if got := l.StoreErrors(); got < n {
			t.Errorf("%s: StoreErrors() = %d, want >= %d", name, got, n)
		}
	}
	// One line for the outage, not one per request (the clock stands still,
	// so the 10s log interval never elapses).
	for name, b := range map[string]*testkit.LogBuffer{"allow": &allowLog, "deny": &denyLog} {
		if got := b.Count("rate limit store failed"); got != 1 {
			t.Errorf("%s: %d failure log lines, want 1:\n%s", name, got, b)
		}
	}

	// Headers during the outage: what is known, nothing invented.
	d := take(deny, bucket, plan, "free")
	h := http.Header{}
	setHeaders(d, h, clk.Now())
	if h.Get("X-RateLimit-Remaining") != "" || h.Get("RateLimit") != "" {
		t.Errorf("remaining invented during an outage: %v", h)
	}
	if h.Get("X-RateLimit-Limit") != "100" || h.Get("X-RateLimit-Reset") == "" || h.Get("Retry-After") != "1" {
		t.Errorf("outage headers: %v", h)
	}

	srv.Restart()

	// Counting resumes on the restarted (empty) Redis: Remaining counts down
	// one per request again.
	for name, l := range map[string]*Limiter{"allow": allow, "deny": deny} {
		var last Decision
		testkit.Eventually(t, name+" uses Redis again", func() bool {
			last = take(l, bucket, plan, "free")
			return last.StoreErr == nil
		})
		for range 3 {
			d := take(l, bucket, plan, "free")
			if d.StoreErr != nil || !d.Allowed || d.Remaining != last.Remaining-1 {
				t.Fatalf("%s after restart: %+v, previous remaining %d", name, d, last.Remaining)
			}
			last = d
		}
	}
	for name, b := range map[string]*testkit.LogBuffer{"allow": &allowLog, "deny": &denyLog} {
		if b.Count("rate limit store answering again") != 1 {
			t.Errorf("%s: no recovery line:\n%s", name, b)
		}
		if strings.Contains(b.String(), "kid-7f3a") {
			t.Errorf("%s: a log line names the key:\n%s", name, b)
		}
	}
}

func TestRedisHangingIsBounded(t *testing.T) {
	addr := redistest.Stalled(t)
	const timeout = 100 * time.Millisecond
	var logs testkit.LogBuffer

	start := time.Now()
	l := newLimiter(t, Config{}, shared(t, []string{addr}, timeout, Options{Logger: logs.Logger()}))
	if took := time.Since(start); took > 3*timeout+slack {
		t.Fatalf("New took %v against a hanging Redis", took)
	}
	if logs.Count("unreachable at start") != 1 {
		t.Errorf("start failure not logged:\n%s", logs.String())
	}
	plan := Plan{Requests: 10, Window: time.Minute}
	for i := range 5 {
		d, took := timedTake(l, "key:slow", plan)
		if took > timeout+slack {
			t.Fatalf("Take %d took %v; the timeout is %v", i, took, timeout)
		}
		if !d.Allowed || d.StoreErr == nil {
			t.Fatalf("Take %d: %+v, want allowed with a store error", i, d)
		}
	}
}

func TestRedisStalledIsBounded(t *testing.T) {
	// Connected first, then every command stalls: the read deadline, not
	// the dial, has to bound Take, and the shared client's breaker has to
	// stop the edge from paying the timeout on every request.
	srv := redistest.Start(t)
	const timeout = 100 * time.Millisecond
	l := newLimiter(t, Config{OnStoreError: OnStoreErrorDeny}, shared(t, []string{srv.Addr()}, timeout, Options{}))
	plan := Plan{Requests: 10, Window: time.Minute}
	if d := take(l, "key:x", plan, "free"); d.StoreErr != nil {
		t.Fatal(d.StoreErr)
	}

	// CLIENT PAUSE holds every other client's commands, like a Redis stuck
	// on a slow command, a fork or a full disk.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	const pause = 3 * time.Second
	if err := c.Do(bg, "CLIENT", "PAUSE", pause.Milliseconds()).Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()

	for i := range fleet.TripAfter + 3 {
		d, took := timedTake(l, "key:x", plan)
		if took > timeout+slack {
			t.Fatalf("Take %d took %v against a stalled Redis; the timeout is %v", i, took, timeout)
		}
		if d.Allowed || !errors.Is(d.StoreErr, errStoreUnavailable) {
			t.Fatalf("Take %d: %+v, want refused with a store error (deny)", i, d)
		}
		if i >= fleet.TripAfter && time.Since(paused) < fleet.OpenFor && !errors.Is(d.StoreErr, fleet.ErrUnavailable) {
			t.Fatalf("Take %d: %v, want the breaker open after %d failures", i, d.StoreErr, fleet.TripAfter)
		}
	}

	c.Do(bg, "CLIENT", "UNPAUSE") // Redis 6.2+; older ones just wait out the pause
	testkit.Eventually(t, "the store is used again after the stall", func() bool {
		return take(l, "key:x", plan, "free").StoreErr == nil
	})
}

func TestRedisUnreachableAtStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop() // the address is known, nothing listens there
	var logs testkit.LogBuffer
	l := newLimiter(t, Config{}, shared(t, []string{srv.Addr()}, 0, Options{Logger: logs.Logger()}))
	if logs.Count("unreachable at start") != 1 {
		t.Errorf("start failure not logged:\n%s", logs.String())
	}
	plan := Plan{Requests: 10, Window: time.Minute}
	if d := take(l, "key:early", plan, "free"); !d.Allowed || d.StoreErr == nil {
		t.Fatalf("%+v, want allowed with a store error", d)
	}

	srv.Restart()
	testkit.Eventually(t, "the limiter connects once Redis is up", func() bool {
		return take(l, "key:early", plan, "free").StoreErr == nil
	})
	if d := take(l, "key:early", plan, "free"); d.StoreErr != nil || d.Remaining != plan.Requests-2 {
		t.Fatalf("%+v, want counting from Redis", d)
	}
}
