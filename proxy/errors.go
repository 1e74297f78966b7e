package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"tradergate/limits"
	"tradergate/normalize"
)

// Messages of SPEC "Errors". The first five are the spec's own words; the
// spec shows no bodies for 403 and 500, so those are ours.
const (
	msgInvalidAddress = "Invalid address format"
	msgInvalidTxHash  = "Invalid txHash format"
	msgFilterRequired = "tokenId, marketId, or conditionId is required"
	msgUnauthorized   = "Missing or invalid API key"
	msgRateLimited    = "Rate limit exceeded"
	msgForbidden      = "API key is not allowed to use this resource"
	msgInternal       = "Internal server error"
	msgNotFound       = "Not found"
	msgMethod         = "Method not allowed"
)

// Error is an answer the edge gives as a variant A failure body. Err, the
// cause, is for logs only: it never reaches a client.
type Error struct {
	Status     int
	Message    string
	RetryAfter time.Duration // sent as Retry-After when > 0
	Err        error

	// What the retry loop and the breaker need to know of an upstream
	// failure (issue 5), never sent.
	upstreamStatus     int           // the legacy host's status, when it answered
	upstreamRetryAfter time.Duration // its Retry-After, when it sent one
	upstream429        bool          // it asked us to slow down
	connFailed         bool          // it could not be reached, or broke off
}

func (e *Error) Error() string {
	if e.Err != nil {
		return strconv.Itoa(e.Status) + " " + e.Message + ": " + e.Err.Error()
	}
	return strconv.Itoa(e.Status) + " " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func badRequest(msg string) *Error { return &Error{Status: http.StatusBadRequest, Message: msg} }

// StatusClientClosed is logged (never sent) when the client went away
// before its answer was ready, as nginx does.
const StatusClientClosed = 499

// AsError maps any error to the status and variant A message the client
// gets. It is the one place that decides (STYLE.md "Errors"): upstream
// timeout 504, upstream unreachable or invalid 502, breaker open 503, client
// gone 499.
func AsError(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if e, ok := errors.AsType[*limits.ShieldFullError](err); ok {
		return &Error{Status: http.StatusServiceUnavailable, Message: msgUpstreamBusy, RetryAfter: e.RetryAfter, Err: err}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Status: StatusClientClosed, Message: "Client closed request", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Message: msgUpstreamTimeout, Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Message: msgInternal, Err: err}
}

// errShuttingDown is the cause of a request's cancellation when the edge
// stops before the request could finish.
var errShuttingDown = errors.New("server shutting down")

const msgShuttingDown = "Server shutting down"

// writeError sends err as a variant A failure body.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := AsError(err)
	if e.Status == StatusClientClosed && context.Cause(r.Context()) == errShuttingDown {
		// Not the client that left: the edge is stopping. Say so, and
		// when to come back (to another replica, or this one restarted).
		e = &Error{Status: http.StatusServiceUnavailable, Message: msgShuttingDown, RetryAfter: time.Second, Err: err}
		w.Header().Set("Connection", "close")
	}
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", retryAfterSeconds(e.RetryAfter))
	}
	// Errors are never cached, by us or by anyone downstream (DESIGN.md).
	h.Set("Cache-Control", "no-store")
	status := e.Status
	if status == StatusClientClosed {
		// Nobody is listening; the status is for the access log only.
		recordStatus(r, status)
		return
	}
	body := normalize.AppendError(make([]byte, 0, 64+len(e.Message)), e.Message)
	writeBody(w, r, status, body)
}

// writeBody sends a JSON body with its length.
func writeBody(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// retryAfterSeconds renders d as whole seconds, rounded up and at least 1:
// a client told "0" would retry at once.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}
