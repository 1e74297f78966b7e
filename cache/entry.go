package cache

import (
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Entry is one cached page. Its exported fields are never written after the
// entry is built, so it is shared by every goroutine that serves it. The page
// itself is held in one or two forms, identity and gzip, each made on first
// demand (forms.go): read them with Body and GzipBody, and never modify
// what they return.
type Entry struct {
	// ETag is the strong ETag of the identity body, quoted: a 64-bit xxHash
	// of the bytes, in hex. Strong, because it changes with any byte of the
	// body.
	ETag string
	// Stored is when the page was fetched, by the cache's clock (for a page
	// from the shared tier, by the clock of the replica that fetched it).
	Stored time.Time
	// TTL is how long after Stored the page is fresh; zero for a BYPASS
	// entry, which is never stored.
	TTL time.Duration
	// Immutable: the page is settled (policy.go), for Cache-Control's
	// immutable directive.
	Immutable bool

	gzipETag string
	// Stale windows of the policy at insert, negative ones as zero: a reload
	// changes later entries only.
	swr, sie time.Duration
	// refreshing is scheduling state, not page content: set while the
	// background refresh of this entry runs, so a burst of stale hits starts
	// one refresh.
	refreshing atomic.Bool

	forms
}

// Age is how long ago the page was fetched (Age header); never negative.
func (e *Entry) Age(now time.Time) time.Duration {
	return max(now.Sub(e.Stored), 0)
}

// FreshFor is the freshness left, never negative: max-age of Cache-Control.
// It is zero for a stale or BYPASS entry.
func (e *Entry) FreshFor(now time.Time) time.Duration {
	return max(e.TTL-e.Age(now), 0)
}

// GzipETag is the ETag of the gzip representation. RFC 9110 section 8.8.3:
// a strong validator differs between representations, and the gzip bytes are
// another representation of the same page, so the identity tag gets a
// "-gzip" suffix inside its quotes.
func (e *Entry) GzipETag() string { return e.gzipETag }

// freshness is where an entry stands at a given time.
type freshness uint8

const (
	fresh      freshness = iota
	revalidate           // inside stale_while_revalidate: serve, refresh
	expired              // past it: fetch; maybe serve if the fetch fails
	unusable             // past every window
)

// state judges the entry by the injected clock. ristretto's own expiry runs
// on the wall clock and is set later than every window (store.go), so it only
// ever drops entries this function already calls unusable.
func (e *Entry) state(now time.Time) freshness {
	age := now.Sub(e.Stored)
	switch {
	case age < e.TTL:
		return fresh
	case e.swr > 0 && age <= e.TTL+e.swr:
		return revalidate
	case e.sie > 0 && age <= e.TTL+e.sie:
		return expired
	}
	return unusable
}

// stateSince is state for a caller that takes no page stored before since
// (GetSince): an older page is at best expired, the page to serve if the
// fetch fails.
func (e *Entry) stateSince(now, since time.Time) freshness {
	st := e.state(now)
	if st != unusable && e.Stored.Before(since) {
		return expired
	}
	return st
}

// servableOnError: RFC 5861 stale-if-error, "up to" the window past the TTL.
func (e *Entry) servableOnError(now time.Time) bool {
	return e.sie > 0 && now.Sub(e.Stored) <= e.TTL+e.sie
}

// etags returns the identity and gzip ETags of body, computed once, at
// insert: xxHash is cheap next to the fetch that brought the body.
func etags(body []byte) (identity, gzipped string) {
	var sum [8]byte
	binary.BigEndian.PutUint64(sum[:], xxhash.Sum64(body))
	var buf [1 + 16 + len("-gzip") + 1]byte
	b := append(buf[:0], '"')
	b = hex.AppendEncode(b, sum[:])
	identity = string(append(b, '"'))
	gzipped = string(append(b, `-gzip"`...))
	return identity, gzipped
}
