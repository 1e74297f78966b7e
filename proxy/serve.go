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

	"golang.org/x/net/http2"

	"tradergate/proxy/tlsedge"
)

// Serve answers on ln until ctx ends, then drains in-flight requests for up
// to server.shutdown_timeout. Listen first, then Serve, so that a busy port
// fails at start.
//
// HTTP/1.1 is served by fasthttp; with TLS on, a connection that
// negotiates h2 by ALPN is handed to net/http's HTTP/2 server instead. The
// plain-HTTP listener of a TLS edge (ACME challenges, redirects) and the
// admin listener are net/http servers.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	c := s.cfg.Server
	// Handlers run under base: not cancelled by the signal (in-flight
	// requests drain), but told errShuttingDown when the drain time is
	// nearly over, so that they answer a clear 503 instead of being cut off.
	base, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)
	s.base.Store(&base)

	// With Redis, this replica's summary goes on the fleet's status board
	// until Serve returns.
	pctx, stopPublish := context.WithCancel(base)
	waitPublish := s.publishStatus(pctx)
	defer waitPublish()
	defer stopPublish()

	// The admin listener opens first and closes last, so /readyz can say
	// "not ready" all through the drain.
	admin, adminLn, err := s.adminServer()
	if err != nil {
		ln.Close()
		return fmt.Errorf("admin.listen: %w", err)
	}
	adminDone := make(chan error, 1)
	if admin != nil {
		go func() { adminDone <- admin.Serve(adminLn) }()
		defer func() {
			actx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = admin.Shutdown(actx)
			<-adminDone
		}()
	}

	fs := s.fastServer()
	// std serves HTTP/2 streams (and owns their graceful shutdown) and
	// lends its limits to the plain-HTTP listener of a TLS edge.
	std := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	servers := []serving{{
		serve:    func() error { return fs.Serve(ln) },
		shutdown: fs.ShutdownWithContext,
		cut:      s.conns.closeAll,
	}}
	ready := func(context.Context) error { return nil }
	if c.TLS.Mode != tlsedge.ModeOff {
		st, err := s.tls.Start(ln, std)
		if err != nil {
			ln.Close()
			s.upstream.CloseIdle()
			return err
		}
		defer st.Close() // after the servers stopped: certmagic's cache
		s.hsts.Store(&st.HSTS)
		h2 := &http2.Server{IdleTimeout: c.IdleTimeout, MaxReadFrameSize: 1 << 20}
		if err := http2.ConfigureServer(std, h2); err != nil {
			ln.Close()
			return fmt.Errorf("http2: %w", err)
		}
		fs.NextProto("h2", func(conn net.Conn) error {
			h2.ServeConn(conn, &http2.ServeConnOpts{Context: base, BaseConfig: std, Handler: std.Handler})
			return nil
		})
		tlsLn := tls.NewListener(plainHTTPListener{ln}, st.TLS)
		servers[0].serve = func() error { return fs.Serve(tlsLn) }
		// Shutting std down sends GOAWAY to the HTTP/2 connections, which
		// then end once their streams are done.
		servers = append(servers, serving{shutdown: std.Shutdown, cut: func() { _ = std.Close() }})
		if st.Redirect != nil {
			rs := st.Redirect
			servers = append(servers, serving{
				serve:    func() error { return rs.Serve(st.Plain) },
				shutdown: rs.Shutdown,
				cut:      func() { _ = rs.Close() },
			})
		}
		ready = st.Ready
	}
	errc := make(chan error, len(servers))
	running := 0
	for _, sv := range servers {
		if sv.serve != nil {
			running++
			go func() { errc <- sv.serve() }()
		}
	}
	// Mode acme obtains its certificates now, while the listeners answer
	// the CA's challenges; a failure stops everything.
	err = ready(ctx)
	if err == nil {
		s.ready.Store(true)
		select {
		case err = <-errc: // one stopped by itself: stop the others too
			running--
		case <-ctx.Done():
		}
	} else if ctx.Err() != nil {
		err = nil // told to stop while starting
	}
	// Draining: not ready any more, but still answering for drain_delay, so
	// load balancers notice before connections are refused.
	s.ready.Store(false)
	s.log.Info("shutdown: not ready; draining", "drain_delay", c.DrainDelay, "shutdown_timeout", c.ShutdownTimeout)
	if err == nil && c.DrainDelay > 0 {
		t := time.NewTimer(c.DrainDelay)
		select {
		case <-t.C:
		case err = <-errc:
			running--
			t.Stop()
		}
	}
	s.log.Info("shutdown: closing listeners; in-flight requests finish")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	grace := min(c.ShutdownTimeout/5, time.Second)
	last := time.AfterFunc(c.ShutdownTimeout-grace, func() { hardStop(errShuttingDown) })
	defer last.Stop()
	done := make(chan error, len(servers))
	for _, sv := range servers {
		go func() {
			serr := sv.shutdown(sctx)
			if serr != nil {
				// Past the deadline: what is left is cut off.
				sv.cut()
			}
			done <- serr
		}()
	}
	for range servers {
		if serr := <-done; err == nil && serr != nil {
			err = serr
		}
	}
	// A server whose Serve had not begun when it was shut down (a stop
	// right after the start) would begin serving afterwards: closing the
	// client listener makes such a late Serve return at once.
	ln.Close()
	for ; running > 0; running-- {
		if serr := <-errc; err == nil && serr != nil && !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, net.ErrClosed) {
			err = serr
		}
	}
	s.upstream.CloseIdle()
	s.log.Info("shutdown: stopped", "err", err)
	return err
}

// serving is one server of the edge: how it starts on its listener (nil
// for one that has none of its own), drains, and is cut off.
type serving struct {
	serve    func() error
	shutdown func(context.Context) error
	cut      func()
}
