package limits

import (
	"strconv"
	"time"
	"unsafe"
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
	// (Allowed says which way). It wraps errStoreUnavailable.
	StoreErr error

	// window is the window charged (nil for a Decision made by hand),
	// which keeps the fields that do not change with every request
	// formatted (fixedFields).
	window *windowKey
}

// AppendHeaders hands the rate limit fields of d for a response sent at
// now to field, "" for a field that must not be sent (docs/CONTRACT.md
// "Limits": every response carries them):
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
// Names are handed over as docs/openapi.json spells them
// (X-RateLimit-Limit, RateLimit-Policy): field names are case-insensitive
// (RFC 9110 section 5.1), but a client's own code may not be, and the
// fronts send names as they are given.
//
// It runs on every response, so it does as little as it can there: of the
// fields' values, only the remaining count changes with each request, and
// the rest is formatted once a second per window (fixedFields). The values
// that hold the count are appended to *buf and handed over as strings over
// its bytes: the caller must not write those bytes again while it uses
// them (appending is fine). A front that keeps one buffer per request
// writes the fields without allocating.
func (d Decision) AppendHeaders(buf *[]byte, now time.Time, field func(name, value string)) {
	toReset := CeilSeconds(d.Reset.Sub(now))
	f := d.fixed(toReset)
	field("X-RateLimit-Limit", f.limit)
	field("RateLimit-Policy", f.policy)
	if f.reset != "" {
		field("X-RateLimit-Reset", f.reset)
	}
	if d.StoreErr == nil {
		b := *buf
		start := len(b)
		b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
		mid := len(b)
		b = append(b, f.rateLimitHead...)
		b = append(b, b[start:mid]...)
		b = append(b, f.rateLimitTail...)
		*buf = b
		field("X-RateLimit-Remaining", unsafe.String(&b[start], mid-start))
		field("RateLimit", unsafe.String(&b[mid], len(b)-mid))
	} else {
		field("X-RateLimit-Remaining", "")
		field("RateLimit", "")
	}
	switch {
	case d.Allowed:
	case d.StoreErr != nil:
		field("Retry-After", storeErrorRetryAfter)
	default:
		field("Retry-After", f.retryAfter)
	}
}

// storeErrorRetryAfter is the Retry-After of a refusal caused by a store
// failure (on_store_error: deny). How long Redis stays away is unknown; one
// second is the shortest hint, and clients double their waits from there
// (docs/CONTRACT.md "Limits" rule 3).
const storeErrorRetryAfter = "1"

// fixedFields are the values of a window's rate limit fields that do not
// change with every request: they depend on the plan, the window's end and
// the whole seconds left until it, so they change once a second.
type fixedFields struct {
	// What they were made from.
	plan    string
	limitN  int64
	length  time.Duration
	toReset int64

	limit, policy, reset, retryAfter string
	// The RateLimit value around the remaining count:
	// "<plan>";r=<remaining>;t=<seconds until reset>.
	rateLimitHead, rateLimitTail string
}

// fixed returns the fixed fields of d toReset seconds before its window
// ends: its window's, when they were made for the same plan and second,
// else new ones, which the window keeps for the requests after this one.
func (d Decision) fixed(toReset int64) *fixedFields {
	w := d.window
	if w != nil {
		if f := w.fields.Load(); f != nil && f.toReset == toReset && f.limitN == d.Limit && f.length == d.Window && f.plan == d.Policy {
			return f
		}
	}
	f := &fixedFields{plan: d.Policy, limitN: d.Limit, length: d.Window, toReset: toReset}
	f.limit = strconv.FormatInt(d.Limit, 10)
	policy := appendSFString(nil, d.Policy)
	f.rateLimitHead = string(append(policy, ";r="...))
	policy = append(policy, ";q="...)
	policy = strconv.AppendInt(policy, d.Limit, 10)
	policy = append(policy, ";w="...)
	f.policy = string(strconv.AppendInt(policy, int64(d.Window/time.Second), 10))
	if !d.Reset.IsZero() {
		f.reset = strconv.FormatInt(ceilUnix(d.Reset), 10)
	}
	f.rateLimitTail = ";t=" + strconv.FormatInt(toReset, 10)
	f.retryAfter = strconv.FormatInt(max(toReset, 1), 10)
	if w != nil {
		w.fields.Store(f)
	}
	return f
}

// CeilSeconds rounds d up to whole seconds, never below 0: a client told
// to come back after a reset must not arrive before it. Every whole-second
// figure sent to a client (Retry-After, RateLimit's t) goes through it.
func CeilSeconds(d time.Duration) int64 {
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
