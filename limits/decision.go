package limits

import (
	"net/http"
	"strconv"
	"time"
)

// Decision is the outcome of charging one request to a bucket.
//
// The proxy answers a refusal by its cause: StoreErr == nil means the
// allowance is spent (429, docs/CONTRACT.md "Errors"); StoreErr != nil means the store
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
// (docs/CONTRACT.md "Limits" rule 3).
const storeErrorRetryAfter = 1

// SetHeaders writes the rate limit fields of d for a response sent at now
// (docs/CONTRACT.md "Limits": every response carries them):
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
//
// It runs on every response: the values are appended to one buffer, and
// the fields are assigned under their canonical names without
// http.Header.Set's canonicalization.
func (d Decision) SetHeaders(h http.Header, now time.Time) {
	buf := make([]byte, 0, 192)
	d.AppendHeaders(&buf, now, func(name string, value []byte) {
		if value == nil {
			delete(h, name)
			return
		}
		h[name] = []string{string(value)}
	})
}

// AppendHeaders is SetHeaders for a front that is not net/http: it
// appends the fields' values to *buf, then hands each field to field with
// its value as a slice of *buf (nil: the field must not be sent). The
// caller owns the buffer, so a front that keeps one per request writes the
// fields without allocating.
func (d Decision) AppendHeaders(buf *[]byte, now time.Time, field func(name string, value []byte)) {
	b := *buf
	base := len(b)
	var cut [6]int // ends of the values in b, in the order below
	b = strconv.AppendInt(b, d.Limit, 10)
	cut[0] = len(b) // X-RateLimit-Limit
	policy := len(b)
	b = appendSFString(b, d.Policy)
	name := len(b)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, int64(d.Window/time.Second), 10)
	cut[1] = len(b) // RateLimit-Policy
	if !d.Reset.IsZero() {
		b = strconv.AppendInt(b, ceilUnix(d.Reset), 10)
	}
	cut[2] = len(b) // X-RateLimit-Reset
	toReset := ceilSeconds(d.Reset.Sub(now))
	ok := d.StoreErr == nil
	if ok {
		b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	}
	cut[3] = len(b) // X-RateLimit-Remaining
	if ok {
		b = append(b, b[policy:name]...)
		b = append(b, ";r="...)
		b = append(b, b[cut[2]:cut[3]]...)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, toReset, 10)
	}
	cut[4] = len(b) // RateLimit
	switch {
	case d.Allowed:
	case !ok:
		b = strconv.AppendInt(b, storeErrorRetryAfter, 10)
	default:
		b = strconv.AppendInt(b, max(toReset, 1), 10)
	}
	cut[5] = len(b) // Retry-After
	*buf = b

	field("X-Ratelimit-Limit", b[base:cut[0]])
	field("Ratelimit-Policy", b[policy:cut[1]])
	if !d.Reset.IsZero() {
		field("X-Ratelimit-Reset", b[cut[1]:cut[2]])
	}
	if ok {
		field("X-Ratelimit-Remaining", b[cut[2]:cut[3]])
		field("Ratelimit", b[cut[3]:cut[4]])
	} else {
		field("X-Ratelimit-Remaining", nil)
		field("Ratelimit", nil)
	}
	if !d.Allowed {
		field("Retry-After", b[cut[4]:cut[5]])
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

// appendSFString appends a plan name as a Structured Field String (RFC 9651
// section 3.3.3), the form draft-11 gives policy names. Characters a String
// cannot hold (controls, non-ASCII) become '_'; config plan names are
// expected to be plain ASCII.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
