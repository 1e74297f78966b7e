package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/cache/fetcherr"
	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
)

// Tests of the shared tier against real redis-server processes: several
// Caches, each its own L1, over one Redis, as replicas behind a balancer.

// fleet is n caches over one Redis, on one clock.
type fleet struct {
	srv *redistest.Server
	rdb *redis.Client
	clk *testkit.Clock
	cs  []*Cache
}

// testL2Prefix starts the Redis keys of the tests' fleets.
const testL2Prefix = "tradergate:page:"

func newFleet(t testing.TB, n int, cfg Config, opt Options) *fleet {
	t.Helper()
	f := &fleet{srv: redistest.Start(t), clk: newClock()}
	f.rdb = redis.NewClient(&redis.Options{
		Addr:        f.srv.Addr(),
		MaxRetries:  -1, // a failed call is the cache's to handle
		DialTimeout: 200 * time.Millisecond,
	})
	t.Cleanup(func() { _ = f.rdb.Close() }) // after the caches' Close (LIFO)
	opt.L2 = f.rdb
	if opt.L2Prefix == "" {
		opt.L2Prefix = testL2Prefix
	}
	if opt.L2Timeout == 0 {
		opt.L2Timeout = time.Second // -race on a shared machine
	}
	if opt.LeaseTimeout == 0 {
		opt.LeaseTimeout = 5 * time.Second
	}
	for range n {
		f.cs = append(f.cs, newTestCache(t, cfg, f.clk, opt))
	}
	return f
}

// barrierAll sets one barrier over every cache of f.
func (f *fleet) barrierAll(n int64) <-chan struct{} {
	return waiting(n, f.cs...)
}

func (f *fleet) stats() (s Stats) {
	for _, c := range f.cs {
		x := c.Stats()
		s.L2Hits += x.L2Hits
		s.L2Misses += x.L2Misses
		s.L2Stale += x.L2Stale
		s.L2Errors += x.L2Errors
		s.L2Corrupt += x.L2Corrupt
		s.L2Stores += x.L2Stores
		s.L2LockWaits += x.L2LockWaits
		s.L2LockWaitTimeouts += x.L2LockWaitTimeouts
		s.Fetches += x.Fetches
	}
	return s
}

// holdUntilWaiting gates the holder's fetch: hold blocks it until the
// test goroutine calls release, which waits until every local caller has
// joined a flight (all) and the flights of the other replicas wait on the
// holder's lease, so that none comes late and finds the lease free. A
// test that fails first still lets the fetch go.
func (f *fleet) holdUntilWaiting(t *testing.T, all <-chan struct{}) (hold, release func()) {
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	release = func() {
		t.Helper()
		testkit.Eventually(t, "every caller to join a flight", func() bool {
			select {
			case <-all:
				return true
			default:
				return false
			}
		})
		testkit.Eventually(t, "the other replicas to wait on the lease", func() bool {
			return f.stats().L2LockWaits >= uint64(len(f.cs)-1)
		})
		open()
	}
	return func() { <-gate }, release
}

// TestL2FleetCoalesce: 150 concurrent Gets of one cold key, spread round
// robin over 3 caches, make exactly one fetch; the holder's callers get
// MISS, the other replicas' callers MISS from L2 (collapsed).
func TestL2FleetCoalesce(t *testing.T) {
	const n = 150
	f := newFleet(t, 3, Config{}, Options{})
	all := f.barrierAll(n)
	hold, release := f.holdUntilWaiting(t, all)
	var fetches atomic.Int64
	want := page(20<<10, 9)
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
		fetches.Add(1)
		hold()
		return want, liveFacts, nil
	}
	var wg sync.WaitGroup
	var local, collapsed atomic.Int64
	for i := range n {
		wg.Go(func() {
			e, st, err := f.cs[i%3].get(context.Background(), "k", fetch)
			switch {
			case err != nil:
				t.Errorf("Get: %v", err)
				return
			case st == Miss:
				local.Add(1)
			case st == MissL2:
				collapsed.Add(1)
			default:
				t.Errorf("status %v", st)
			}
			if !bytes.Equal(e.Body(), want) {
				t.Error("wrong body")
			}
		})
	}
	release()
	wg.Wait()
	s := f.stats()
	if fetches.Load() != 1 || local.Load() != n/3 || collapsed.Load() != 2*n/3 {
		t.Errorf("fetches %d, MISS %d, MISS from L2 %d; want 1, %d, %d", fetches.Load(), local.Load(), collapsed.Load(), n/3, 2*n/3)
	}
	if s.L2Stores != 1 || s.L2LockWaits != 2 || s.L2Misses != 3 || s.L2Errors != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestL2Hit: a page fetched through one replica is served by the others
// from L2, with its Stored time and ETag, in both forms; then from their L1.
func TestL2Hit(t *testing.T) {
	f := newFleet(t, 3, Config{}, Options{})
	var fetches atomic.Int64
	body := page(20<<10, 1)
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) { fetches.Add(1); return body, liveFacts, nil }
	orig := mustGet(t, f.cs[0], "k", fetch, Miss)
	f.clk.Advance(300 * time.Millisecond)
	for _, c := range f.cs[1:] {
		e := mustGet(t, c, "k", fetch, HitL2)
		if !e.Stored.Equal(orig.Stored) || e.ETag != orig.ETag || e.GzipETag() != orig.GzipETag() || e.TTL != orig.TTL {
			t.Errorf("L2 entry %v %s %s, want %v %s", e.Stored, e.ETag, e.GzipETag(), orig.Stored, orig.ETag)
		}
		if !bytes.Equal(e.GzipBody(), orig.GzipBody()) || !bytes.Equal(e.Body(), body) {
			t.Error("forms differ")
		}
		if e.FreshFor(f.clk.Now()) != 700*time.Millisecond {
			t.Errorf("fresh for %v: L1 must get the remaining lifetime", e.FreshFor(f.clk.Now()))
		}
		mustGet(t, c, "k", fetch, Hit)
	}
	if fetches.Load() != 1 {
		t.Errorf("fetches %d", fetches.Load())
	}
	if !HitL2.L2() || Hit.L2() || HitL2.String() != "HIT" || StaleL2.String() != "STALE" || MissL2.String() != "MISS" {
		t.Error("status names")
	}
	// Nothing of the request is readable in Redis.
	keys, err := f.rdb.Keys(context.Background(), "*").Result()
	if err != nil || len(keys) != 1 || !strings.HasPrefix(keys[0], testL2Prefix+"{") || strings.Contains(keys[0], "k}") || len(keys[0]) != len(testL2Prefix)+34+1 {
		t.Errorf("keys %q %v", keys, err)
	}
}

// TestL2HolderFails: the holder's fetch fails; its waiters on the other
// replicas get the error, as the failure notice carries it (what a client
// may learn: its reason and retry hint, not its cause), or the stale page
// they can serve, and make no fetch of their own.
func TestL2HolderFails(t *testing.T) {
	const n = 30
	t.Run("error", func(t *testing.T) {
		f := newFleet(t, 3, Config{}, Options{})
		f.getAllFailing(t, n, func(i int, _ *Entry, _ Status, err error) {
			e, ok := errors.AsType[*fetcherr.Error](err)
			if !ok || e.Reason != errHolder.Reason || e.RetryAfter != errHolder.RetryAfter {
				t.Errorf("replica %d: got %v", i%3, err)
			}
		})
	})
	t.Run("stale", func(t *testing.T) {
		// stale_after off: every caller waits for the holder's failure.
		f := newFleet(t, 3, Config{Policy: Policy{StaleWhileRevalidate: -1}, StaleAfter: -1}, Options{})
		var v atomic.Int64
		mustGet(t, f.cs[0], "k", versions(&v, liveFacts), Miss)
		f.clk.Advance(2 * time.Second) // past the TTL, inside stale_if_error
		f.getAllFailing(t, n, func(i int, e *Entry, st Status, err error) {
			if err != nil || body(e) != "v1" || (i%3 == 0) != (st == Stale) || (i%3 != 0) != (st == StaleL2) {
				t.Errorf("replica %d: %v %q %v", i%3, st, body(e), err)
			}
		})
	})
}

// errHolder is the error of getAllFailing's fetch: one that allows a stale
// page, with a retry hint.
var errHolder = &fetcherr.Error{Reason: fetcherr.RateLimited, RetryAfter: 2 * time.Second, Err: errors.New("upstream 429")}

// getAllFailing has n callers, spread over the replicas in turn (caller i
// on replica i%len(f.cs)), Get "k" with a fetch that fails with errHolder
// once every one of them is waiting, and hands each answer to check.
// Exactly one fetch may run in the whole fleet.
func (f *fleet) getAllFailing(t *testing.T, n int, check func(i int, e *Entry, st Status, err error)) {
	t.Helper()
	all := f.barrierAll(int64(n))
	hold, release := f.holdUntilWaiting(t, all)
	var fetches atomic.Int64
	fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
		fetches.Add(1)
		hold()
		return nil, Facts{}, errHolder
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e, st, err := f.cs[i%len(f.cs)].get(context.Background(), "k", fetch)
			check(i, e, st, err)
		})
	}
	release()
	wg.Wait()
	if fetches.Load() != 1 {
		t.Errorf("fetches %d, want 1", fetches.Load())
	}
}

// TestL2HolderDies: a lease whose holder died (never released) expires by
// itself; one waiter then fetches, and the others get its page.
func TestL2HolderDies(t *testing.T) {
	f := newFleet(t, 3, Config{}, Options{})
	k := f.cs[0].l2.keys("k")
	if err := f.rdb.Set(context.Background(), k.lock, "dead-holder", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var fetches atomic.Int64
	var wg sync.WaitGroup
	for i := range 9 {
		wg.Go(func() {
			e, _, err := f.cs[i%3].get(context.Background(), "k", counting(&fetches, "page", liveFacts))
			if err != nil || body(e) != "page" {
				t.Errorf("%q %v", body(e), err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); fetches.Load() != 1 || took < 250*time.Millisecond {
		t.Errorf("fetches %d after %v; want 1, after the lease expired", fetches.Load(), took)
	}
	if s := f.stats(); s.L2LockWaits != 3 || s.L2LockWaitTimeouts != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestL2WaitBound: a holder that outlives the wait bound does not fail its
// waiters: they fetch themselves.
func TestL2WaitBound(t *testing.T) {
	f := newFleet(t, 2, Config{}, Options{LeaseTimeout: 300 * time.Millisecond})
	k := f.cs[0].l2.keys("k")
	if err := f.rdb.Set(context.Background(), k.lock, "slow-holder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	mustGet(t, f.cs[0], "k", counting(&fetches, "page", liveFacts), Miss)
	if s := f.stats(); fetches.Load() != 1 || s.L2LockWaitTimeouts != 1 || s.L2Stores != 1 {
		t.Errorf("fetches %d, stats %+v", fetches.Load(), s)
	}
	mustGet(t, f.cs[1], "k", counting(&fetches, "page", liveFacts), HitL2) // shared all the same
}

// TestL2Corrupt: a value that does not decode (foreign, truncated, another
// version) is a miss and counted, never an error; the fetch overwrites it.
func TestL2Corrupt(t *testing.T) {
	f := newFleet(t, 2, Config{}, Options{})
	var fetches atomic.Int64
	good := func() []byte {
		mustGet(t, f.cs[0], "good", counting(&fetches, strings.Repeat("page ", 400), liveFacts), Miss)
		b, err := f.rdb.Get(context.Background(), f.cs[0].l2.keys("good").value).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	otherVersion := bytes.Clone(good)
	otherVersion[4] = valueVersion + 1
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	for i, v := range [][]byte{[]byte("foreign"), good[:len(good)-3], otherVersion, flipped} {
		key := fmt.Sprint("k", i)
		if err := f.rdb.Set(context.Background(), f.cs[0].l2.keys(key).value, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		mustGet(t, f.cs[0], key, counting(&fetches, "page", liveFacts), Miss)
		mustGet(t, f.cs[1], key, counting(&fetches, "page", liveFacts), HitL2)
	}
	if s := f.stats(); s.L2Corrupt != 4 || s.L2Errors != 0 || fetches.Load() != 5 {
		t.Errorf("fetches %d, stats %+v", fetches.Load(), s)
	}
}

// TestL2TooLarge: a page over max_entry_bytes stays in L1; its waiters are
// told so and fetch for themselves.
func TestL2TooLarge(t *testing.T) {
	f := newFleet(t, 2, Config{L2: L2Config{MaxEntryBytes: 1000}}, Options{})
	var fetches atomic.Int64
	big := string(page(20<<10, 5)) // gzip still over 1000 B
	mustGet(t, f.cs[0], "k", counting(&fetches, big, liveFacts), Miss)
	mustGet(t, f.cs[1], "k", counting(&fetches, big, liveFacts), Miss)
	if s := f.stats(); s.L2Stores != 0 || fetches.Load() != 2 {
		t.Errorf("fetches %d, stats %+v", fetches.Load(), s)
	}
	off := false
	g := newFleet(t, 2, Config{L2: L2Config{Enabled: &off}}, Options{})
	mustGet(t, g.cs[0], "k", counting(&fetches, "x", liveFacts), Miss)
	mustGet(t, g.cs[1], "k", counting(&fetches, "x", liveFacts), Miss)
	if s := g.stats(); s.L2Misses+s.L2Stores != 0 {
		t.Errorf("l2.enabled false still used Redis: %+v", s)
	}
}

// TestL2RedisDown: Redis dies under load and comes back: no Get fails,
// the failures are counted, and the tier works again after the restart.
func TestL2RedisDown(t *testing.T) {
	f := newFleet(t, 3, Config{}, Options{L2Timeout: 200 * time.Millisecond})
	var fetches atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprint("k", (i*7+w)%40)
				if _, _, err := f.cs[(i+w)%3].get(context.Background(), key, counting(&fetches, "page", liveFacts)); err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				if i%10 == 0 {
					f.clk.Advance(100 * time.Millisecond)
				}
			}
		})
	}
	halt := sync.OnceFunc(func() { stop.Store(true); wg.Wait() })
	t.Cleanup(halt) // before the caches close, when the test fails first
	// Load runs on a live Redis...
	testkit.Eventually(t, "load on the live Redis", func() bool {
		s := f.stats()
		return s.L2Stores > 0 && s.L2Hits > 0
	})
	f.srv.Stop()
	// ...and on a dead one, where every failed call is counted...
	testkit.Eventually(t, "failures counted while Redis is down", func() bool { return f.stats().L2Errors >= 10 })
	f.srv.Restart()
	// ...and on the restarted one.
	back := f.stats().L2Stores
	testkit.Eventually(t, "load on the restarted Redis", func() bool { return f.stats().L2Stores > back })
	halt()

	// Back: a page fetched through one replica is an L2 hit on another.
	i := 0
	testkit.Eventually(t, "the shared tier back: an L2 hit on another replica", func() bool {
		i++
		key := fmt.Sprint("after", i)
		mustGet(t, f.cs[0], key, counting(&fetches, "page", liveFacts), Miss)
		_, st, err := f.cs[1].get(context.Background(), key, counting(&fetches, "page", liveFacts))
		return err == nil && st == HitL2
	})
	t.Logf("fetches %d, %+v", fetches.Load(), f.stats())
}

// TestL2StaleFleet: a page past its TTL, inside stale_while_revalidate, is
// served stale by every replica, from L1 or L2, and refreshed once across
// the fleet.
func TestL2StaleFleet(t *testing.T) {
	f := newFleet(t, 3, Config{}, Options{}) // fresh 1s, swr 1s
	var v atomic.Int64
	mustGet(t, f.cs[0], "k", versions(&v, liveFacts), Miss)
	f.clk.Advance(1500 * time.Millisecond)
	release := make(chan struct{})
	var fetches atomic.Int64
	slow := func(context.Context, func() bool) ([]byte, Facts, error) {
		fetches.Add(1)
		<-release
		return []byte("v2"), liveFacts, nil
	}
	var held []*Entry
	for i, c := range f.cs {
		want := StaleL2
		if i == 0 {
			want = Stale
		}
		e := mustGet(t, c, "k", slow, want)
		if body(e) != "v1" {
			t.Fatalf("replica %d: %q", i, body(e))
		}
		held = append(held, e)
	}
	// One refresh holds the lease; the others find it taken and stop.
	testkit.Eventually(t, "two refreshes done and one fetch", func() bool {
		done := 0
		for _, e := range held {
			if !e.refreshing.Load() {
				done++
			}
		}
		return done >= 2 && fetches.Load() == 1
	})
	close(release)
	for _, c := range f.cs {
		c.wg.Wait()
	}
	if fetches.Load() != 1 {
		t.Errorf("fetches %d, want 1 across the fleet", fetches.Load())
	}
	// The refreshed page reaches every replica without another fetch.
	for i, c := range f.cs {
		var e *Entry
		for range 3 {
			e, _, _ = c.get(context.Background(), "k", slow)
			c.wg.Wait()
		}
		if body(e) != "v2" {
			t.Errorf("replica %d: %q", i, body(e))
		}
	}
	if fetches.Load() != 1 {
		t.Errorf("fetches %d after the refresh spread, want 1", fetches.Load())
	}
}

// TestL2StaleRefreshedByTheFlight: a flight that serves a stale page of L2
// starts its refresh itself, so the page is refreshed even when every
// caller of the flight has stopped waiting for it.
func TestL2StaleRefreshedByTheFlight(t *testing.T) {
	f := newFleet(t, 2, Config{}, Options{}) // fresh 1s, swr 1s
	var v atomic.Int64
	mustGet(t, f.cs[0], "k", versions(&v, liveFacts), Miss)
	f.clk.Advance(1500 * time.Millisecond)
	// Replica 1 holds nothing: its flight reads the stale page from L2.
	// Nobody receives the flight's result, as when its callers have left.
	c := f.cs[1]
	cl := &call{c: c, ctx: context.Background(), key: "k", fetch: versions(&v, liveFacts)}
	c.join(cl, false)
	testkit.Eventually(t, "the stale page refreshed", func() bool {
		e := c.store.get("k")
		return e != nil && body(e) == "v2"
	})
	c.wg.Wait()
	if n, r := v.Load(), c.Stats().Refreshes; n != 2 || r != 1 {
		t.Errorf("fetches %d, refreshes %d; want 2 (the first page, the refresh) and 1", n, r)
	}
}

// TestL2Zipf: a Zipf mix of keys over 3 replicas round robin makes about as
// many upstream calls as the same mix through one cache.
func TestL2Zipf(t *testing.T) {
	run := func(replicas int) int64 {
		f := newFleet(t, replicas, Config{}, Options{})
		var fetches atomic.Int64
		fetch := func(context.Context, func() bool) ([]byte, Facts, error) {
			fetches.Add(1)
			return []byte("page"), liveFacts, nil
		}
		const workers, each = 6, 500
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				z := rand.NewZipf(rand.New(rand.NewPCG(uint64(w), 1)), 1.1, 1, 299)
				for i := range each {
					key := fmt.Sprint("k", z.Uint64())
					if _, _, err := f.cs[(w+i)%replicas].get(context.Background(), key, fetch); err != nil {
						t.Error(err)
						return
					}
					f.clk.Advance(2 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		for _, c := range f.cs {
			c.wg.Wait()
		}
		return fetches.Load()
	}
	one, three := run(1), run(3)
	t.Logf("fetches: one cache %d, three replicas %d", one, three)
	if float64(three) > 1.1*float64(one) {
		t.Errorf("three replicas fetched %d, over 1.1 x %d", three, one)
	}
}
