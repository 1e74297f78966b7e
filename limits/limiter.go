package limits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tradergate/cache/configerr"

	"github.com/redis/go-redis/v9"
)

// AnonymousPolicy is the policy name of the per-IP bucket of requests
// without a valid key.
const AnonymousPolicy = "anonymous"

// errStoreUnavailable is wrapped by Decision.StoreErr: the store failed or
// did not answer within Options.RedisTimeout.
var errStoreUnavailable = errors.New("limits: rate limit store unavailable")

// Options are the collaborators of a Limiter.
type Options struct {
	// Now is the clock that places requests in windows. nil: time.Now.
	// The stores expire old counters on their own wall clock, so a clock
	// that drifts from it only matters to garbage collection.
	Now func() time.Time
	// Logger receives store failures (at most one line per 10s, carrying
	// the running count) and recoveries. Keys and buckets are never logged.
	// nil: discard.
	Logger *slog.Logger
	// Redis is the replicas' shared client (package fleet, Conn.Client),
	// which makes one quota hold across every replica using it. The limiter
	// never closes it. nil: the counters live in this process, correct for
	// one node only.
	Redis redis.UniversalClient
	// RedisPrefix starts every counter's key (fleet's Conn.Key("rl")), so
	// that the limiter's keys do not meet the cache's. "": "tradergate:rl".
	RedisPrefix string
	// RedisTimeout bounds one store call; past it on_store_error decides.
	// Required with Redis: the redis section's timeout (fleet's
	// Conn.Timeout).
	RedisTimeout time.Duration
}

// Limiter charges requests to fixed-window allowances (docs/CONTRACT.md "Limits") kept
// in memory or in Redis. It is safe for concurrent use.
type Limiter struct {
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	store   counterStore
	remote  bool          // store is Redis
	local   *memoryStore  // with Redis and allow: each key's local share while Redis is out (failmode.go)
	timeout time.Duration // bound on one Redis call (failmode.go)
	deny    bool          // on_store_error: deny
	fleet   func() int    // with Redis: the replicas sharing a quota
	trusted []netip.Prefix
	plans   atomic.Pointer[map[string]Plan]

	storeErrs  atomic.Uint64
	lastLogged atomic.Int64 // unix nanos of the last store error logged
	failing    atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// New builds the limiter for cfg (defaults are applied to a copy) and plans
// by name. With opt.Redis set it counts in Redis; if Redis is unreachable
// New still succeeds, logs it, and applies on_store_error until Redis
// answers. Close releases what it started.
func New(cfg Config, plans map[string]Plan, opt Options) (*Limiter, error) {
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var errs configerr.List
	for name, p := range plans {
		errs.AppendAt("plans."+name, p.Validate())
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	l := &Limiter{
		cfg:     cfg,
		now:     opt.Now,
		log:     opt.Logger,
		timeout: opt.RedisTimeout,
		deny:    cfg.OnStoreError == OnStoreErrorDeny,
	}
	if opt.Redis != nil && l.timeout <= 0 {
		return nil, errors.New("limits: Options.RedisTimeout is required with Options.Redis (the redis section's timeout)")
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range cfg.TrustedProxies {
		p, _ := parseTrusted(s) // validated above
		l.trusted = append(l.trusted, p)
	}
	l.SetPlans(plans)
	if opt.Redis == nil {
		l.store = newMemoryStore(l.log)
		return l, nil
	}
	prefix := opt.RedisPrefix
	if prefix == "" {
		prefix = defaultRedisPrefix
	}
	if strings.ContainsAny(prefix, " \t\r\n") {
		return nil, errors.New("limits: Options.RedisPrefix must not contain white space")
	}
	rs := newRedisStore(opt.Redis, prefix, cfg.OnStoreError, l.log)
	l.store, l.remote = rs, true
	l.fleet = func() int { return cmp.Or(cfg.FleetSize, int(rs.replicas.Load()), 1) }
	if cfg.FleetSize == 0 {
		rs.countReplicas(l.timeout)
	}
	rs.batchReservations(int64(cmp.Or(cfg.RedisBatch, defaultRedisBatch)), l.fleet, l.now)
	if !l.deny {
		l.local = newMemoryStore(l.log)
	}
	return l, nil
}

// Close stops the store's goroutines. The Redis client is the caller's and
// stays open.
func (l *Limiter) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.store.close()
		if l.local != nil {
			l.closeErr = errors.Join(l.closeErr, l.local.close())
		}
	})
	return l.closeErr
}

// TakeAt charges one request that arrived at now (read from the clock of
// Options.Now) to b against plan, a key's own plan or a named one, and
// reports the decision under policy. The caller keeps b (NewBucket): a
// key's bucket lives as long as the key's configuration, and remembers its
// current counter's name. It never waits longer than RedisTimeout: past
// it, or on any store error, on_store_error decides (see Decision).
//
// Refused requests are charged too, which changes nothing within the window
// (docs/CONTRACT.md "Limits" rule 2: a retry before the reset is refused
// again). An invalid plan (a bug: plans are validated when loaded) is
// refused with a StoreErr, whatever on_store_error says.
func (l *Limiter) TakeAt(ctx context.Context, now time.Time, b *Bucket, plan Plan, policy string) Decision {
	return l.TakeNAt(ctx, now, b, plan, policy, 1)
}

// TakeNAt is TakeAt for n requests at once (n >= 1), for a request that
// costs several: the order book at T is charged the events pages it read
// (docs/CONTRACT.md "Rate limits"). The decision is that of the last of
// the n: Remaining counts all of them, and the charge is refused when it
// passes the allowance.
func (l *Limiter) TakeNAt(ctx context.Context, now time.Time, b *Bucket, plan Plan, policy string, n int64) Decision {
	d := Decision{Policy: policy, Limit: plan.Requests, Window: plan.Window, Remaining: -1}
	if err := plan.Validate(); err != nil {
		// A programming error: plans are validated when loaded.
		d.StoreErr = fmt.Errorf("%w: invalid plan %q: %v", errStoreUnavailable, policy, err)
		return d
	}
	start, end := b.window(plan.Window, now)
	d.Reset = end
	w := b.windowAt(plan.Window, start)
	d.window = w
	// The counter outlives its window by keyGrace plus the longest a store
	// call may take, so no call still in flight can find it gone.
	ttl := end.Sub(now) + keyGrace + l.timeout

	res, err := l.incr(ctx, w, max(n, 1), plan.Requests, ttl)
	if err != nil {
		d.StoreErr = fmt.Errorf("%w: %w", errStoreUnavailable, err)
		d.Allowed = !l.deny
		if !errors.Is(err, errCallerGone) {
			l.storeFailed(err)
		}
		if d.Allowed && l.local != nil {
			l.localShare(ctx, &d, w, max(n, 1), plan.Requests, ttl)
		}
		return d
	}
	l.storeAnswered()
	d.Remaining = res.Remaining
	d.Allowed = !res.Reached
	return d
}

// StoreErrors is the number of Takes since New that the store did not
// answer (failed, timed out, or refused by the shared client's open
// breaker), so that on_store_error decided; for the edge's metrics.
func (l *Limiter) StoreErrors() uint64 { return l.storeErrs.Load() }

// Failing reports whether the store's last answer was a failure, so that
// on_store_error is deciding now.
func (l *Limiter) Failing() bool { return l.failing.Load() }

// Anonymous is the per-IP allowance of requests without a valid key; charge
// it under AnonymousPolicy.
func (l *Limiter) Anonymous() Plan { return l.cfg.Anonymous }

// SetPlans replaces the named plans (hot reload on SIGHUP). The map is
// copied, so the caller may reuse it; plans should be validated first (TakeAt
// refuses an invalid plan with a StoreErr). Takes in flight finish with the
// plan they were given; counters carry over unless a plan's window changes.
func (l *Limiter) SetPlans(plans map[string]Plan) {
	m := maps.Clone(plans)
	if m == nil {
		m = map[string]Plan{}
	}
	l.plans.Store(&m)
}

// Plan looks a plan up by name.
func (l *Limiter) Plan(name string) (Plan, bool) {
	p, ok := (*l.plans.Load())[name]
	return p, ok
}
