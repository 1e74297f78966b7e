package upstream

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"tradergate/cache/fetcherr"
	"tradergate/normalize"
)

// Error is a page the edge could not get, and Reason what went wrong:
// fetcherr's, below the cache, so that the cache can carry them to the
// replicas waiting on a fetch that failed (fetcherr.Encode) without asking
// this package what they mean. The names here are the ones this package's
// code and the error table use.
type (
	Error  = fetcherr.Error
	Reason = fetcherr.Reason
)

// The reasons, as fetcherr documents them.
const (
	Timeout     = fetcherr.Timeout
	Unreachable = fetcherr.Unreachable
	Failed      = fetcherr.Failed
	Invalid     = fetcherr.Invalid
	TooLarge    = fetcherr.TooLarge
	Credential  = fetcherr.Credential
	RateLimited = fetcherr.RateLimited
	Unavailable = fetcherr.Unavailable
	Refused     = fetcherr.Refused
)

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

// isTimeout: err says it is a timeout, as net.Error's do and fasthttp's
// ErrTimeout (which has no Temporary, so is no net.Error).
func isTimeout(err error) bool {
	te, ok := errors.AsType[interface {
		error
		Timeout() bool
	}](err)
	return ok && te.Timeout()
}

// statusError maps a non-200 legacy answer: its status, its Retry-After
// field and its body.
func statusError(status int, retryAfter string, body []byte) (outcome, error) {
	out := outcome{status: status, retryAfter: parseRetryAfter(retryAfter)}
	_, msg, ok := normalize.Failure(body)
	if !ok && status < 500 && status != http.StatusTooManyRequests {
		// A 4xx without a variant B body is not the legacy API talking
		// (a wrong base_url, a proxy in between): the client's request is
		// not at fault.
		return out, fail(Invalid, errors.New("upstream "+strconv.Itoa(status)+" "+http.StatusText(status)+" without an envelope"))
	}
	err := mapStatus(status, msg, out.retryAfter)
	out.asked429 = status == http.StatusTooManyRequests
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
		if msg = fetcherr.CleanMessage(msg); msg == "" {
			msg = http.StatusText(code)
		}
		return &Error{Reason: Refused, Status: code, Message: msg, Err: cause}
	default:
		return fail(Failed, cause)
	}
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
