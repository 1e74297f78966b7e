package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"
)

// redisStore is ulule/limiter's Redis store (drivers/store/redis/store.go)
// on a go-redis v9 client (the major version that driver imports), so that
// one quota holds across every replica (DESIGN "Scale beyond one machine").
//
// Counting is exact under concurrency and across replicas: each request runs
// one Lua script, INCRBY then PEXPIRE on the counter's first increment
// (luaIncrScript), and Redis runs a script atomically, so every request gets
// a distinct count.
//
// Two things are added around it:
//   - The client is configured so that one call cannot outlast StoreTimeout:
//     dial, pool wait, read and write timeouts, one dial attempt, no command
//     retries, and the caller's deadline honoured on the socket.
//   - ulule's constructor loads its scripts with context.Background and fails
//     when Redis is down, which would stop the edge from starting. When that
//     happens the edge starts anyway (Take reports errStoreNotReady, so the
//     fail mode applies) and reconnectLoop retries once a second. After a
//     Redis restart the scripts are gone; ulule reloads them on NOSCRIPT
//     (evalSHA), within the caller's deadline.
type redisStore struct {
	client *redis.Client
	prefix string
	log    *slog.Logger

	store atomic.Pointer[limiter.Store] // nil until the scripts are loaded

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// errStoreNotReady: Redis has not been reachable since start.
var errStoreNotReady = errors.New("redis store not connected yet")

// redisReconnectEvery is the pause between connection attempts while Redis
// has been unreachable since start.
const redisReconnectEvery = time.Second

func newRedisStore(cfg Config, log *slog.Logger) (*redisStore, error) {
	opt, err := redisOptions(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("limits.redis_url: %w", err)
	}
	opt.DialTimeout = cfg.StoreTimeout
	opt.DialerRetries = 1
	opt.ReadTimeout = cfg.StoreTimeout
	opt.WriteTimeout = cfg.StoreTimeout
	opt.PoolTimeout = cfg.StoreTimeout
	opt.MaxRetries = -1 // a retry would double the time a request waits
	opt.ContextTimeoutEnabled = true
	// Neither is needed to count, and each would cost a round trip on every
	// new connection (CLIENT SETINFO; CLIENT MAINT_NOTIFICATIONS).
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	s := &redisStore{
		client: redis.NewClient(opt),
		prefix: cfg.RedisPrefix,
		log:    log,
		stop:   make(chan struct{}),
	}
	if err := s.connect(); err != nil {
		// The address only: the URL may hold a password.
		log.Warn("rate limit store: redis unreachable at start; on_store_error applies until it answers",
			"addr", opt.Addr, "err", err, "on_store_error", cfg.OnStoreError)
		s.wg.Add(1)
		go s.reconnectLoop(opt.Addr)
	}
	return s, nil
}

// connect builds ulule's store, which loads its Lua scripts. Its context is
// Background, so the client's timeouts (StoreTimeout) bound it.
func (s *redisStore) connect() error {
	st, err := redisstore.NewStoreWithOptions(s.client, limiter.StoreOptions{Prefix: s.prefix})
	if err != nil {
		return err
	}
	s.store.Store(&st)
	return nil
}

func (s *redisStore) reconnectLoop(addr string) {
	defer s.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("rate limit store: redis reconnect loop panicked", "panic", fmt.Sprint(r))
		}
	}()
	t := time.NewTicker(redisReconnectEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.connect() == nil {
				s.log.Info("rate limit store: redis connected", "addr", addr)
				return
			}
		}
	}
}

func (s *redisStore) incr(ctx context.Context, key string, limit int64, ttl time.Duration) (limiter.Context, error) {
	st := s.store.Load()
	if st == nil {
		return limiter.Context{}, errStoreNotReady
	}
	return (*st).Increment(ctx, key, 1, limiter.Rate{Limit: limit, Period: ttl})
}

func (s *redisStore) close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		err = s.client.Close()
	})
	return err
}
