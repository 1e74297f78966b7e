package limits

import (
	"strconv"
	"sync/atomic"
	"time"
)

// The fixed window of a bucket (docs/CONTRACT.md "Limits" rules 1-2: once
// the allowance is spent, every request of the key is refused until the
// window resets).
//
// Windows are computed here, from the clock, rather than left to
// ulule/limiter, whose reported end is truncated to the second, so a client
// that waited for it would come back early and be refused again. Every
// window starts and ends on a whole second (Plan.Validate), so
// X-RateLimit-Reset is exact and Retry-After agrees with it.
//
// Each bucket's windows are shifted by a phase taken from a hash of the
// bucket, so that the keys of a fleet do not all reset on the same second and
// send every throttled client back to the legacy host at once. The hash is
// FNV-1a, not a seeded map hash: every replica must compute the same windows.
//
// The window's start is part of the store key, so a new window is a new
// counter: counting never depends on a store-side expiry racing a request,
// and the store's TTL (window end + keyGrace + RedisTimeout) only collects
// old counters.

// keyGrace keeps a counter alive past its window's end (on top of
// RedisTimeout, which covers a store call in flight across the boundary). It
// covers clock skew between replicas; once it has passed, no request can
// still name that window.
const keyGrace = 5 * time.Second

// Bucket is what requests are charged to: a key ("key:<keyID>") or a
// client address (IPBucket). Make one with NewBucket and keep it for as
// long as its name is charged: it holds the name's hash and the name of
// its current window's counter, so that charging a request builds neither.
// It is safe for concurrent use.
type Bucket struct {
	name  string
	hash  uint32                    // fnv32a(name): the phase of its windows
	count atomic.Pointer[windowKey] // the counter of the window last charged
}

// windowKey is one window of a bucket: its counter's name, and what is
// worked out once per window rather than on every request.
type windowKey struct {
	length time.Duration
	start  int64
	name   string
	// local is the memory store's counter of this window, once found.
	local atomic.Pointer[memCounter]
	// batch is this replica's reservations of this window from Redis
	// (batch.go), once found.
	batch atomic.Pointer[batch]
	// fields are the rate limit fields that change at most once a second
	// (decision.go), as last formatted.
	fields atomic.Pointer[fixedFields]
}

// NewBucket returns the bucket named name.
func NewBucket(name string) *Bucket { return &Bucket{name: name, hash: fnv32a(name)} }

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.name }

// window returns the bounds of the window of b that holds now.
func (b *Bucket) window(length time.Duration, now time.Time) (start, end time.Time) {
	return windowOf(b.hash, length, now)
}

// windowAt is b's window starting at start, made once per window: two
// requests racing over a new window both make one, with the same name,
// and the store counts both under that name.
func (b *Bucket) windowAt(length time.Duration, start time.Time) *windowKey {
	if k := b.count.Load(); k != nil && k.length == length && k.start == start.Unix() {
		return k
	}
	k := &windowKey{length: length, start: start.Unix(), name: counterKey(b.name, length, start)}
	b.count.Store(k)
	return k
}

// windowOf is window for a bucket whose name hashes to hash.
func windowOf(hash uint32, length time.Duration, now time.Time) (start, end time.Time) {
	w := int64(length / time.Second)
	phase := int64(uint64(hash) % uint64(w))
	t := now.Unix() - phase
	s := t - mod(t, w) + phase
	return time.Unix(s, 0), time.Unix(s+w, 0)
}

// mod is the non-negative remainder, so that instants before 1970 (only seen
// with a broken clock) still fall in a window that holds them.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// fnv32a is FNV-1a over s, inlined to keep TakeAt free of allocations.
func fnv32a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// counterKey names the counter of one window of a bucket:
// "<bucket>:<window seconds>:<window start unix>". The window length is part
// of it so that a plan whose window changes on reload starts a new count
// rather than inheriting one measured against another window.
func counterKey(bucket string, length time.Duration, start time.Time) string {
	var buf [64]byte // on the stack for usual buckets: one allocation, the string
	b := append(buf[:0], bucket...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(length/time.Second), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, start.Unix(), 10)
	return string(b)
}
