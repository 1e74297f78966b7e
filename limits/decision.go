package limits

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Decision is the outcome of charging one request to a bucket.
//
// The proxy answers a refusal by its cause: StoreErr == nil means the
// allowance is spent (429, SPEC "Errors"); StoreErr != nil means the store
// failed and on_store_error is deny (503).
type Decision struct {
	// Policy is the plan name (or "anonymous"), for RateLimit-Policy.
	Policy string
	// Limit is the plan's allowance per window.
	Limit int64
	// Remaining is what is left in this window after this request, counting
	// down one per request to 0. It is -1 (unknown) when StoreErr is set.
	Remaining int64
	// Reset is when the current window ends, a whole second. It is known
	// even when the store fails, since windows follow the clock (window.go).
	Reset time.Time
	// Window is the plan's window length.
	Window time.Duration
	// Allowed says whether the request may proceed.
	Allowed bool
	// StoreErr is non-nil when the store failed and on_store_error decided
	// (Allowed says which way). It wraps ErrStoreUnavailable.
	StoreErr error
}

// storeErrorRetryAfter is the Retry-After of a refusal caused by a store
// failure (on_store_error: deny). How long Redis stays away is unknown; one
// second is the shortest hint, and clients double their waits from there
// (SPEC "Limits" rule 3).
const storeErrorRetryAfter = 1

// SetHeaders writes the rate limit fields of d for a response sent at now
// (SPEC "Limits": every response carries them):
//
//	X-RateLimit-Limit      the plan's allowance
//	X-RateLimit-Remaining  requests left in this window
//	X-RateLimit-Reset      Unix seconds at which this window ends
//	RateLimit-Policy       "<plan>";q=<allowance>;w=<window seconds>
//	RateLimit              "<plan>";r=<remaining>;t=<seconds until reset>
//	Retry-After            on a refusal only: whole seconds until reset, >= 1
//
// The last three follow draft-ietf-httpapi-ratelimit-headers-11. On a
// refusal Retry-After equals RateLimit's t and X-RateLimit-Reset minus now
// (rounded up), so all three send the client back at the same instant.
//
// When the store failed (d.StoreErr != nil) only what is known without it is
// written: X-RateLimit-Limit, X-RateLimit-Reset and RateLimit-Policy describe
// the plan and the clock. X-RateLimit-Remaining and RateLimit (whose r is
// required) are omitted rather than invented: a made-up remaining count
// would mislead a client pacing itself by it. A deny refusal carries
// Retry-After: 1.
//
// Header names are set in Go's canonical form (X-Ratelimit-Limit); field
// names are case-insensitive (RFC 9110 section 5.1).
func (d Decision) SetHeaders(h http.Header, now time.Time) {
	policy := sfString(d.Policy)
	limit := strconv.FormatInt(d.Limit, 10)
	h.Set("X-RateLimit-Limit", limit)
	h.Set("RateLimit-Policy", policy+";q="+limit+";w="+strconv.FormatInt(int64(d.Window/time.Second), 10))
	if !d.Reset.IsZero() {
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(d.Reset), 10))
	}
	toReset := ceilSeconds(d.Reset.Sub(now))
	if d.StoreErr != nil {
		h.Del("X-RateLimit-Remaining")
		h.Del("RateLimit")
		if !d.Allowed {
			h.Set("Retry-After", strconv.Itoa(storeErrorRetryAfter))
		}
		return
	}
	remaining := strconv.FormatInt(max(d.Remaining, 0), 10)
	h.Set("X-RateLimit-Remaining", remaining)
	h.Set("RateLimit", policy+";r="+remaining+";t="+strconv.FormatInt(toReset, 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.FormatInt(max(toReset, 1), 10))
	}
}

// ceilSeconds rounds d up to whole seconds, never below 0: a client told
// to come back after the window has reset must not arrive before it.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// ceilUnix is t in Unix seconds rounded up, for the same reason.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// sfString serialises a plan name as a Structured Field String (RFC 9651
// section 3.3.3), the form draft-11 gives policy names. Characters a String
// cannot hold (controls, non-ASCII) become '_'; config plan names are
// expected to be plain ASCII.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
