package limits

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"tradergate/limits/redistest"
)

// slack is added to StoreTimeout in "no hang" checks: it absorbs scheduling
// under -race on a loaded machine; it does not measure speed. Without the
// bounds a call would wait go-redis's defaults (5s, 3 retries) or forever.
const slack = 2 * time.Second

// timedTake is Take with its duration.
func timedTake(l *Limiter, bucket string, plan Plan) (Decision, time.Duration) {
	start := time.Now()
	d := l.Take(bg, bucket, plan, "free")
	return d, time.Since(start)
}

func TestRedisKilledMidTest(t *testing.T) {
	srv := redistest.Start(t)
	plan := Plan{Requests: 100, Window: time.Minute}
	const bucket = "key:kid-7f3a" // must never appear in a log line
	clk := newFakeClock(t0)
	cfg := Config{RedisURL: srv.URL(), StoreTimeout: 200 * time.Millisecond}

	var allowLog, denyLog logBuffer
	allowCfg, denyCfg := cfg, cfg
	allowCfg.OnStoreError, denyCfg.OnStoreError = OnStoreErrorAllow, OnStoreErrorDeny
	allow := newLimiter(t, allowCfg, Options{Now: clk.Now, Logger: allowLog.Logger()})
	deny := newLimiter(t, denyCfg, Options{Now: clk.Now, Logger: denyLog.Logger()})

	for _, l := range []*Limiter{allow, deny} {
		if d := l.Take(bg, bucket, plan, "free"); !d.Allowed || d.StoreErr != nil {
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
			if took > cfg.StoreTimeout+slack {
				t.Fatalf("Take %d took %v with Redis down; StoreTimeout is %v", i, took, cfg.StoreTimeout)
			}
			if d.Allowed != tc.want || !errors.Is(d.StoreErr, ErrStoreUnavailable) {
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
	for name, b := range map[string]*logBuffer{"allow": &allowLog, "deny": &denyLog} {
		if got := b.Count("rate limit store failed"); got != 1 {
			t.Errorf("%s: %d failure log lines, want 1:\n%s", name, got, b)
		}
	}

	// Headers during the outage: what is known, nothing invented.
	d := deny.Take(bg, bucket, plan, "free")
	h := http.Header{}
	d.SetHeaders(h, clk.Now())
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
		eventually(t, name+" uses Redis again", func() bool {
			last = l.Take(bg, bucket, plan, "free")
			return last.StoreErr == nil
		})
		for range 3 {
			d := l.Take(bg, bucket, plan, "free")
			if d.StoreErr != nil || !d.Allowed || d.Remaining != last.Remaining-1 {
				t.Fatalf("%s after restart: %+v, previous remaining %d", name, d, last.Remaining)
			}
			last = d
		}
	}
	for name, b := range map[string]*logBuffer{"allow": &allowLog, "deny": &denyLog} {
		if b.Count("rate limit store answering again") != 1 {
			t.Errorf("%s: no recovery line:\n%s", name, b)
		}
		if strings.Contains(b.String(), "kid-7f3a") {
			t.Errorf("%s: a log line names the key:\n%s", name, b)
		}
	}
}

// blackhole accepts connections and never answers: a Redis that hangs.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestRedisHangingIsBounded(t *testing.T) {
	addr := blackhole(t)
	cfg := Config{RedisURL: "redis://" + addr + "/0", StoreTimeout: 100 * time.Millisecond}
	var logs logBuffer

	start := time.Now()
	l := newLimiter(t, cfg, Options{Logger: logs.Logger()})
	if took := time.Since(start); took > 3*cfg.StoreTimeout+slack {
		t.Fatalf("New took %v against a hanging Redis", took)
	}
	if logs.Count("unreachable at start") != 1 {
		t.Errorf("start failure not logged:\n%s", logs.String())
	}
	plan := Plan{Requests: 10, Window: time.Minute}
	for i := range 5 {
		d, took := timedTake(l, "key:slow", plan)
		if took > cfg.StoreTimeout+slack {
			t.Fatalf("Take %d took %v; StoreTimeout is %v", i, took, cfg.StoreTimeout)
		}
		if !d.Allowed || d.StoreErr == nil {
			t.Fatalf("Take %d: %+v, want allowed with a store error", i, d)
		}
	}
}

func TestRedisStalledIsBounded(t *testing.T) {
	// Connected first, then every command stalls: the read deadline, not
	// the dial, has to bound Take, and the breaker has to stop the edge from
	// paying StoreTimeout on every request.
	srv := redistest.Start(t)
	cfg := Config{RedisURL: srv.URL(), StoreTimeout: 100 * time.Millisecond, OnStoreError: OnStoreErrorDeny}
	l := newLimiter(t, cfg, Options{})
	plan := Plan{Requests: 10, Window: time.Minute}
	if d := l.Take(bg, "key:x", plan, "free"); d.StoreErr != nil {
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

	for i := range storeTripAfter + 3 {
		d, took := timedTake(l, "key:x", plan)
		if took > cfg.StoreTimeout+slack {
			t.Fatalf("Take %d took %v against a stalled Redis; StoreTimeout is %v", i, took, cfg.StoreTimeout)
		}
		if d.Allowed || !errors.Is(d.StoreErr, ErrStoreUnavailable) {
			t.Fatalf("Take %d: %+v, want refused with a store error (deny)", i, d)
		}
		if i >= storeTripAfter && time.Since(paused) < storeOpenFor && !errors.Is(d.StoreErr, gobreaker.ErrOpenState) {
			t.Fatalf("Take %d: %v, want the breaker open after %d failures", i, d.StoreErr, storeTripAfter)
		}
	}

	c.Do(bg, "CLIENT", "UNPAUSE") // Redis 6.2+; older ones just wait out the pause
	eventually(t, "the store is used again after the stall", func() bool {
		return l.Take(bg, "key:x", plan, "free").StoreErr == nil
	})
}

func TestRedisUnreachableAtStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop() // the address is known, nothing listens there
	var logs logBuffer
	l := newLimiter(t, Config{RedisURL: srv.URL()}, Options{Logger: logs.Logger()})
	if logs.Count("unreachable at start") != 1 {
		t.Errorf("start failure not logged:\n%s", logs.String())
	}
	plan := Plan{Requests: 10, Window: time.Minute}
	if d := l.Take(bg, "key:early", plan, "free"); !d.Allowed || d.StoreErr == nil {
		t.Fatalf("%+v, want allowed with a store error", d)
	}

	srv.Restart()
	eventually(t, "the limiter connects once Redis is up", func() bool {
		return l.Take(bg, "key:early", plan, "free").StoreErr == nil
	})
	if d := l.Take(bg, "key:early", plan, "free"); d.StoreErr != nil || d.Remaining != plan.Requests-2 {
		t.Fatalf("%+v, want counting from Redis", d)
	}
}
