// Package fetcherr is why the edge could not get a page, as far as a
// client may learn it: Error and its Reason, which the legacy host's client
// (proxy/upstream) returns and the proxy's error table answers; Transient,
// whether a stale page may answer in its place; and the failure notice
// (Encode, Decode) that carries such an error from the replica that
// fetched for the fleet to the replicas waiting on it.
//
// It sits below the cache so that the cache can read and carry these
// errors itself: it imports nothing of the edge but limits, whose shield
// refusal is one of them. Its home is under cache, as configerr's is: the
// cache may not import proxy/.
package fetcherr

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"tradergate/limits"
)

// Reason is what went wrong with a page the edge could not get. The proxy's
// error table turns each into the client's status and message; neither
// this package nor upstream decides what a client is told.
type Reason uint8

const (
	// Timeout: upstream.timeout passed before a page came.
	Timeout Reason = iota + 1
	// Unreachable: no connection to the legacy host.
	Unreachable
	// Failed: the legacy host answered 5xx, or broke off mid-answer.
	Failed
	// Invalid: the answer is not the legacy API's (no envelope, bad JSON,
	// a redirect, an encoding not asked for).
	Invalid
	// TooLarge: the body is over upstream.max_body_bytes.
	TooLarge
	// Credential: the legacy host refused the edge's own key (401/403).
	Credential
	// RateLimited: the legacy host said 429, or the edge is holding back
	// after one.
	RateLimited
	// Unavailable: the route's breaker is open.
	Unavailable
	// Refused: the legacy host refused the request as the client's fault
	// (a 4xx other than 401/403/429); Status and Message are its own.
	Refused
)

// Error is a page the edge could not get. It carries only what the client
// may learn; what the retry loop and the breaker need to know of the call
// (proxy/upstream's outcome) travels apart from it.
type Error struct {
	Reason Reason
	// Status and Message are the legacy host's, for Refused only.
	Status  int
	Message string
	// RetryAfter, when positive, is when a client may try again.
	RetryAfter time.Duration
	// Err is the cause, for logs only.
	Err error
}

func (e *Error) Error() string {
	s := "upstream: " + e.Reason.String()
	if e.Reason == Refused {
		s += " " + strconv.Itoa(e.Status) + " " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

func (r Reason) String() string {
	switch r {
	case Timeout:
		return "timeout"
	case Unreachable:
		return "unreachable"
	case Failed:
		return "failed"
	case Invalid:
		return "invalid answer"
	case TooLarge:
		return "answer too large"
	case Credential:
		return "credential refused"
	case RateLimited:
		return "rate limited"
	case Unavailable:
		return "breaker open"
	case Refused:
		return "refused"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Transient reports whether err is the legacy host failing or being
// shielded, so that a stale page may answer in its place; never a request
// the legacy host refused as the client's fault.
func Transient(err error) bool {
	if errors.Is(err, limits.ErrShieldFull) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	e, ok := errors.AsType[*Error](err)
	return ok && e.Reason != Refused
}

func failed(err error) *Error { return &Error{Reason: Failed, Err: err} }

// maxMessage caps a legacy message passed on to a client.
const maxMessage = 200

// CleanMessage makes a legacy error message safe to pass on: control
// characters and invalid UTF-8 become spaces, runs of space fold, and it
// is cut at maxMessage bytes on a rune boundary. The legacy host is not
// ours: its text must not smuggle anything into a client's terminal or
// log.
func CleanMessage(msg string) string {
	var b strings.Builder
	space := false
	for _, r := range msg {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if b.Len()+utf8.RuneLen(r) > maxMessage {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// A replica that fetched a page for the fleet and failed tells the
// replicas waiting on it why (the cache's shared tier, cache/l2flight.go),
// so that they answer what it would have answered, or serve stale, rather
// than each call the legacy host in turn. Encode and Decode are that
// message's form: "v1|<reason>|<status>|<retry-after ms>|<message>".
// Only what a client may learn travels; the cause stays in the fetching
// replica's log.

// Encode is err as the fleet's failure notice carries it.
func Encode(err error) []byte {
	r, status, retry, msg := Failed, 0, time.Duration(0), ""
	var e *Error
	var full *limits.ShieldFullError
	switch {
	case errors.As(err, &e):
		r, status, retry, msg = e.Reason, e.Status, e.RetryAfter, e.Message
	case errors.As(err, &full):
		r, retry = busy, full.RetryAfter
	case errors.Is(err, context.DeadlineExceeded):
		r = Timeout
	}
	return []byte("v1|" + strconv.Itoa(int(r)) + "|" + strconv.Itoa(status) + "|" +
		strconv.FormatInt(retry.Milliseconds(), 10) + "|" + CleanMessage(msg))
}

// busy stands for the upstream shield's refusal on the wire; it is never
// an Error's Reason.
const busy Reason = 255

// Decode reads a failure notice; one it cannot read is a Failed.
func Decode(b []byte) error {
	parts := strings.SplitN(string(b), "|", 5)
	if len(parts) != 5 || parts[0] != "v1" {
		return failed(errors.New("another replica's fetch failed (unreadable notice)"))
	}
	r, _ := strconv.Atoi(parts[1])
	status, _ := strconv.Atoi(parts[2])
	ms, _ := strconv.ParseInt(parts[3], 10, 64)
	retry := time.Duration(ms) * time.Millisecond
	cause := errors.New("another replica's fetch failed")
	switch reason := Reason(r); {
	case reason == busy:
		return &limits.ShieldFullError{RetryAfter: retry}
	case reason == Refused && status >= 400 && status < 500:
		return &Error{Reason: Refused, Status: status, Message: CleanMessage(parts[4]), Err: cause}
	case reason >= Timeout && reason <= Unavailable:
		return &Error{Reason: reason, RetryAfter: retry, Err: cause}
	}
	return failed(cause)
}
