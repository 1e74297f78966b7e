package upstream

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"tradergate/limits"
)

// A replica that fetched a page for the fleet and failed tells the
// replicas waiting on it why (cache: the shared tier's failure notice), so
// that they answer what it would have answered, or serve stale, rather
// than each call the legacy host in turn. EncodeError and DecodeError are
// that message's form: "v1|<reason>|<status>|<retry-after ms>|<message>".
// Only what a client may learn travels; the cause stays in the fetching
// replica's log.

// EncodeError is err as the fleet's failure notice carries it.
func EncodeError(err error) []byte {
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
		strconv.FormatInt(retry.Milliseconds(), 10) + "|" + cleanMessage(msg))
}

// busy stands for the upstream shield's refusal on the wire; it is never
// an Error's Reason.
const busy Reason = 255

// DecodeError reads a failure notice; one it cannot read is a Failed.
func DecodeError(b []byte) error {
	parts := strings.SplitN(string(b), "|", 5)
	if len(parts) != 5 || parts[0] != "v1" {
		return fail(Failed, errors.New("another replica's fetch failed (unreadable notice)"))
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
		return &Error{Reason: Refused, Status: status, Message: cleanMessage(parts[4]), Err: cause}
	case reason >= Timeout && reason <= Unavailable:
		return &Error{Reason: reason, RetryAfter: retry, Err: cause}
	}
	return fail(Failed, cause)
}
