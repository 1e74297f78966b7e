package native

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Result is what became of one native call. Its String is the result label
// of tradergate_native_requests_total.
type Result uint8

const (
	// OK: a 200 with a JSON body that keeps the contract.
	OK Result = iota
	// Timeout: native.timeout passed before the whole answer came.
	Timeout
	// Status5xx: native answered 5xx.
	Status5xx
	// Status: native answered another status than 200 or 5xx (a 4xx, a
	// redirect): the edge only asks what it has validated.
	Status
	// Transport: no connection, or the answer broke off.
	Transport
	// BadBody: the body is not one JSON value, or is over
	// native.max_body_bytes.
	BadBody
	// ContractBreak: a JSON body that docs/openapi.json does not allow.
	ContractBreak
	// BreakerOpen: the route's native breaker refused the call.
	BreakerOpen
	// Canceled: the caller went away; says nothing of native.
	Canceled
)

var resultNames = [...]string{
	OK: "ok", Timeout: "timeout", Status5xx: "5xx", Status: "status", Transport: "transport",
	BadBody: "bad_body", ContractBreak: "contract_break", BreakerOpen: "breaker_open", Canceled: "canceled",
}

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// failed: the result counts against native (the rollback's error ratio).
func (r Result) failed() bool { return r != OK && r != Canceled }

// Error is a native call that gave no page to serve. The caller serves the
// legacy-derived answer instead.
type Error struct {
	Result Result
	// Status is native's HTTP status, when it answered.
	Status int
	// Err is the cause, for logs; it never holds the credential.
	Err error
}

func (e *Error) Error() string {
	s := "native: " + e.Result.String()
	if e.Status != 0 {
		s += " (status " + strconv.Itoa(e.Status) + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Breakers of native calls: one per route for the calls that serve
// clients, and one per route for shadow calls, so that a flood of
// comparisons never opens the breaker in front of clients. The figures
// follow upstream.breaker's defaults; 5xx, timeouts, transport errors and
// bad bodies are failures, a contract break or a 4xx is native's answer,
// judged by the rollback instead.
const (
	breakerMinRequests = 20
	breakerRatio       = 0.5
	breakerInterval    = 10 * time.Second
	breakerOpenFor     = 5 * time.Second
	breakerProbes      = 3
)

type breaker = gobreaker.TwoStepCircuitBreaker[struct{}]

func newBreaker(name string) *breaker {
	return gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: breakerProbes,
		Interval:    breakerInterval,
		Timeout:     breakerOpenFor,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			return n.Requests >= breakerMinRequests && float64(n.TotalFailures) >= breakerRatio*float64(n.Requests)
		},
		IsSuccessful: func(err error) bool {
			e, ok := errors.AsType[*Error](err)
			return err == nil || ok && (e.Result == ContractBreak || e.Result == Status)
		},
		IsExcluded: func(err error) bool {
			e, ok := errors.AsType[*Error](err)
			return ok && e.Result == Canceled
		},
	})
}

// client calls the native service with the edge's own credential. A
// client's key is never forwarded (docs/ARCHITECTURE.md "Auth before
// cache"). It is rebuilt on Reload; calls already made finish on the old
// one.
type client struct {
	base    string
	auth    string // "Bearer <credential>"; never logged or reported
	timeout time.Duration
	maxBody int64
	http    *http.Client
}

func newClient(cfg Config) *client {
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   min(cfg.Timeout, 2*time.Second),
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout: min(cfg.Timeout, 2*time.Second),
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &client{
		base:    cfg.BaseURL,
		auth:    "Bearer " + cfg.Key,
		timeout: cfg.Timeout,
		maxBody: cfg.MaxBodyBytes,
		http:    &http.Client{Transport: tr, CheckRedirect: noRedirects},
	}
}

// noRedirects: a redirect is an answer to report, not one to follow with
// the edge's credential to wherever it points.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (c *client) close() { c.http.CloseIdleConnections() }

// get asks native for pathAndQuery (the /v1 path and canonical query of a
// validated request) through br, within native.timeout, and returns the
// 200 body when it is one JSON value. The contract is checked by the
// caller, which knows the route.
func (c *client) get(ctx context.Context, br *breaker, pathAndQuery string) ([]byte, *Error) {
	done, err := br.Allow()
	if err != nil {
		return nil, &Error{Result: BreakerOpen, Err: err}
	}
	body, e := c.call(ctx, pathAndQuery)
	if e != nil {
		done(e)
		return nil, e
	}
	done(nil)
	return body, nil
}

func (c *client) call(ctx context.Context, pathAndQuery string) ([]byte, *Error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+pathAndQuery, nil)
	if err != nil {
		return nil, &Error{Result: Transport, Err: err}
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "tradergate")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, err, 0)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, c.maxBody+1)); err != nil {
		return nil, transportError(ctx, err, resp.StatusCode)
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, &Error{Result: Status5xx, Status: resp.StatusCode}
	case resp.StatusCode != http.StatusOK:
		return nil, &Error{Result: Status, Status: resp.StatusCode}
	case int64(buf.Len()) > c.maxBody:
		return nil, &Error{Result: BadBody, Status: resp.StatusCode, Err: errors.New("body over native.max_body_bytes")}
	case !json.Valid(buf.Bytes()):
		return nil, &Error{Result: BadBody, Status: resp.StatusCode, Err: errors.New("body is not JSON")}
	}
	return buf.Bytes(), nil
}

// transportError classifies a call that failed: native.timeout is a
// Timeout, the caller's cancellation is Canceled, anything else Transport.
func transportError(ctx context.Context, err error, status int) *Error {
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return &Error{Result: Timeout, Status: status, Err: errors.New("no answer within native.timeout")}
	case ctx.Err() != nil:
		return &Error{Result: Canceled, Status: status, Err: ctx.Err()}
	}
	return &Error{Result: Transport, Status: status, Err: err}
}
