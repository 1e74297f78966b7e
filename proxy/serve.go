package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"tradergate/proxy/h2edge"
	"tradergate/proxy/tlsedge"
)

// Serve answers on ln until ctx ends, then drains in-flight requests for up
// to server.shutdown_timeout. Listen first, then Serve, so that a busy port
// fails at start.
//
// HTTP/1.1 is served by fasthttp; with TLS on, a connection that
// negotiates h2 by ALPN is handed to the edge's HTTP/2 server (h2edge). The
// plain-HTTP listener of a TLS edge (ACME challenges, redirects) and the
// admin listener are net/http servers.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Handlers run under base: not cancelled by the signal (in-flight
	// requests drain), but told errShuttingDown when the drain time is
	// nearly over, so that they answer a clear 503 instead of being cut off.
	base, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)
	s.base.Store(&base)

	// Every connection the fronts take counts against the cap, from
	// before a TLS handshake until it closes.
	e := &edge{s: s, ln: s.connCap.listen(ln), base: base}
	defer e.close()
	if err := e.build(); err != nil {
		return err
	}
	err := e.drain(e.run(ctx), hardStop)
	s.log.Info("shutdown: stopped", "err", err)
	return err
}

// edge is what one Serve runs: the servers on the client listener and
// what was started beside them, released by close however Serve ends.
type edge struct {
	s       *Server
	ln      net.Listener
	base    context.Context
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
func (e *edge) onClose(f func()) { e.release = append(e.release, f) }

// close closes the client listener and releases, last added first,
// everything build started. It is the one cleanup of Serve, after a
// failed build as after a drain.
func (e *edge) close() {
	e.ln.Close()
	for i := len(e.release) - 1; i >= 0; i-- {
		e.release[i]()
	}
}

// build prepares the servers without serving yet: the status page's
// readings and publisher, the admin listener, the fasthttp server and,
// with TLS on, the HTTP/2 server and the plain-HTTP listener.
func (e *edge) build() error {
	s := e.s
	e.onClose(s.upstream.CloseIdle)

	// The status page's readings, and with Redis this replica's summary on
	// the fleet's status board, until Serve returns.
	pctx, stopPublish := context.WithCancel(e.base)
	waitPublish := s.runStatus(pctx)
	e.onClose(func() { stopPublish(); waitPublish() })

	if err := e.startAdmin(); err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}

	fs := s.fastServer()
	e.servers = []serving{{
		serve:    func() error { return fs.Serve(frontListener{e.ln}) },
		shutdown: fs.ShutdownWithContext,
		cut:      s.conns.closeAll,
	}}
	// The streams end as the drain begins, with a retry hint, so that
	// their clients reconnect elsewhere (streams.go).
	e.servers = append(e.servers, serving{shutdown: s.streamShutdown, cut: func() {}})
	e.ready = func(context.Context) error { return nil }
	if s.cfg.Server.TLS.Mode == tlsedge.ModeOff {
		return nil
	}
	return e.buildTLS(fs)
}

// startAdmin serves the admin listener, if one is configured. It opens
// first and closes last, so /readyz can say "not ready" all through the
// drain.
func (e *edge) startAdmin() error {
	admin, adminLn, err := e.s.adminServer()
	if err != nil || admin == nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- admin.Serve(adminLn) }()
	e.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = admin.Shutdown(ctx)
		<-done
	})
	return nil
}

// buildTLS puts TLS around the client listener: fasthttp serves HTTP/1.1
// on it, and hands connections that negotiate h2 to h2edge.
func (e *edge) buildTLS(fs *fasthttp.Server) error {
	s, c := e.s, e.s.cfg.Server
	// std lends its limits to the plain-HTTP listener of a TLS edge.
	std := &http.Server{
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return e.base },
	}
	st, err := s.tls.Start(e.ln, std)
	if err != nil {
		return err
	}
	e.onClose(st.Close) // after the servers stopped: certmagic's cache
	if st.Plain != nil {
		e.onClose(func() { st.Plain.Close() })
	}
	s.hsts.Store(&st.HSTS)
	// HTTP/2 connections are served by h2edge, whose header limit is set
	// above server.max_header_bytes, so that a header list past the
	// edge's limit reaches the edge, which answers that one stream with
	// its JSON 431 (front_h2.go); a list past even that is decoded only
	// up to it and answered the same way. Requests that have not ended
	// hold their lists within read_timeout and a budget per connection.
	h2 := &h2edge.Server{
		Handler:               s.serveH2,
		BaseContext:           e.base,
		MaxHeaderListSize:     uint32(h2HeaderRoom * c.MaxHeaderBytes),
		MaxPendingHeaderBytes: h2PendingRoom * c.MaxHeaderBytes,
		RequestTimeout:        c.ReadTimeout,
		PrefaceTimeout:        c.ReadHeaderTimeout,
		IdleTimeout:           c.IdleTimeout,
		WriteTimeout:          c.WriteTimeout,
		Log:                   s.log,
		ConnClosed:            s.metrics.h2ConnClosed,
		StreamCut:             s.metrics.h2StreamCut,
	}
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
	tlsLn := frontListener{tls.NewListener(plainHTTPListener{e.ln}, st.TLS)}
	e.servers[0].serve = func() error { return fs.Serve(tlsLn) }
	// Shutting h2 down sends GOAWAY to the HTTP/2 connections, which
	// then end once their streams are done.
	e.servers = append(e.servers, serving{shutdown: h2.Shutdown, cut: func() { _ = h2.Close() }})
	if rs := st.Redirect; rs != nil {
		e.servers = append(e.servers, serving{
			serve:    func() error { return rs.Serve(st.Plain) },
			shutdown: rs.Shutdown,
			cut:      func() { _ = rs.Close() },
		})
	}
	e.ready = st.Ready
	return nil
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
func (e *edge) run(ctx context.Context) error {
	e.errc = make(chan error, len(e.servers))
	for _, sv := range e.servers {
		if sv.serve != nil {
			e.running++
			go func() { e.errc <- sv.serve() }()
		}
	}
	if err := e.ready(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // told to stop while starting
		}
		return err
	}
	e.s.ready.Store(true)
	select {
	case err := <-e.errc: // one stopped by itself: stop the others too
		e.running--
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
func (e *edge) drain(err error, hardStop context.CancelCauseFunc) error {
	s, c := e.s, e.s.cfg.Server
	keep := func(serr error) {
		if err == nil && serr != nil && !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, net.ErrClosed) {
			err = serr
		}
	}
	s.ready.Store(false)
	s.log.Info("shutdown: not ready; draining", "drain_delay", c.DrainDelay, "shutdown_timeout", c.ShutdownTimeout)
	if err == nil && c.DrainDelay > 0 {
		t := time.NewTimer(c.DrainDelay)
		select {
		case <-t.C:
		case err = <-e.errc:
			e.running--
			t.Stop()
		}
	}

	s.log.Info("shutdown: closing listeners; in-flight requests finish")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	grace := min(c.ShutdownTimeout/5, time.Second)
	last := time.AfterFunc(c.ShutdownTimeout-grace, func() { hardStop(errShuttingDown) })
	defer last.Stop()
	done := make(chan error, len(e.servers))
	for _, sv := range e.servers {
		go func() {
			serr := sv.shutdown(sctx)
			if serr != nil {
				sv.cut()
			}
			done <- serr
		}()
	}
	for range e.servers {
		keep(<-done)
	}
	// A server whose Serve had not begun when it was shut down (a stop
	// right after the start) would begin serving afterwards: closing the
	// client listener makes such a late Serve return at once.
	e.ln.Close()
	for ; e.running > 0; e.running-- {
		keep(<-e.errc)
	}
	return err
}
