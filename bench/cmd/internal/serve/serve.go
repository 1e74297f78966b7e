// Package serve runs the benchmark's helper servers (bench/cmd/...) until
// they are told to stop, the same way for each: on a signal or the end of
// a context, a graceful shutdown of at most two seconds.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// grace is how long open connections get to finish once a server is told
// to stop. The benchmark stops a server after its load generator, so none
// should be busy by then; what still is gets cut off.
const grace = 2 * time.Second

// Until runs serve until it returns or ctx ends, then stops it with
// shutdown. It returns serve's error when serve stopped by itself (a
// listener that failed), else shutdown's; a shutdown that ran out of grace
// is not an error: a benchmark's server need not drain.
func Until(ctx context.Context, serve func() error, shutdown func(context.Context) error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := shutdown(sctx)
	// Serve returns once the listener is closed: net/http's with
	// ErrServerClosed, fasthttp's with nil.
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// HTTP serves h on ln with net/http until ctx ends, with the header and
// idle timeouts every helper server uses.
func HTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	return Until(ctx, func() error { return srv.Serve(ln) }, srv.Shutdown)
}

// Signalled is a context that ends on SIGINT or SIGTERM, the ways the
// benchmark stops its servers; stop releases the signals.
func Signalled() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
