package proxy

import (
	"context"
	"errors"
	"strconv"
	"time"

	"tradergate/limits"
	"tradergate/proxy/route"
	"tradergate/proxy/upstream"
	"tradergate/proxy/wire"
)

// The error table: every failure the edge answers, with its status, its
// variant A message and the headers it carries. It is the one place that
// decides what a client is told; the rest of the code returns errors
// (route.Error, upstream.Error, limits' shield error, context errors, or
// the answers below), and asError maps them here. README's "Errors" table
// is a copy of this one, checked by TestREADMEErrorTable.

// failure names one row of the table.
type failure uint8

const (
	failBadRequest failure = iota + 1
	failUpstreamRefused
	failUnauthorized
	failForbidden
	failNotFound
	failMethod
	failBody
	failURITooLong
	failRateLimited
	failInternal
	failUpstreamUnreachable
	failUpstreamError
	failUpstreamInvalid
	failUpstreamTooLarge
	failUpstreamCredential
	failUpstreamUnavailable
	failUpstreamRateLimited
	failUpstreamBusy
	failLimitStore
	failShuttingDown
	failUpstreamTimeout
	failClientClosed
	failHeaderTooLarge
	failRequestTimeout
	failMalformed
	failNoSnapshot
	failTooManyEvents
	failAmbiguousAuth
	failLegacyRetired
	failHTTPVersion
	failStreamCap
	numFailures
)

// row is one failure: its status, its message ("" when the message comes
// with the error, as about says), and for README when it happens and what
// headers it adds.
type row struct {
	status  int
	message string
	about   string // what the message is, when it comes with the error
	when    string
	headers string
}

var errorTable = [numFailures]row{
	failBadRequest:          {400, "", "the rule's own words, e.g. `Invalid address format`, `Invalid limit: ...`", "a rule of the contract is broken (docs/CONTRACT.md)", ""},
	failUpstreamRefused:     {0, "", "the legacy host's message, with its status", "the legacy host refused the request as the client's fault", ""},
	failUnauthorized:        {401, "Missing or invalid API key", "", "missing or unknown key", "`WWW-Authenticate: Bearer`"},
	failForbidden:           {403, "API key is not allowed to use this resource", "", "key not allowed on the route", ""},
	failNotFound:            {404, "Not found", "", "no such path", ""},
	failMethod:              {405, "Method not allowed", "", "not GET or HEAD", "`Allow: GET, HEAD`"},
	failBody:                {400, "Request body not allowed", "", "a request with a body", "`Connection: close`"},
	failURITooLong:          {414, "URI too long", "", "a URL over 8 KiB", "`Connection: close`"},
	failRateLimited:         {429, "Rate limit exceeded", "", "the key's (or address's) allowance is spent", "`Retry-After`"},
	failStreamCap:           {429, "", "says how many streams the key may hold open", "a stream past the key's open streams (streams.max_per_key)", "`Retry-After`"},
	failInternal:            {500, "Internal server error", "", "a bug (logged with a stack)", ""},
	failUpstreamUnreachable: {502, "Upstream unreachable", "", "no connection to the legacy host", ""},
	failUpstreamError:       {502, "Upstream error", "", "the legacy host answered 5xx or broke off", ""},
	failUpstreamInvalid:     {502, "Invalid upstream response", "", "the legacy host's answer is not its API's", ""},
	failUpstreamTooLarge:    {502, "Upstream response too large", "", "a legacy body over upstream.max_body_bytes", ""},
	failUpstreamCredential:  {502, "Upstream rejected the gateway's credential", "", "the legacy host refused the edge's own key", ""},
	failUpstreamUnavailable: {503, "Upstream unavailable", "", "the route's circuit breaker is open and nothing stale is held", "`Retry-After`"},
	failUpstreamRateLimited: {503, "Upstream rate limited", "", "the legacy host answered 429", "its `Retry-After`"},
	failUpstreamBusy:        {503, "Upstream busy", "", "the upstream shield had no slot and nothing stale is held", "`Retry-After`"},
	failLimitStore:          {503, "Rate limit unavailable", "", "the limiter's store is down and `on_store_error: deny`", "`Retry-After`"},
	failShuttingDown:        {503, "Server shutting down", "", "the edge stopped before the answer was ready", "`Retry-After`, `Connection: close`"},
	failUpstreamTimeout:     {504, "Upstream timeout", "", "the legacy host was too slow", ""},
	failHeaderTooLarge:      {431, "Request header fields too large", "", "request line and headers over server.max_header_bytes", "`Connection: close`"},
	failRequestTimeout:      {408, "Request timeout", "", "the request did not arrive within server.read_header_timeout", "`Connection: close`"},
	failMalformed:           {400, "Malformed request", "", "the request is not HTTP/1.1 as the edge reads it", "`Connection: close`"},
	failHTTPVersion:         {505, "HTTP version not supported", "", "a request line naming a version other than HTTP/1.0 or HTTP/1.1", "`Connection: close`"},
	failNoSnapshot:          {404, "No order book snapshot at or before the requested time", "", "orderbook_book: no `book` event at or before `at`", ""},
	failTooManyEvents:       {422, "", "says how many, and to pick an `at` nearer a snapshot", "orderbook_book: more than orderbook.max_events price changes between the snapshot and `at`", ""},
	failAmbiguousAuth:       {400, "Only one Authorization header is allowed", "", "the request carries the Authorization field more than once", ""},
	failClientClosed:        {wire.StatusClientClosed, "Client closed request", "", "the client left first (logged, never sent)", ""},
	failLegacyRetired:       {410, "", "says why, and names the /v1 path and query to use instead", "a legacy path past `legacy.sunset`, in a brownout, or for a key with `legacy: retired`", "`Link` (successor-version)"},
}

// legacyMessages is the table's variant B column: what a client of the
// legacy paths (/open-api/v1/...) is told instead, where the legacy
// host's own contract words it differently. Everywhere else the message
// is the same; the envelope is variant B either way (exchange.fail).
var legacyMessages = [numFailures]string{
	failRateLimited: "Too many requests. Please slow down.",
}

// edgeError is one answer of the table.
type edgeError struct {
	kind failure
	// status and message override the row's, for the rows whose message
	// (and, for a legacy refusal, status) comes with the error.
	status  int
	message string
	// RetryAfter is sent as Retry-After when positive.
	RetryAfter time.Duration
	// Err is the cause, for logs only: it never reaches a client.
	Err error
}

// Status is the HTTP status of the answer.
func (e *edgeError) Status() int {
	if e.status != 0 {
		return e.status
	}
	return errorTable[e.kind].status
}

// Message is the variant A message of the answer.
func (e *edgeError) Message() string {
	if e.message != "" {
		return e.message
	}
	return errorTable[e.kind].message
}

// LegacyMessage is the message of the answer on a legacy path.
func (e *edgeError) LegacyMessage() string {
	if e.message == "" && legacyMessages[e.kind] != "" {
		return legacyMessages[e.kind]
	}
	return e.Message()
}

func (e *edgeError) Error() string {
	s := strconv.Itoa(e.Status()) + " " + e.Message()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *edgeError) Unwrap() error { return e.Err }

// fail is the answer of a row whose message is fixed.
func fail(kind failure) *edgeError { return &edgeError{kind: kind} }

// asError maps any error to its answer in the table: the one function that
// decides what a client is told.
func asError(err error) *edgeError {
	if e, ok := errors.AsType[*edgeError](err); ok {
		return e
	}
	if e, ok := errors.AsType[*route.Error](err); ok {
		return &edgeError{kind: failBadRequest, message: e.Message, Err: err}
	}
	if e, ok := errors.AsType[*upstream.Error](err); ok {
		return fromUpstream(e)
	}
	if e, ok := errors.AsType[*limits.ShieldFullError](err); ok {
		return &edgeError{kind: failUpstreamBusy, RetryAfter: e.RetryAfter, Err: err}
	}
	switch {
	case errors.Is(err, wire.ErrShuttingDown):
		// A flight this request joined ended with its leader's request,
		// at the drain's deadline (cache.Options.Inline).
		return &edgeError{kind: failShuttingDown, RetryAfter: time.Second, Err: err}
	case errors.Is(err, context.Canceled):
		return &edgeError{kind: failClientClosed, Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &edgeError{kind: failUpstreamTimeout, Err: err}
	}
	return &edgeError{kind: failInternal, Err: err}
}

// upstreamFailures gives each upstream.Reason its row; a reason missing
// here (none is) would answer 502 Upstream error.
var upstreamFailures = [...]failure{
	upstream.Timeout:     failUpstreamTimeout,
	upstream.Unreachable: failUpstreamUnreachable,
	upstream.Failed:      failUpstreamError,
	upstream.Invalid:     failUpstreamInvalid,
	upstream.TooLarge:    failUpstreamTooLarge,
	upstream.Credential:  failUpstreamCredential,
	upstream.RateLimited: failUpstreamRateLimited,
	upstream.Unavailable: failUpstreamUnavailable,
	upstream.Refused:     failUpstreamRefused,
}

// fromUpstream maps what went wrong with the legacy host.
func fromUpstream(e *upstream.Error) *edgeError {
	kind := failUpstreamError
	if int(e.Reason) < len(upstreamFailures) && upstreamFailures[e.Reason] != 0 {
		kind = upstreamFailures[e.Reason]
	}
	if kind == failUpstreamRefused {
		// The legacy host's own status and message, as it answered them.
		return &edgeError{kind: kind, status: e.Status, message: e.Message, Err: e}
	}
	return &edgeError{kind: kind, RetryAfter: e.RetryAfter, Err: e}
}

// retryAfterSeconds renders d as whole seconds, rounded up and at least 1:
// a client told "0" would retry at once. Every Retry-After the edge sends
// goes through it.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(limits.CeilSeconds(d), 1), 10)
}
