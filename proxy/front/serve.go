package front

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"tradergate/proxy/h2edge"
	"tradergate/proxy/tlsedge"
	"tradergate/proxy/wire"
)

// Serve answers on ln until ctx ends, then drains in-flight requests for up
// to server.shutdown_timeout. Listen first, then Serve, so that a busy port
// fails at start.
//
// HTTP/1.1 is served by fasthttp; with TLS on, a connection that
// negotiates h2 by ALPN is handed to the edge's HTTP/2 server (h2edge). The
// plain-HTTP listener of a TLS edge (ACME challenges, redirects) is a
// net/http server; what runs beside the fronts (the admin listener, the
// status page's readings) is beside's.
func (e *Edge) Serve(ctx context.Context, ln net.Listener, beside Beside) error {
	// Handlers run under base: not cancelled by the signal (in-flight
	// requests drain), but told wire.ErrShuttingDown when the drain time
	// is nearly over, so that they answer a clear 503 instead of being
	// cut off.
	base, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)
	base = wire.Shared(base) // one end for every HTTP/1.1 request
	e.base.Store(&base)

	// Every connection the fronts take counts against the cap, from
	// before a TLS handshake until it closes.
	r := &run{e: e, ln: e.cap.listen(e.accepts.listen(ln, listenerClient)), base: base, beside: beside}
	defer r.close()
	r.onClose(keepPreemption()) // preempt.go
	if err := r.build(); err != nil {
		return err
	}
	err := r.drain(r.run(ctx), hardStop)
	e.log.Info("shutdown: stopped", "err", err)
	return err
}

// Beside is what runs beside the fronts while Serve does.
type Beside struct {
	// Start starts it under ctx, which ends as Serve returns, before the
	// fronts answer; stop, once they have stopped, waits for it to end. An
	// error fails Serve.
	Start func(ctx context.Context) (stop func(), err error)
	// Ready is told true once the fronts answer, false as the drain
	// begins (/readyz).
	Ready func(bool)
	// Streams, when set, ends the event streams as the drain begins,
	// with a retry hint, so that their clients reconnect elsewhere
	// (stream.go).
	Streams func(ctx context.Context) error
}

// run is what one Serve runs: the servers on the client listener and
// what was started beside them, released by close however Serve ends.
type run struct {
	e       *Edge
	ln      net.Listener
	base    context.Context
	beside  Beside
	servers []serving
	// ready runs once the servers answer (tlsedge.Started.Ready).
	ready func(context.Context) error
	// errc receives the result of each server's serve; running counts
	// those not yet received.
	errc    chan error
	running int
	// release is what close undoes, in reverse order.
	release []func()
}

// serving is one server of the edge: how it starts on its listener (nil
// for one that has none of its own), drains, and is cut off.
type serving struct {
	serve    func() error
	shutdown func(context.Context) error
	cut      func()
}

// onClose adds f to what close undoes.
func (r *run) onClose(f func()) { r.release = append(r.release, f) }

// close closes the client listener and releases, last added first,
// everything build started. It is the one cleanup of Serve, after a
// failed build as after a drain.
func (r *run) close() {
	r.ln.Close()
	for i := len(r.release) - 1; i >= 0; i-- {
		r.release[i]()
	}
}

// build prepares the servers without serving yet: what runs beside them,
// the fasthttp server and, with TLS on, the HTTP/2 server and the
// plain-HTTP listener.
func (r *run) build() error {
	e := r.e
	if r.beside.Start != nil {
		stop, err := r.beside.Start(r.base)
		if stop != nil {
			r.onClose(stop)
		}
		if err != nil {
			return err
		}
	}
	fs := e.fastServer()
	r.servers = []serving{{
		serve:    func() error { return fs.Serve(frontListener{r.ln, &e.lingers}) },
		shutdown: fs.ShutdownWithContext,
		cut:      e.conns.closeAll,
	}}
	if r.beside.Streams != nil {
		r.servers = append(r.servers, serving{shutdown: r.beside.Streams, cut: func() {}})
	}
	r.ready = func(context.Context) error { return nil }
	if e.cfg.TLS.Mode == tlsedge.ModeOff {
		return nil
	}
	return r.buildTLS(fs)
}

// buildTLS puts TLS around the client listener: fasthttp serves HTTP/1.1
// on it, and hands connections that negotiate h2 to h2edge.
func (r *run) buildTLS(fs *fasthttp.Server) error {
	e, c := r.e, r.e.cfg
	// std lends its limits to the plain-HTTP listener of a TLS edge.
	std := &http.Server{
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return r.base },
	}
	st, err := e.tls.Start(r.ln, std)
	if err != nil {
		return err
	}
	r.onClose(st.Close) // after the servers stopped: certmagic's cache
	if st.Plain != nil {
		r.onClose(func() { st.Plain.Close() })
	}
	e.hsts.Store(&st.HSTS)
	// HTTP/2 connections are served by h2edge, whose header limit is set
	// above server.max_header_bytes, so that a header list past the
	// edge's limit reaches the edge, which answers that one stream with
	// its JSON 431 (front_h2.go); a list past even that is decoded only
	// up to it and answered the same way. Requests that have not ended
	// hold their lists within read_timeout and a budget per connection.
	h2 := &h2edge.Server{
		Handler:               e.serveH2,
		BaseContext:           r.base,
		MaxHeaderListSize:     uint32(h2HeaderRoom * c.MaxHeaderBytes),
		MaxPendingHeaderBytes: h2PendingRoom * c.MaxHeaderBytes,
		RequestTimeout:        c.ReadTimeout,
		PrefaceTimeout:        c.ReadHeaderTimeout,
		IdleTimeout:           c.IdleTimeout,
		WriteTimeout:          c.WriteTimeout,
		Log:                   e.log,
		ConnClosed:            e.h2ConnClosed,
		StreamCut:             e.h2StreamCut,
		MemoryReturned:        e.h2Returned.Inc,
	}
	e.h2.Store(h2)
	// The connection is served on a goroutine of its own rather than on
	// fasthttp's, under whose frames (over 1 KiB of them) every read
	// would wait: the stack an idle connection keeps is its deepest wait,
	// and without them it stays at 4 KiB instead of 8 (docs/BENCHMARKS.md,
	// "Idle connections").
	fs.NextProto("h2", func(conn net.Conn) error {
		f, ok := conn.(*frontTLSConn)
		if !ok {
			_ = h2.ServeConn(conn)
			return nil
		}
		f.handedOff.Store(true)
		tc := f.Conn // not f, which the goroutine would keep
		go func() { _ = h2.ServeConn(tc) }()
		return nil
	})
	tlsLn := frontListener{tls.NewListener(plainHTTPListener{r.ln}, st.TLS), &e.lingers}
	r.servers[0].serve = func() error { return fs.Serve(tlsLn) }
	// Shutting h2 down sends GOAWAY to the HTTP/2 connections, which
	// then end once their streams are done.
	r.servers = append(r.servers, serving{shutdown: h2.Shutdown, cut: func() { _ = h2.Close() }})
	if rs := st.Redirect; rs != nil {
		r.servers = append(r.servers, e.plainServing(rs, st.Plain))
	}
	r.ready = st.Ready
	return nil
}

// plainServing serves the plain-HTTP listener ln of a TLS edge with rs,
// its accepts retried as the client listener's are (acceptretry.go).
func (e *Edge) plainServing(rs *http.Server, ln net.Listener) serving {
	rln := e.accepts.listen(ln, listenerHTTP)
	return serving{
		serve:    func() error { return rs.Serve(rln) },
		shutdown: rs.Shutdown,
		cut:      func() { _ = rs.Close() },
	}
}

// ServeAdmin serves the admin listener ln with srv until srv is shut
// down, its accepts retried as the client listener's are
// (acceptretry.go).
func (e *Edge) ServeAdmin(srv *http.Server, ln net.Listener) error {
	return srv.Serve(e.accepts.listen(ln, listenerAdmin))
}

// h2HeaderRoom is how many times server.max_header_bytes the HTTP/2
// server decodes of a header list (and advertises,
// SETTINGS_MAX_HEADER_LIST_SIZE); past it the list is not decoded further
// and the stream is answered with the JSON 431 all the same.
const h2HeaderRoom = 4

// h2PendingRoom is how many times server.max_header_bytes of header lists
// an HTTP/2 connection may hold for requests that have not ended (256 KiB
// at the default): a request past it is answered with the JSON 431 at
// once, rather than held.
const h2PendingRoom = 16

// run starts the servers and waits until ctx ends or one of them stops by
// itself. Mode acme obtains its certificates once the listeners answer the
// CA's challenges; a failure there stops everything.
func (r *run) run(ctx context.Context) error {
	r.errc = make(chan error, len(r.servers))
	for _, sv := range r.servers {
		if sv.serve != nil {
			r.running++
			go func() { r.errc <- sv.serve() }()
		}
	}
	if err := r.ready(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // told to stop while starting
		}
		return err
	}
	r.setReady(true)
	select {
	case err := <-r.errc: // one stopped by itself: stop the others too
		r.running--
		return err
	case <-ctx.Done():
		return nil
	}
}

// drain stops the servers: not ready any more but still answering for
// drain_delay, so load balancers notice before connections are refused;
// then in-flight requests finish within shutdown_timeout. Near its end
// hardStop tells the handlers still running to answer 503; past it, what
// is left is cut off. The first error, err's or a server's, is returned.
func (r *run) drain(err error, hardStop context.CancelCauseFunc) error {
	e, c := r.e, r.e.cfg
	keep := func(serr error) {
		if err == nil && serr != nil && !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, net.ErrClosed) {
			err = serr
		}
	}
	r.setReady(false)
	e.log.Info("shutdown: not ready; draining", "drain_delay", c.DrainDelay, "shutdown_timeout", c.ShutdownTimeout)
	if err == nil && c.DrainDelay > 0 {
		t := time.NewTimer(c.DrainDelay)
		select {
		case <-t.C:
		case err = <-r.errc:
			r.running--
			t.Stop()
		}
	}

	e.log.Info("shutdown: closing listeners; in-flight requests finish")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	grace := min(c.ShutdownTimeout/5, time.Second)
	last := time.AfterFunc(c.ShutdownTimeout-grace, func() { hardStop(wire.ErrShuttingDown) })
	defer last.Stop()
	done := make(chan error, len(r.servers))
	for _, sv := range r.servers {
		go func() {
			serr := sv.shutdown(sctx)
			if serr != nil {
				sv.cut()
			}
			done <- serr
		}()
	}
	for range r.servers {
		keep(<-done)
	}
	// A server whose Serve had not begun when it was shut down (a stop
	// right after the start) would begin serving afterwards: closing the
	// client listener makes such a late Serve return at once.
	r.ln.Close()
	for ; r.running > 0; r.running-- {
		keep(<-r.errc)
	}
	return err
}

// setReady tells beside whether the fronts answer.
func (r *run) setReady(ready bool) {
	if r.beside.Ready != nil {
		r.beside.Ready(ready)
	}
}
