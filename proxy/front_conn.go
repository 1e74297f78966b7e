package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
)

// The HTTP/1.1 front's connections. fasthttp waits for a header block to
// end in CRLF CRLF; a request whose lines end in a bare LF never does,
// and would be answered 408 once server.read_header_timeout passed. The
// front's connections refuse a bare LF as it arrives instead, so that
// such a request is answered 400 at once (RFC 9112 section 2.2 lets a
// server refuse a bare LF; the edge does, since a load balancer in front
// may read it otherwise). The front takes no body (a body is refused,
// and its connection closed), so every byte it reads is a request line
// or a header line.

// errBareLF is what a front connection's Read returns once a bare LF
// arrives; fasthttp hands it to errorFast within its error.
var errBareLF = errors.New("line ending in a bare LF")

// lfScan finds a LF not preceded by a CR across reads.
type lfScan struct{ lastCR bool }

// check reports whether b, read after what check saw before, holds a
// bare LF.
func (s *lfScan) check(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	prevCR := s.lastCR
	for off := 0; ; {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			break
		}
		i += off
		if (i == 0 && !prevCR) || (i > 0 && b[i-1] != '\r') {
			return true
		}
		off = i + 1
	}
	s.lastCR = b[len(b)-1] == '\r'
	return false
}

// read is a connection's Read of got, with err: errBareLF once got holds
// a bare LF.
func (s *lfScan) read(got []byte, err error) (int, error) {
	if s.check(got) {
		return len(got), errBareLF
	}
	return len(got), err
}

// frontConn is a plain TCP connection of the front. It embeds the
// *net.TCPConn, so that sendfile (sendfile.go) still reaches the socket.
type frontConn struct {
	*net.TCPConn
	slot *connSlot // its hold on the connection cap (conncap.go)
	scan lfScan
	// more sends the next write with MSG_MORE: a header block whose page
	// follows from a file (fileBody). Only the connection's own goroutine
	// (fasthttp's, serving one request at a time) reads or sets it.
	more bool
}

func (c *frontConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	return c.scan.read(p[:n], err)
}

func (c *frontConn) Close() error {
	err := c.TCPConn.Close()
	c.slot.release()
	return err
}

func (c *frontConn) Write(p []byte) (int, error) {
	if c.more {
		c.more = false
		return sendMore(c.TCPConn, p)
	}
	return c.TCPConn.Write(p)
}

// frontTLSConn is a TLS connection of the front: fasthttp reads it as TLS
// (ALPN, IsTLS) through the embedded *tls.Conn.
type frontTLSConn struct {
	*tls.Conn
	scan lfScan
}

// Handshake runs the TLS handshake on a goroutine of its own, which ends
// with it. fasthttp calls it on the goroutine that then serves the
// connection for as long as it is open, idle or not; the handshake's
// cryptography would grow that goroutine's stack, and a stack that has
// grown stays so while its goroutine waits for the next request.
func (c *frontTLSConn) Handshake() error {
	done := make(chan error, 1)
	go func() { done <- c.Conn.Handshake() }()
	return <-done
}

func (c *frontTLSConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return c.scan.read(p[:n], err)
}

// frontListener gives the front its connections.
type frontListener struct{ net.Listener }

func (l frontListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	switch c := c.(type) {
	case *capConn:
		return &frontConn{TCPConn: c.TCPConn, slot: c.slot}, nil
	case *net.TCPConn:
		return &frontConn{TCPConn: c}, nil
	case *tls.Conn:
		return &frontTLSConn{Conn: c}, nil
	}
	return c, nil
}

// tcpConnOf is the TCP connection under a front connection, or nil when
// it is not plain TCP (TLS, or a test's pipe).
func tcpConnOf(c net.Conn) *net.TCPConn {
	switch c := c.(type) {
	case *frontConn:
		return c.TCPConn
	case *net.TCPConn:
		return c
	}
	return nil
}

// tlsConnOf is the TLS connection under a front connection: what the
// HTTP/2 server is handed after ALPN, which reads frames, not lines.
func tlsConnOf(c net.Conn) net.Conn {
	if f, ok := c.(*frontTLSConn); ok {
		return f.Conn
	}
	return c
}
