package front

import (
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Every listener of the edge retries an accept that failed for want of a
// resource: the client listener (under the cap, conncap.go), the
// plain-HTTP listener of a TLS edge and the admin listener. The servers on
// them end on an accept error they do not take for temporary: fasthttp and
// crypto/tls on any that is not a timeout, net/http on any but EMFILE,
// ENFILE and a few others, so one ENOBUFS or ENOMEM would stop that
// listener for good, rather than for as long as the connections open hold
// what is short: the connection waiting in the kernel's backlog is
// accepted once one closes.

// acceptErrnos are the accept errors that say the process or the system
// is short of something (descriptors, socket buffers, memory) that the
// connections open give back as they close. Each is counted under its
// reason (tradergate_accept_errors_total).
var acceptErrnos = [...]acceptErrno{
	{syscall.EMFILE, "emfile"},
	{syscall.ENFILE, "enfile"},
	{syscall.ENOBUFS, "enobufs"},
	{syscall.ENOMEM, "enomem"},
}

type acceptErrno struct {
	errno  syscall.Errno
	reason string
}

// acceptListener names a listener of the edge, by its listener label
// (tradergate_accept_errors_total).
type acceptListener int

const (
	listenerClient acceptListener = iota // server.listen
	listenerHTTP                         // server.tls.http_listen
	listenerAdmin                        // admin.listen
)

var acceptListeners = [...]string{listenerClient: "client", listenerHTTP: "http", listenerAdmin: "admin"}

// Back-off after an accept failed for want of a resource, as net/http's
// Server does: 5 ms, doubling up to a second.
const (
	acceptRetryFirst = 5 * time.Millisecond
	acceptRetryMax   = time.Second
)

// nextAcceptDelay is the back-off after d.
func nextAcceptDelay(d time.Duration) time.Duration {
	return min(max(2*d, acceptRetryFirst), acceptRetryMax)
}

// acceptErrors counts the retried accepts of an edge's listeners, and
// warns of them.
type acceptErrors struct {
	log *slog.Logger
	// open is the count of open client connections, for the warning.
	open   func() int64
	counts [len(acceptListeners)][len(acceptErrnos)]atomic.Uint64
	// lastWarn is the unix nanos of the last warning.
	lastWarn atomic.Int64
}

// count is how many accepts of listener failed for reason i of
// acceptErrnos.
func (a *acceptErrors) count(listener acceptListener, i int) uint64 {
	return a.counts[listener][i].Load()
}

// listen wraps ln, the listener named by which, so that its accepts are
// retried.
func (a *acceptErrors) listen(ln net.Listener, which acceptListener) *retryListener {
	return &retryListener{Listener: ln, errs: a, which: which, done: make(chan struct{})}
}

// retryListener is a listener whose Accept retries the errors of
// acceptErrnos after a back-off.
type retryListener struct {
	net.Listener
	errs      *acceptErrors
	which     acceptListener
	done      chan struct{}
	closeOnce sync.Once
}

func (l *retryListener) Accept() (net.Conn, error) {
	var delay time.Duration // the back-off after a failed accept
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return c, nil
		}
		if err := l.retry(err, &delay); err != nil {
			return nil, err
		}
	}
}

// retry waits out the back-off after a failed accept, which it grows in
// *delay, and returns nil for the accept to be tried again; or the error
// to end Accept with: err itself when it is not one of acceptErrnos,
// net.ErrClosed when the listener closes meanwhile.
func (l *retryListener) retry(err error, delay *time.Duration) error {
	i := slices.IndexFunc(acceptErrnos[:], func(e acceptErrno) bool { return errors.Is(err, e.errno) })
	if i < 0 {
		return err
	}
	a := l.errs
	a.counts[l.which][i].Add(1)
	*delay = nextAcceptDelay(*delay)
	warnEvery(a.log, &a.lastWarn, time.Second, "accept failed; retrying", "listener", acceptListeners[l.which],
		"err", err, "retry_in", *delay, "client_connections", a.open())
	t := time.NewTimer(*delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.done:
		return net.ErrClosed
	}
}

// Close stops the listener, and an Accept waiting out a back-off with it.
func (l *retryListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}
