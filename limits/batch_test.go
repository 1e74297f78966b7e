package limits

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tradergate/internal/testkit"
	"tradergate/internal/testkit/redistest"
)

// redisCalls is the number of commands srv has run, as INFO commandstats
// counts them (a command run by a script counts too), without the INFO
// calls that read it.
func redisCalls(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(bg, "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for f := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				calls, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				n += calls
			}
		}
	}
	return n
}

// redisClient is a client of its own on srv, for reading what the limiter
// did there.
func redisClient(t testing.TB, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Two replicas hammering one key from many goroutines, each through the
// bucket it keeps: the fleet never allows more than the limit, refuses
// nothing until all but what the replicas' batches hold is spent, and a
// hot key costs Redis far less than a command per request.
func TestBatchTwoReplicasOneHotKey(t *testing.T) {
	srv := redistest.Start(t)
	rc := redisClient(t, srv)
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	const maxBatch = 16
	cfg := Config{FleetSize: 2, RedisBatch: maxBatch}
	replicas := []*Limiter{
		newLimiter(t, cfg, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now})),
		newLimiter(t, cfg, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now})),
	}
	plan := Plan{Requests: 1000, Window: time.Minute}
	const perReplica, goroutines = 1500, 6
	before := redisCalls(t, rc)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, l := range replicas {
		b := NewBucket("key:hot")
		for range goroutines {
			wg.Go(func() {
				for range perReplica / goroutines {
					d := l.TakeAt(bg, clk.Now(), b, plan, "free")
					if d.StoreErr != nil {
						t.Error(d.StoreErr)
						return
					}
					if d.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	calls := redisCalls(t, rc) - before
	got, least := allowed.Load(), plan.Requests-int64(len(replicas))*(maxBatch-1)
	if got > plan.Requests || got < least {
		t.Errorf("%d allowed of %d, want between %d and the limit %d", got, 2*perReplica, least, plan.Requests)
	}
	perTake := float64(calls) / float64(2*perReplica)
	t.Logf("%d allowed; %d Redis commands for %d takes (%.3f per take)", got, calls, 2*perReplica, perTake)
	if perTake > 0.1 {
		t.Errorf("%.3f Redis commands per take (%d for %d), want well under 1", perTake, calls, 2*perReplica)
	}
}

// One replica alone sees Remaining count down by one per request, as with
// one script per request; a new window is a new count; a spent window is
// refused until it ends, without asking Redis again.
func TestBatchOneReplicaExactAcrossWindows(t *testing.T) {
	srv := redistest.Start(t)
	rc := redisClient(t, srv)
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	l := newLimiter(t, Config{FleetSize: 1, RedisBatch: 8}, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now}))
	plan := Plan{Requests: 100, Window: time.Minute}
	b := NewBucket("key:alone")
	var d Decision
	for i := range plan.Requests {
		if d = l.TakeAt(bg, clk.Now(), b, plan, "free"); !d.Allowed || d.Remaining != plan.Requests-1-i {
			t.Fatalf("take %d: %+v, want allowed with %d remaining", i, d, plan.Requests-1-i)
		}
	}
	before := redisCalls(t, rc)
	for range 10 {
		if d := l.TakeAt(bg, clk.Now(), b, plan, "free"); d.Allowed || d.Remaining != 0 || d.StoreErr != nil {
			t.Fatalf("past the limit: %+v, want refused with 0 remaining", d)
		}
	}
	if n := redisCalls(t, rc) - before; n != 0 {
		t.Errorf("%d Redis commands for refusals in a spent window, want 0", n)
	}
	clk.Set(d.Reset)
	for i := range 3 {
		if d := l.TakeAt(bg, clk.Now(), b, plan, "free"); !d.Allowed || d.Remaining != plan.Requests-1-int64(i) {
			t.Fatalf("next window, take %d: %+v, want a new count", i, d)
		}
	}
}

// A limit too small to split keeps one script per request, so that two
// replicas count it exactly: each sees the other's requests at once.
func TestBatchSmallLimitStaysExact(t *testing.T) {
	srv := redistest.Start(t)
	rc := redisClient(t, srv)
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	cfg := Config{FleetSize: 2, RedisBatch: 16}
	a := newLimiter(t, cfg, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now}))
	c := newLimiter(t, cfg, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now}))
	plan := Plan{Requests: 8*2*2 - 1, Window: time.Minute} // a batch of 1 per replica
	b := NewBucket("key:small")
	before := redisCalls(t, rc)
	for i := range plan.Requests + 2 {
		l := a
		if i%2 == 1 {
			l = c
		}
		d := l.TakeAt(bg, clk.Now(), b, plan, "free")
		want := max(plan.Requests-1-i, 0)
		if d.Allowed != (i < plan.Requests) || d.Remaining != want {
			t.Fatalf("take %d: %+v, want remaining %d", i, d, want)
		}
	}
	if n := redisCalls(t, rc) - before; n < plan.Requests+2 {
		t.Errorf("%d Redis commands for %d takes, want at least one each", n, plan.Requests+2)
	}
}

// In a fleet a replica's Remaining is the fleet's as it knew it at its
// last reservation, minus its own spending since: low by at most what the
// other replica held unspent then, high by at most what the other spent
// since. Replica c takes one request a round, so it reserves at least once
// every maxBatch rounds.
func TestBatchRemainingAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
	const maxBatch = 8
	cfg := Config{FleetSize: 2, RedisBatch: maxBatch}
	a := newLimiter(t, cfg, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now}))
	c := newLimiter(t, cfg, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{Now: clk.Now}))
	plan := Plan{Requests: 500, Window: time.Minute}
	ba, bc := NewBucket("key:both"), NewBucket("key:both")
	var taken int64
	var byA []int64 // a's takes per round
	for round := range 40 {
		byA = append(byA, int64(round%7))
		for range byA[round] {
			if d := a.TakeAt(bg, clk.Now(), ba, plan, "free"); !d.Allowed {
				t.Fatalf("round %d, replica a: %+v", round, d)
			}
			taken++
		}
		d := c.TakeAt(bg, clk.Now(), bc, plan, "free")
		taken++
		var recent int64
		for _, n := range byA[max(0, round-maxBatch+1):] {
			recent += n
		}
		truth := plan.Requests - taken
		if !d.Allowed || d.Remaining < truth-(maxBatch-1) || d.Remaining > truth+recent {
			t.Fatalf("round %d, replica c: %+v, want remaining between %d and %d", round, d, truth-(maxBatch-1), truth+recent)
		}
	}
}

// What a replica reserved was granted by Redis, so it is still spent when
// Redis fails, as if Redis answered; the reservation after it fails, and
// on_store_error decides from there.
func TestBatchSpentWhileRedisIsOut(t *testing.T) {
	for _, mode := range []string{OnStoreErrorAllow, OnStoreErrorDeny} {
		t.Run(mode, func(t *testing.T) {
			srv := redistest.Start(t)
			clk := testkit.NewClock(t0.Add(250 * time.Millisecond))
			l := newLimiter(t, Config{FleetSize: 1, RedisBatch: 16, OnStoreError: mode},
				shared(t, []string{srv.Addr()}, time.Second, Options{Now: clk.Now}))
			plan := Plan{Requests: 1000, Window: time.Minute}
			b := NewBucket("key:outage")
			// Batches of 1, 2, 4, 8, then 16, of which this take spends one.
			for i := range 1 + 2 + 4 + 8 + 1 {
				if d := l.TakeAt(bg, clk.Now(), b, plan, "free"); !d.Allowed || d.StoreErr != nil {
					t.Fatalf("take %d: %+v", i, d)
				}
			}
			srv.Stop()
			t.Cleanup(srv.Restart)
			for i := range 15 {
				d := l.TakeAt(bg, clk.Now(), b, plan, "free")
				if !d.Allowed || d.StoreErr != nil || d.Remaining != plan.Requests-17-int64(i) {
					t.Fatalf("spending the batch, take %d: %+v", i, d)
				}
			}
			d := l.TakeAt(bg, clk.Now(), b, plan, "free")
			if !errors.Is(d.StoreErr, errStoreUnavailable) || d.Allowed != (mode == OnStoreErrorAllow) {
				t.Fatalf("batch spent, Redis out: %+v, want on_store_error %s", d, mode)
			}
		})
	}
}

// An idle key-window's batch goes with the memory store's sweep.
func TestBatchesOfIdleKeysExpire(t *testing.T) {
	srv := redistest.Start(t)
	l := newLimiter(t, Config{FleetSize: 1}, shared(t, []string{srv.Addr()}, countingStoreTimeout, Options{}))
	rs := l.store.(*redisStore)
	plan := Plan{Requests: 1000, Window: time.Minute}
	if d := take(l, "key:idle", plan, "free"); !d.Allowed {
		t.Fatal(d)
	}
	batches := func() (n int) {
		rs.batches.Range(func(any, any) bool { n++; return true })
		return n
	}
	if n := batches(); n != 1 {
		t.Fatalf("%d batches after one take, want 1", n)
	}
	rs.batches.Range(func(_, v any) bool { v.(*batch).expires = time.Now().Add(-time.Second).UnixNano(); return true })
	sweep(&rs.batches)
	if n := batches(); n != 0 {
		t.Errorf("%d batches after an expired one was swept, want 0", n)
	}
}

func TestConfigRedisBatch(t *testing.T) {
	err := Config{RedisBatch: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "limits.redis_batch") {
		t.Errorf("redis_batch -1: %v, want an error naming limits.redis_batch", err)
	}
	if err := (Config{RedisBatch: 1}).Validate(); err != nil {
		t.Errorf("redis_batch 1: %v", err)
	}
}

// BenchmarkTakeRedis is the limiter's cost per request on Redis, and
// Redis's: redis-cmds/op is what INFO commandstats counts per Take (a
// script's INCRBY and PEXPIRE count as commands too).
// go test -run '^$' -bench TakeRedis -benchmem ./limits/
func BenchmarkTakeRedis(b *testing.B) {
	plan := Plan{Requests: 1 << 40, Window: time.Minute}
	for _, batch := range []struct {
		name string
		max  int
	}{{"exact", 1}, {"batched", 0}} {
		b.Run(batch.name, func(b *testing.B) {
			srv := redistest.Start(b)
			rc := redisClient(b, srv)
			l := newLimiter(b, Config{FleetSize: 1, RedisBatch: batch.max}, shared(b, []string{srv.Addr()}, time.Second, Options{}))
			report := func(b *testing.B, before int64) {
				b.ReportMetric(float64(redisCalls(b, rc)-before)/float64(b.N), "redis-cmds/op")
			}
			b.Run("hotkey-kept-bucket", func(b *testing.B) {
				bucket := NewBucket("key:kept")
				before := redisCalls(b, rc)
				b.ReportAllocs()
				for b.Loop() {
					if d := l.TakeAt(bg, time.Now(), bucket, plan, "free"); !d.Allowed {
						b.Fatal(d)
					}
				}
				report(b, before)
			})
			b.Run("parallel-hotkey", func(b *testing.B) {
				bucket := NewBucket("key:hot")
				before := redisCalls(b, rc)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if d := l.TakeAt(bg, time.Now(), bucket, plan, "free"); !d.Allowed {
							b.Error(d)
							return
						}
					}
				})
				report(b, before)
			})
		})
	}
}
