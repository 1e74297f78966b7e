package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The shared tier (L2): pages in Redis, shared by every replica, so that
// the fleet makes one upstream call per key per TTL. On a miss a flight
// takes a short lease on the key (SET NX PX); the winner fetches, stores
// the value, releases the lease and publishes a notice on the prefix's
// channel; the others wait for the notice, polling every pollInterval too
// (pub/sub may lose a message, and a dead holder sends none): the "aside"
// pattern of redis/rueidis. A holder whose fetch fails leaves a marker with
// its token and the encoded error, so its waiters answer as its callers do.
// Each call is bounded by L2Timeout; a failed one makes the flight work
// alone (Stats.L2Errors), and the next flight asks Redis again.

// defaultL2MaxEntryBytes bounds the values stored in L2: a larger page
// stays in L1 only.
const defaultL2MaxEntryBytes = 1 << 20

// pollInterval is how often a waiter checks the lease and the value when
// no notice comes (see above).
const pollInterval = 100 * time.Millisecond

// Marker kinds, after the holder's token.
const (
	markFailed = 'E' // the fetch failed; the encoded error follows
	markAlone  = 'A' // the page is not shared (BYPASS or too large): fetch alone
)

// acquireScript takes the lease, or returns the holder's token. One round
// trip, and any Redis version (SET NX GET needs 7.0).
var acquireScript = redis.NewScript(`
local held = redis.call('GET', KEYS[1])
if held then return held end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`)

// releaseSrc deletes the lease only if the token still holds it: a holder
// that overran its lease must not release the next holder's.
const releaseSrc = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

// l2 is the shared tier of one Cache.
type l2 struct {
	rdb     redis.UniversalClient
	prefix  string
	channel string
	minCall time.Duration // Options.L2Timeout: no call is bounded below it
	timeout atomic.Int64  // bound on one call: cache.l2.timeout, at least minCall
	lease   time.Duration

	ps   *redis.PubSub
	done chan struct{} // closed when listen's loop has ended

	mu      sync.Mutex
	waiters map[string][]chan struct{} // by key hash, under mu
}

func newL2(opt Options) (*l2, error) {
	l := &l2{
		rdb:     opt.L2,
		prefix:  opt.L2Prefix,
		minCall: opt.L2Timeout,
		lease:   opt.LeaseTimeout,
		waiters: map[string][]chan struct{}{},
	}
	switch {
	case l.prefix == "":
		return nil, errors.New("cache: Options.L2Prefix is required with L2")
	case strings.ContainsAny(l.prefix, "{}"):
		return nil, fmt.Errorf("cache: L2Prefix %q must not contain braces (the keys carry a Redis Cluster hash tag)", l.prefix)
	case l.minCall <= 0:
		return nil, errors.New("cache: Options.L2Timeout is required with L2 (the redis section's timeout)")
	case l.lease <= 0:
		return nil, errors.New("cache: Options.LeaseTimeout is required with L2 (the upstream timeout)")
	}
	l.channel = l.prefix + "notify"
	return l, nil
}

// listen subscribes to the notices and dispatches them until close. go-redis
// (re)makes the subscription in the background while Redis is unreachable.
// The loop is not in Cache.wg, which counts the work that ends by itself;
// close waits for it.
func (l *l2) listen(stop context.Context) {
	l.ps = l.rdb.Subscribe(stop, l.channel)
	ch := l.ps.Channel()
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		for msg := range ch {
			l.notify(msg.Payload)
		}
	}()
}

func (l *l2) close() {
	_ = l.ps.Close() // closes the channel: listen's loop ends
	<-l.done
}

func (l *l2) notify(hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.waiters[hash] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// watch registers for the notices of hash until the returned func runs.
// Registering before reading Redis loses no notice sent in between.
func (l *l2) watch(hash string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiters[hash] = append(l.waiters[hash], ch)
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		list := l.waiters[hash]
		for i, c := range list {
			if c == ch {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(l.waiters, hash)
		} else {
			l.waiters[hash] = list
		}
	}
}

// setTimeout sets the bound of one call from the settings.
func (l *l2) setTimeout(s *settings) { l.timeout.Store(int64(max(l.minCall, s.l2Timeout))) }

func (l *l2) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Duration(l.timeout.Load()))
}

// get reads the value of a page: nil and no error when there is none.
func (l *l2) get(ctx context.Context, k sharedKeys) ([]byte, error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	b, err := l.rdb.Get(ctx, k.value).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, err
}

// acquire takes the lease of a page: its token when won, else the token of
// the holder.
func (l *l2) acquire(ctx context.Context, k sharedKeys) (token, holder string, err error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	token = rand.Text()
	held, err := acquireScript.Run(ctx, l.rdb, []string{k.lock}, token, l.lease.Milliseconds()).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return token, "", nil
	case err != nil:
		return "", "", err
	}
	return "", held, nil
}

// peek reads the value, the failure marker and the lease of a page in one
// round trip (they share a hash slot).
func (l *l2) peek(ctx context.Context, k sharedKeys) (value, mark []byte, holder string, err error) {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	vals, err := l.rdb.MGet(ctx, k.value, k.fail, k.lock).Result()
	if err != nil {
		return nil, nil, "", err
	}
	str := func(i int) string { s, _ := vals[i].(string); return s }
	if s := str(0); s != "" {
		value = []byte(s)
	}
	if s := str(1); s != "" {
		mark = []byte(s)
	}
	return value, mark, str(2), nil
}

// finish ends a holder's lease: it stores value (nil: none) for ttl, or
// writes a marker (nil: none), releases the lease and publishes the notice,
// in one round trip.
func (l *l2) finish(ctx context.Context, k sharedKeys, token string, value []byte, ttl time.Duration, mark []byte) error {
	ctx, cancel := l.bound(ctx)
	defer cancel()
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if value != nil {
			p.Set(ctx, k.value, value, ttl)
		}
		if mark != nil {
			p.Set(ctx, k.fail, mark, l.lease)
		}
		if token != "" {
			p.Eval(ctx, releaseSrc, []string{k.lock}, token)
		}
		p.Publish(ctx, l.channel, k.hash)
		return nil
	})
	return err
}

// marker builds a failure marker of the holder token.
func marker(token string, kind byte, payload []byte) []byte {
	b := make([]byte, 0, len(token)+1+len(payload))
	b = append(b, token...)
	b = append(b, kind)
	return append(b, payload...)
}

// readMarker returns the kind and payload of mark if the holder wrote it.
func readMarker(mark []byte, holder string) (kind byte, payload []byte, ok bool) {
	if holder == "" || len(mark) <= len(holder) || string(mark[:len(holder)]) != holder {
		return 0, nil, false
	}
	return mark[len(holder)], mark[len(holder)+1:], true
}
