package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"tradergate/limits"
	"tradergate/normalize"
)

// Reason is what went wrong with a page the edge could not get. The proxy's
// error table turns each into the client's status and message; this
// package never decides what a client is told.
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
// (outcome) travels apart from it.
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

// outcome is what one call tells the retry loop, the breaker and the 429
// hold, never the client.
type outcome struct {
	status     int           // the legacy host's status, when it answered
	retryAfter time.Duration // its Retry-After, when it sent one
	asked429   bool          // it asked us to slow down
	connFailed bool          // it could not be reached, or broke off
}

func fail(r Reason, err error) *Error { return &Error{Reason: r, Err: err} }

// transportError classifies a failed call: our deadline is a Timeout, the
// caller's cancellation stays a context error (499 in logs), anything else
// is reason r.
func transportError(ctx context.Context, err error, r Reason) (outcome, error) {
	if ctx.Err() == context.DeadlineExceeded || isTimeout(err) {
		return outcome{}, fail(Timeout, err)
	}
	if ctx.Err() != nil {
		return outcome{}, ctx.Err()
	}
	return outcome{connFailed: true}, fail(r, err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// statusError maps a non-200 legacy answer.
func statusError(resp *http.Response, body []byte) (outcome, error) {
	out := outcome{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	_, msg, ok := normalize.Failure(body)
	if !ok && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
		// A 4xx without a variant B body is not the legacy API talking
		// (a wrong base_url, a proxy in between): the client's request is
		// not at fault.
		return out, fail(Invalid, errors.New("upstream "+resp.Status+" without an envelope"))
	}
	err := mapStatus(resp.StatusCode, msg, out.retryAfter)
	out.asked429 = resp.StatusCode == http.StatusTooManyRequests
	return out, err
}

// mapStatus is the table of the legacy host's failure statuses.
func mapStatus(code int, msg string, retryAfter time.Duration) *Error {
	cause := errors.New("upstream answered " + strconv.Itoa(code) + ": " + msg)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// The edge's own credential was refused: not the client's fault,
		// and the upstream message must not reach the client.
		return fail(Credential, cause)
	case code == http.StatusTooManyRequests:
		// The edge as a whole is over the legacy host's limit, not this
		// client; it may come back after the legacy host's Retry-After.
		return &Error{Reason: RateLimited, RetryAfter: max(retryAfter, time.Second), Err: cause}
	case code >= 400 && code < 500:
		if msg = cleanMessage(msg); msg == "" {
			msg = http.StatusText(code)
		}
		return &Error{Reason: Refused, Status: code, Message: msg, Err: cause}
	default:
		return fail(Failed, cause)
	}
}

// maxMessage caps a legacy message passed on to a client.
const maxMessage = 200

// cleanMessage makes a legacy error message safe to pass on: control
// characters and invalid UTF-8 become spaces, runs of space fold, and it
// is cut at maxMessage bytes on a rune boundary. The legacy host is not
// ours: its text must not smuggle anything into a client's terminal or
// log.
func cleanMessage(msg string) string {
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

// parseRetryAfter reads delay-seconds or an HTTP-date (RFC 9110 section
// 10.2.3); zero when absent or unreadable.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
