package limits

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
)

// takeParallel fires n Takes at once against bucket and returns them.
func takeParallel(ls []*Limiter, n int, bucket string, plan Plan) []Decision {
	out := make([]Decision, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			out[i] = take(ls[i%len(ls)], bucket, plan, "free")
		}()
	}
	start.Done()
	wg.Wait()
	return out
}

// checkExact asserts that exactly plan.Requests of ds were allowed and that
// each remaining count from plan.Requests-1 down to 0 was handed out once
// (docs/CONTRACT.md "Limits" rule 1, and Remaining counting down one per request).
func checkExact(t *testing.T, ds []Decision, plan Plan) {
	t.Helper()
	seen := map[int64]int{}
	allowed := 0
	for _, d := range ds {
		if d.StoreErr != nil {
			t.Fatalf("store error: %v", d.StoreErr)
		}
		if d.Allowed {
			allowed++
			seen[d.Remaining]++
		} else if d.Remaining != 0 {
			t.Errorf("refused with Remaining %d, want 0", d.Remaining)
		}
	}
	if allowed != int(plan.Requests) || len(ds)-allowed != len(ds)-int(plan.Requests) {
		t.Fatalf("allowed %d, refused %d; want %d and %d", allowed, len(ds)-allowed, plan.Requests, len(ds)-int(plan.Requests))
	}
	for r := range plan.Requests {
		if seen[r] != 1 {
			t.Errorf("Remaining %d handed out %d times, want once", r, seen[r])
		}
	}
}

func TestTakeExactUnderConcurrency(t *testing.T) {
	plan := Plan{Requests: 50, Window: time.Minute}
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			// A fixed clock: a real one could cross a window boundary
			// mid-burst and legitimately allow more.
			clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
			l := newLimiter(t, Config{}, kind.opt(t, Options{Now: clk.Now}))
			checkExact(t, takeParallel([]*Limiter{l}, 200, "key:k1", plan), plan)
		})
	}
}

// TakeNAt charges n at once: Remaining counts them all, and a charge past
// the allowance is refused (and charged, like any refusal).
func TestTakeN(t *testing.T) {
	plan := Plan{Requests: 10, Window: time.Minute}
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
			l := newLimiter(t, Config{}, kind.opt(t, Options{Now: clk.Now}))
			b := NewBucket("key:n")
			for _, step := range []struct {
				n         int64
				allowed   bool
				remaining int64
			}{{1, true, 9}, {4, true, 5}, {5, true, 0}, {1, false, 0}} {
				d := l.TakeNAt(bg, clk.Now(), b, plan, "free", step.n)
				if d.StoreErr != nil || d.Allowed != step.allowed || d.Remaining != step.remaining {
					t.Fatalf("take %d: %+v; want allowed %v, remaining %d", step.n, d, step.allowed, step.remaining)
				}
			}
			c := NewBucket("key:over")
			if d := l.TakeNAt(bg, clk.Now(), c, plan, "free", 11); d.Allowed || d.Remaining != 0 {
				t.Fatalf("11 of 10 at once: %+v", d)
			}
		})
	}
}

// A kept Bucket (as the edge keeps one per key) names its counter once per
// window: every request of a window is charged to the same counter, even
// when many race over the window's first request, and the next window, or
// a reloaded plan with another length, starts a new count.
func TestKeptBucketAcrossWindows(t *testing.T) {
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	l := newLimiter(t, Config{}, Options{Now: clk.Now})
	b := NewBucket("key:kept")
	plan := Plan{Requests: 50, Window: time.Minute}
	var wg sync.WaitGroup
	allowed := make(chan bool, 200)
	for range 200 {
		wg.Go(func() { allowed <- l.TakeAt(bg, clk.Now(), b, plan, "free").Allowed })
	}
	wg.Wait()
	close(allowed)
	n := 0
	for ok := range allowed {
		if ok {
			n++
		}
	}
	if n != 50 {
		t.Fatalf("%d of 200 allowed in one window through one bucket, want 50", n)
	}
	d := l.TakeAt(bg, clk.Now(), b, plan, "free")
	clk.Set(d.Reset) // the next window's first instant
	if d := l.TakeAt(bg, clk.Now(), b, plan, "free"); !d.Allowed || d.Remaining != 49 {
		t.Fatalf("next window: %+v, want a new count", d)
	}
	// Another window length is another count, even for a window that
	// starts on the same second: every 2-minute window of a bucket starts
	// on one of its 1-minute windows' starts.
	longer := Plan{Requests: 50, Window: 2 * time.Minute}
	_, next := b.window(longer.Window, clk.Now())
	clk.Set(next)
	if d := l.TakeAt(bg, clk.Now(), b, plan, "free"); !d.Allowed || d.Remaining != 49 {
		t.Fatalf("a later window: %+v, want a new count", d)
	}
	if d := l.TakeAt(bg, clk.Now(), b, longer, "free"); !d.Allowed || d.Remaining != 49 {
		t.Fatalf("another window length: %+v, want a new count", d)
	}
	if d := l.TakeAt(bg, clk.Now(), b, plan, "free"); !d.Allowed || d.Remaining != 48 {
		t.Fatalf("back to the first length: %+v, want its count going on", d)
	}
}

// A bucket's window remembers its memory counter, but only for the store
// that made it: a bucket charged on two limiters (a test's, or a key kept
// across a rebuilt limiter) is counted by each store on its own.
func TestKeptBucketOnTwoMemoryStores(t *testing.T) {
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	a := newLimiter(t, Config{}, Options{Now: clk.Now})
	c := newLimiter(t, Config{}, Options{Now: clk.Now})
	plan := Plan{Requests: 10, Window: time.Minute}
	b := NewBucket("key:two")
	for range 3 {
		a.TakeAt(bg, clk.Now(), b, plan, "free")
	}
	if d := c.TakeAt(bg, clk.Now(), b, plan, "free"); d.Remaining != 9 {
		t.Fatalf("second store: remaining %d, want 9 (its own count)", d.Remaining)
	}
	if d := a.TakeAt(bg, clk.Now(), b, plan, "free"); d.Remaining != 6 {
		t.Fatalf("first store: remaining %d, want 6", d.Remaining)
	}
	// A new bucket of the same name finds the same counters.
	if d := a.TakeAt(bg, clk.Now(), NewBucket("key:two"), plan, "free"); d.Remaining != 5 {
		t.Fatalf("new bucket, first store: remaining %d, want 5", d.Remaining)
	}
}

func TestTwoLimitersShareRedis(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs func(t *testing.T) []string
	}{
		{"single", func(t *testing.T) []string { return []string{redistest.Start(t).Addr()} }},
		{"cluster", func(t *testing.T) []string { return redistest.StartCluster(t, 3).Addrs() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := tc.addrs(t)
			plan := Plan{Requests: 50, Window: time.Minute}
			clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
			// Two replicas: a client each, one Redis.
			a := newLimiter(t, Config{}, shared(t, addrs, countingStoreTimeout, Options{Now: clk.Now}))
			b := newLimiter(t, Config{}, shared(t, addrs, countingStoreTimeout, Options{Now: clk.Now}))

			ds := takeParallel([]*Limiter{a, b}, 200, "key:shared", plan)
			checkExact(t, ds, plan)
			perEdge := [2]int{}
			for i, d := range ds {
				if d.Allowed {
					perEdge[i%2]++
				}
			}
			t.Logf("allowed per edge: %v", perEdge)

			// Another bucket is not charged by this one.
			if d := take(a, "key:other", plan, "free"); !d.Allowed || d.Remaining != 49 {
				t.Fatalf("other bucket: %+v", d)
			}
		})
	}
}

func TestCloseLeavesSharedClientOpen(t *testing.T) {
	opt := shared(t, []string{redistest.Start(t).Addr()}, countingStoreTimeout, Options{})
	l, err := New(Config{}, nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := opt.Redis.Ping(bg).Err(); err != nil {
		t.Fatalf("the shared client after the limiter's Close: %v", err)
	}
}

// parseHeaders reads SetHeaders' output back as numbers.
func parseHeaders(t *testing.T, h http.Header) (limit, remaining, reset, retryAfter int64) {
	t.Helper()
	num := func(name string) int64 {
		v := h.Get(name)
		if v == "" {
			return -1
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q is not a number", name, v)
		}
		return n
	}
	return num("X-RateLimit-Limit"), num("X-RateLimit-Remaining"), num("X-RateLimit-Reset"), num("Retry-After")
}

func TestWindowReset(t *testing.T) {
	plan := Plan{Requests: 3, Window: 10 * time.Second}
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
			l := newLimiter(t, Config{}, kind.opt(t, Options{Now: clk.Now}))
			const bucket = "key:reset"

			var first Decision
			for i := range plan.Requests {
				d := take(l, bucket, plan, "free")
				if !d.Allowed || d.Remaining != plan.Requests-1-i {
					t.Fatalf("request %d: allowed %v remaining %d, want true %d", i, d.Allowed, d.Remaining, plan.Requests-1-i)
				}
				if i == 0 {
					first = d
				} else if !d.Reset.Equal(first.Reset) {
					t.Fatalf("Reset moved within a window: %v then %v", first.Reset, d.Reset)
				}
			}
			if first.Reset.Nanosecond() != 0 || !first.Reset.After(clk.Now()) || first.Reset.Sub(clk.Now()) > plan.Window {
				t.Fatalf("Reset %v is not a whole second within one window after %v", first.Reset, clk.Now())
			}

			// Spent: refused until the reset, with Retry-After pointing at it
			// (docs/CONTRACT.md "Limits" rules 1 and 2).
			for _, at := range []time.Time{clk.Now(), first.Reset.Add(-time.Nanosecond)} {
				clk.Set(at)
				d := take(l, bucket, plan, "free")
				if d.Allowed || d.Remaining != 0 || d.StoreErr != nil {
					t.Fatalf("at %v: %+v, want refused with 0 remaining", at, d)
				}
				h := http.Header{}
				setHeaders(d, h, at)
				limit, remaining, reset, retryAfter := parseHeaders(t, h)
				if limit != 3 || remaining != 0 || reset != first.Reset.Unix() {
					t.Fatalf("headers %v", h)
				}
				// Reset and Retry-After agree: now + Retry-After is the
				// reset, rounded up to the second.
				want := CeilSeconds(time.Unix(reset, 0).Sub(at))
				if retryAfter != max(want, 1) {
					t.Fatalf("at %v: Retry-After %d, X-RateLimit-Reset %d: want Retry-After %d", at, retryAfter, reset, want)
				}
				if got := h.Get("RateLimit"); got != `"free";r=0;t=`+strconv.FormatInt(retryAfter, 10) {
					t.Fatalf("RateLimit %q disagrees with Retry-After %d", got, retryAfter)
				}
			}

			// At the reset the key is served again, counting from the top.
			clk.Set(first.Reset)
			d := take(l, bucket, plan, "free")
			if !d.Allowed || d.Remaining != plan.Requests-1 {
				t.Fatalf("after reset: %+v", d)
			}
			if want := first.Reset.Add(plan.Window); !d.Reset.Equal(want) {
				t.Fatalf("next Reset %v, want %v", d.Reset, want)
			}
		})
	}
}

func TestRedisCountersExpire(t *testing.T) {
	srv := redistest.Start(t)
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	l := newLimiter(t, Config{}, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now}))
	plan := Plan{Requests: 5, Window: 10 * time.Second}
	d := take(l, "key:ttl", plan, "free")
	if !d.Allowed {
		t.Fatalf("%+v", d)
	}

	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	start := d.Reset.Add(-plan.Window)
	key := "tradergate:rl:" + counterKey("key:ttl", plan.Window, start)
	n, err := c.Get(bg, key).Int64()
	if err != nil || n != 1 {
		t.Fatalf("GET %s = %d, %v; want 1", key, n, err)
	}
	// Counters carry a TTL (window end + keyGrace + RedisTimeout), so Redis
	// never fills up with dead windows.
	ttl, err := c.PTTL(bg, key).Result()
	maxTTL := d.Reset.Sub(clk.Now()) + keyGrace + countingStoreTimeout
	if err != nil || ttl <= 0 || ttl > maxTTL {
		t.Fatalf("PTTL %s = %v, %v; want in (0, %v]", key, ttl, err, maxTTL)
	}
}

func TestMemoryStoreCleans(t *testing.T) {
	s := newMemoryStore(new(testkit.LogBuffer).Logger())
	defer s.close()
	if _, err := s.incr(bg, &windowKey{name: "old"}, 1, 1, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := s.incr(bg, &windowKey{name: "live"}, 1, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	// The store reads the wall clock: clean until the 10ms TTL has passed.
	testkit.Eventually(t, "the expired counter cleaned", func() bool {
		s.clean(new(testkit.LogBuffer).Logger())
		_, ok := s.counters.Load("old")
		return !ok
	})
	if _, ok := s.counters.Load("live"); !ok {
		t.Error("live counter dropped")
	}
}

func TestWindowBounds(t *testing.T) {
	now := t0.Add(1234 * time.Millisecond)
	phases := map[int64]bool{}
	for i := range 50 {
		bucket := "key:" + strconv.Itoa(i)
		start, end := NewBucket(bucket).window(time.Minute, now)
		if start.After(now) || !end.After(now) || end.Sub(start) != time.Minute || start.Nanosecond() != 0 {
			t.Fatalf("%s: window [%v, %v) does not hold %v", bucket, start, end, now)
		}
		// The same bucket gets the same window at any instant inside it.
		if s2, _ := NewBucket(bucket).window(time.Minute, end.Add(-time.Nanosecond)); !s2.Equal(start) {
			t.Fatalf("%s: window moved within itself", bucket)
		}
		if s3, _ := NewBucket(bucket).window(time.Minute, end); !s3.Equal(end) {
			t.Fatalf("%s: next window starts at %v, want %v", bucket, s3, end)
		}
		phases[start.Unix()%60] = true
	}
	// Buckets do not all reset on the same second.
	if len(phases) < 10 {
		t.Errorf("only %d distinct phases over 50 buckets", len(phases))
	}
}

func TestPlansReload(t *testing.T) {
	l := newLimiter(t, Config{}, Options{})
	if p, ok := l.Plan("free"); !ok || p.Requests != 60 {
		t.Fatalf("Plan(free) = %v, %v", p, ok)
	}
	plans := map[string]Plan{"pro": {Requests: 1200, Window: time.Minute}}
	l.SetPlans(plans)
	plans["pro"] = Plan{Requests: 1, Window: time.Second} // the limiter holds a copy
	if _, ok := l.Plan("free"); ok {
		t.Error("free survived the reload")
	}
	if p, _ := l.Plan("pro"); p.Requests != 1200 {
		t.Errorf("pro = %v", p)
	}

	// Reloading under load is safe (run with -race).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				if i%2 == 0 {
					l.SetPlans(map[string]Plan{"pro": {Requests: int64(j + 1), Window: time.Minute}})
				} else if p, ok := l.Plan("pro"); ok {
					take(l, "key:reload", p, "pro")
				}
			}
		}()
	}
	wg.Wait()
}

func TestTakeInvalidPlan(t *testing.T) {
	l := newLimiter(t, Config{}, Options{})
	d := take(l, "key:x", Plan{}, "broken")
	if d.Allowed || !errors.Is(d.StoreErr, errStoreUnavailable) {
		t.Fatalf("%+v", d)
	}
}

func TestAnonymousPlan(t *testing.T) {
	l := newLimiter(t, Config{}, Options{})
	if got := l.Anonymous(); got != defaultAnonymous {
		t.Fatalf("Anonymous() = %v", got)
	}
	l2 := newLimiter(t, Config{Anonymous: Plan{Requests: 5, Window: time.Second}}, Options{})
	if got := l2.Anonymous(); got.Requests != 5 {
		t.Fatalf("Anonymous() = %v", got)
	}
}
