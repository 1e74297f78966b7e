package proxy

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tradergate/limits"
)

// Key guessing (docs/OPERATING.md "Key guessing"). A request whose key is
// wrong is charged, besides the address's anonymous allowance, to the
// address's allowance of failed authentications (limits.auth_failures).
// Once that is spent the address is locked out until its window ends:
// every request from it that offers a key, the right one included, is 429
// (docs/CONTRACT.md "Errors": the rate limit answer, with Retry-After). So
// a guesser learns nothing from a 200 among the 429s.
//
// The count lives in the limiter's store: with Redis, one count for the
// whole fleet. Which addresses are locked out is kept by each replica, for
// the window's remaining time, once one of its failures is refused: a
// check on every request with a valid key costs no store call, and a
// replica that has refused no failure from an address yet learns of the
// lockout at that address's next wrong key.

// authGuard is the edge's record of locked-out addresses.
type authGuard struct {
	plan atomic.Pointer[limits.Plan] // limits.auth_failures, as last loaded

	mu    sync.RWMutex
	until map[netip.Addr]time.Time // locked until; guarded by mu
	n     atomic.Int64             // len(until): 0 skips the lock

	failures, lockouts prometheus.Counter
}

// maxLockedAddrs bounds the record; past it, expired entries are dropped,
// and an address that finds no room is still refused by the shared count
// at its next wrong key.
const maxLockedAddrs = 1 << 16

func newAuthGuard(reg prometheus.Registerer, plan limits.Plan) (*authGuard, error) {
	g := &authGuard{
		until: map[netip.Addr]time.Time{},
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tradergate_auth_failures_total",
			Help: "Requests whose API key was wrong, charged to their address's limits.auth_failures."}),
		lockouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "tradergate_auth_lockouts_total",
			Help: "Requests refused with 429 because their address spent limits.auth_failures."}),
	}
	g.setPlan(plan)
	for _, c := range []prometheus.Collector{g.failures, g.lockouts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *authGuard) setPlan(p limits.Plan) { g.plan.Store(&p) }

// lockKey is the address a lockout holds: an IPv6 client by its /64, as
// the limiter buckets it (limits.IPBucket).
func lockKey(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

// locked reports whether ip is locked out at now.
func (g *authGuard) locked(ip netip.Addr, now time.Time) bool {
	g.mu.RLock()
	until, ok := g.until[lockKey(ip)]
	g.mu.RUnlock()
	return ok && now.Before(until)
}

// set records ip as locked out until until, or no longer when until is
// zero.
func (g *authGuard) set(ip netip.Addr, until, now time.Time) {
	k := lockKey(ip)
	g.mu.Lock()
	defer g.mu.Unlock()
	if until.IsZero() {
		delete(g.until, k)
	} else {
		if len(g.until) >= maxLockedAddrs {
			for a, t := range g.until {
				if !now.Before(t) {
					delete(g.until, a)
				}
			}
		}
		if len(g.until) < maxLockedAddrs {
			g.until[k] = until
		}
	}
	g.n.Store(int64(len(g.until)))
}

// guardKeys runs after authenticate on a request that offered one key.
// A wrong key is charged to the address's failures; an address whose
// failures are spent is answered 429, whatever key it offered. It reports
// whether the request goes on.
func (s *Server) guardKeys(x *exchange) bool {
	if x.Authorizations != 1 {
		return true // no key offered (or several: requireKey's 400)
	}
	g := s.authGuard
	if x.principal != nil && g.n.Load() == 0 {
		return true // the common case: nobody locked out, no address to find
	}
	ip := s.limiter.ClientIPFrom(x.Peer, x.ForwardedFor)
	if x.principal != nil && !g.locked(ip, x.now) {
		return true
	}
	d := s.limiter.TakeAt(x.ctx, x.now, limits.NewBucket("authfail:"+limits.IPBucket(ip)), *g.plan.Load(), limits.AuthFailuresPolicy)
	if x.principal == nil {
		g.failures.Inc()
	}
	if d.Allowed {
		if x.principal != nil {
			g.set(ip, time.Time{}, x.now) // the window the lockout was for has ended
		}
		return true
	}
	g.set(ip, d.Reset, x.now)
	g.lockouts.Inc()
	s.metrics.refused.WithLabelValues(d.Policy).Inc()
	x.principal = nil // a key is not accepted from a locked-out address
	x.setRateLimit(d)
	if d.StoreErr != nil {
		x.fail(&edgeError{kind: failLimitStore, Err: d.StoreErr})
		return false
	}
	x.fail(fail(failRateLimited))
	return false
}
