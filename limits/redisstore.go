package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"
)

// redisStore is ulule/limiter's Redis store (drivers/store/redis/store.go)
// on the replicas' shared go-redis v9 client (the major version that driver
// imports), so that one quota holds across every replica. The client may be
// a single Redis, a Sentinel-watched master or a Redis Cluster: each counter
// is one key, so the script below runs on whichever node owns it.
//
// A limit too small to reserve in batches (batch.go) is counted exactly
// under concurrency and across replicas: each request runs one Lua script,
// INCRBY then PEXPIRE on the counter's first increment (luaIncrScript), and
// Redis runs a script atomically, so every request gets a distinct count.
// Larger ones are reserved in batches on the same counters, which never
// grant more than the limit either.
//
// The client belongs to the caller, who bounds each call and stops calling
// a Redis that keeps failing (package fleet). ulule's constructor fails
// when Redis is down; the edge starts anyway (TakeAt reports
// errStoreNotReady, so the fail mode applies) and reconnects once a
// second.
type redisStore struct {
	client redis.UniversalClient
	prefix string
	log    *slog.Logger

	store atomic.Pointer[limiter.Store] // nil until the scripts are loaded

	loop tickLoop // reconnecting while Redis has been down since start

	// replicas is how many replicas counted themselves in Redis in the
	// last full period (countReplicas); 0 until known.
	replicas atomic.Int64
	beats    tickLoop

	// batching is set for batched reservations (batch.go): the largest
	// batch a replica may reserve, the fleet's size, and the clock that
	// tells a hot key. Zero batchMax: every request is one script.
	batchMax int64
	fleet    func() int
	now      func() time.Time
	batches  sync.Map // counter name -> *batch
	sweeper  tickLoop
}

// beatEvery is the period in which each replica counts itself once.
const beatEvery = 5 * time.Second

// countReplicas makes this replica count itself in Redis once per
// beatEvery, now and then on a ticker, and reads the previous period's
// count: the fleet's size, for the local shares of failmode.go. The count
// is one INCR of a key named by the period, which every replica computes
// alike from the clock (replica clocks agree within a second, as windows
// need). Each call is bounded by timeout; a failed one keeps the size last
// seen.
func (s *redisStore) countReplicas(timeout time.Duration) {
	beat := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		period := time.Now().Unix() / int64(beatEvery/time.Second)
		key := func(p int64) string { return s.prefix + ":replicas:" + strconv.FormatInt(p, 10) }
		var cur *redis.IntCmd
		var prev *redis.StringCmd
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			cur = p.Incr(ctx, key(period))
			p.Expire(ctx, key(period), 3*beatEvery)
			prev = p.Get(ctx, key(period-1))
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return false
		}
		n, _ := prev.Int64()
		s.replicas.Store(max(n, cur.Val()))
		return false
	}
	beat()
	s.beats.start(beatEvery, beat)
}

// errStoreNotReady: Redis has not been reachable since start.
var errStoreNotReady = errors.New("redis store not connected yet")

// redisReconnectEvery is the pause between attempts to load the scripts
// while Redis has been unreachable since start.
const redisReconnectEvery = time.Second

func newRedisStore(client redis.UniversalClient, prefix, onStoreError string, log *slog.Logger) *redisStore {
	s := &redisStore{client: client, prefix: prefix, log: log}
	if err := s.connect(); err != nil {
		log.Warn("rate limit store: redis unreachable at start; on_store_error applies until it answers",
			"err", err, "on_store_error", onStoreError)
		s.loop.start(redisReconnectEvery, s.reconnect)
	}
	return s
}

// connect builds ulule's store, which loads its Lua scripts. Its context is
// Background, so the client's own timeouts bound it.
func (s *redisStore) connect() error {
	st, err := redisstore.NewStoreWithOptions(s.client, limiter.StoreOptions{Prefix: s.prefix})
	if err != nil {
		return err
	}
	s.store.Store(&st)
	return nil
}

// reconnect is one attempt of the reconnect loop; it is done once the
// scripts are loaded. A panic is logged and ends the attempts.
func (s *redisStore) reconnect() (done bool) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("rate limit store: redis reconnect loop panicked", "panic", fmt.Sprint(r))
			done = true
		}
	}()
	if s.connect() != nil {
		return false
	}
	s.log.Info("rate limit store: redis connected")
	return true
}

// batchReservations makes incr reserve batches of up to max requests
// (batch.go), for a fleet of fleet() replicas, on the clock now.
func (s *redisStore) batchReservations(max int64, fleet func() int, now func() time.Time) {
	if max <= 1 {
		return
	}
	s.batchMax, s.fleet, s.now = max, fleet, now
	s.sweeper.start(memoryCleanInterval, func() bool { sweep(&s.batches); return false })
}

func (s *redisStore) incr(ctx context.Context, w *windowKey, n, limit int64, ttl time.Duration) (limiter.Context, error) {
	st := s.store.Load()
	if st == nil {
		return limiter.Context{}, errStoreNotReady
	}
	if c := s.batchCapFor(limit); c > 1 {
		return s.batched(ctx, w, n, limit, c, ttl)
	}
	return (*st).Increment(ctx, w.name, n, limiter.Rate{Limit: limit, Period: ttl})
}

// close stops the reconnect loop. The client is the caller's.
func (s *redisStore) close() error {
	return errors.Join(s.loop.close(), s.beats.close(), s.sweeper.close())
}
