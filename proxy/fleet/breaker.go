package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// The breaker around every command of the shared client. It trips after
// TripAfter consecutive failures: a dead Redis fails every call, and a count
// needs no minimum volume (a quiet replica would never fill a ratio's
// window), while one success between resets it. Open, it refuses every
// command for OpenFor, then lets one probe through, whose success closes it:
// the next call after OpenFor is the probe, with no goroutine of its own.
//
// Busy is not dead: a failure is Redis refusing or dropping connections, or
// answering that it cannot serve (LOADING, CLUSTERDOWN, ...). A call that
// only ran out of time counts as a failure once no call has succeeded for
// StallAfter: a burst that pushes some calls past redis.timeout while
// others succeed leaves the breaker closed (those calls fall back alone),
// and a Redis that hangs opens it StallAfter after its last answer.
const (
	// TripAfter is how many consecutive failures open the breaker.
	TripAfter = 5
	// OpenFor is how long the breaker stays open before it lets a probe
	// through: so Redis is used again within OpenFor of its return.
	OpenFor = 500 * time.Millisecond
	// StallAfter is how long without a successful call turns timeouts
	// into failures.
	StallAfter = time.Second
)

// ErrUnavailable is wrapped by the error of every command the breaker
// refused without sending it: Redis has been failing, so each replica works
// alone until a probe succeeds. Errors of commands that were sent (a dial
// refused, a timeout) are go-redis's own.
var ErrUnavailable = errors.New("fleet: redis unavailable")

// callerGone marks a failure caused by the caller cancelling its context: not
// Redis's fault, so the breaker does not count it. It also marks a timeout
// while other calls succeed (busy, not dead).
type callerGone struct{ err error }

func (e callerGone) Error() string { return e.err.Error() }

// timedOut reports whether err is a call that ran out of time, rather than
// one Redis refused or broke off.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.As(err, &ne) && ne.Timeout()
}

// breakerHook is the hook (go-redis Hook) that runs every command and pipeline
// through the circuit breaker, and refuses dials while it is open.
type breakerHook struct {
	cb      *gobreaker.CircuitBreaker[struct{}]
	errs    prometheus.Counter
	lastErr atomic.Pointer[error] // the last failure, for the "unreachable" log line
	// answeredAt is when a call last succeeded (Unix ns; the hook's
	// creation before the first), for StallAfter.
	answeredAt atomic.Int64
}

func newBreakerHook(errs prometheus.Counter, onChange func(name string, from, to gobreaker.State)) *breakerHook {
	b := &breakerHook{errs: errs}
	b.answeredAt.Store(time.Now().UnixNano())
	b.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:          "redis",
		MaxRequests:   1,
		Timeout:       OpenFor,
		ReadyToTrip:   func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= TripAfter },
		IsSuccessful:  answered,
		IsExcluded:    func(err error) bool { return errors.As(err, new(callerGone)) },
		OnStateChange: onChange,
	})
	return b
}

// answered reports whether Redis did its job: a reply, even redis.Nil or an
// error reply about the command (WRONGTYPE, NOSCRIPT), is a success. Replies
// saying the server cannot serve at all are failures.
func answered(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		for _, p := range []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"} {
			if strings.HasPrefix(re.Error(), p) {
				return false
			}
		}
		return true
	}
	return false
}

// insideKey marks a context whose command is already going through the
// breaker. go-redis runs the commands that set up a new connection (HELLO,
// AUTH, SELECT) through the same hooks, within the command that needed the
// connection; counted again they would trip the breaker twice as fast, and
// in half-open they would be refused behind the probe that caused them.
type insideKey struct{}

// run sends one command or pipeline through the breaker.
func (b *breakerHook) run(ctx context.Context, send func(context.Context) error) error {
	if ctx.Value(insideKey{}) != nil {
		return send(ctx)
	}
	inner := context.WithValue(ctx, insideKey{}, true)
	_, err := b.cb.Execute(func() (struct{}, error) {
		err := send(inner)
		switch {
		case answered(err):
			b.answeredAt.Store(time.Now().UnixNano())
		case errors.Is(ctx.Err(), context.Canceled):
			return struct{}{}, callerGone{err}
		case timedOut(err) && time.Since(time.Unix(0, b.answeredAt.Load())) < StallAfter:
			// Busy: this call fails (its caller works alone), the breaker
			// does not count it.
			b.errs.Inc()
			return struct{}{}, callerGone{err}
		}
		return struct{}{}, err
	})
	var gone callerGone
	switch {
	case err == nil:
		return nil
	case errors.As(err, &gone):
		return gone.err
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		b.errs.Inc()
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case !answered(err):
		b.errs.Inc()
		b.lastErr.Store(&err)
	}
	return err
}

// DialHook hands go-redis a dead connection (deadconn.go) in place of a
// failed dial, and while the breaker is open in place of any dial: not
// counted here, the command that needed the connection is.
func (b *breakerHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if b.cb.State() == gobreaker.StateOpen {
			return deadConn{fmt.Errorf("%w: %w", ErrUnavailable, gobreaker.ErrOpenState)}, nil
		}
		conn, err := next(ctx, network, addr)
		if err != nil {
			return deadConn{err}, nil
		}
		return conn, nil
	}
}

func (b *breakerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := b.run(ctx, func(ctx context.Context) error { return next(ctx, cmd) })
		if errors.Is(err, ErrUnavailable) {
			cmd.SetErr(err)
		}
		return err
	}
}

func (b *breakerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := b.run(ctx, func(ctx context.Context) error { return next(ctx, cmds) })
		if errors.Is(err, ErrUnavailable) {
			// Never sent: each command must say so, or it would read as an
			// empty success.
			for _, c := range cmds {
				c.SetErr(err)
			}
		}
		return err
	}
}

// dialGate is the dial half of breaker alone, for a Cluster's node clients:
// their commands already went through the breaker on the ClusterClient.
type dialGate struct{ b *breakerHook }

func (g dialGate) DialHook(next redis.DialHook) redis.DialHook { return g.b.DialHook(next) }
func (dialGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (dialGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
