package front

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
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

// lfScan reads a connection's bytes as they arrive: it finds a LF not
// preceded by a CR across reads, and keeps the start of the request line
// being read, for errorFast. Since every byte is a request line or a
// header line, the request line is the first line that is not empty
// after a header block's empty line (or the connection's start).
//
// fasthttp hands its ErrorHandler the error and a RequestCtx whose request
// it could not parse, so the request line of a refused request is known
// only here. With pipelined requests that fasthttp has read ahead of the
// one it refuses, the line kept is the last one read, not the refused
// one's; a refused request's own header block never ends, so what is read
// after it is its own.
type lfScan struct {
	lastCR bool
	// inHeaders: the request line has ended and the bytes read next are
	// header lines, until an empty line.
	inHeaders bool
	lineLen   int // bytes of the current line so far, its CR included
	// line holds the first bytes of the request line (its CR included);
	// lineEnded: its LF came.
	line      [requestLineMax]byte
	n         int
	lineEnded bool
}

// requestLineMax is how much of a request line a connection keeps: enough
// for the method and the start of a target, which is all errorFast reads
// (a legacy path, and whether the line ended).
const requestLineMax = 256

// check reports whether b, read after what check saw before, holds a
// bare LF.
func (s *lfScan) check(b []byte) bool {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if len(seg) > 0 {
			s.lineLen += len(seg)
			if !s.inHeaders {
				s.n += copy(s.line[s.n:], seg)
			}
			s.lastCR = seg[len(seg)-1] == '\r'
		}
		if i < 0 {
			return false
		}
		if !s.lastCR {
			// A bare LF ends the request line as well: the answer may
			// still be a legacy one (errorFast).
			s.lineEnded = s.lineEnded || !s.inHeaders
			return true
		}
		s.endLine()
		b = b[i+1:]
	}
	return false
}

// endLine is a CRLF: the end of the request line, of a header line, or
// of a header block.
func (s *lfScan) endLine() {
	empty := s.lineLen == 1 // its CR only
	switch {
	case !s.inHeaders && empty:
		s.n = 0 // an empty line before a request line (RFC 9112 section 2.2)
	case !s.inHeaders:
		s.inHeaders, s.lineEnded = true, true
	case empty:
		s.inHeaders, s.lineEnded, s.n = false, false, 0
	}
	s.lineLen, s.lastCR = 0, false
}

// requestLine is the request line read last: its method and target, or
// only the target's start when whole is false (the line had not ended,
// or was longer than requestLineMax). ok is false when there is none, or
// its target is not a path; the answer is then variant A, as for any path
// that is not a legacy one. The strings are copies.
func (s *lfScan) requestLine() (method, target string, whole, ok bool) {
	line := s.line[:s.n]
	whole = s.lineEnded && s.n < len(s.line)
	if whole {
		line = bytes.TrimSuffix(line, []byte{'\r'})
	}
	m, rest, found := bytes.Cut(line, []byte{' '})
	if !found || len(m) == 0 {
		return "", "", false, false
	}
	if whole {
		if j := bytes.LastIndexByte(rest, ' '); j >= 0 {
			rest = rest[:j]
		}
	}
	if len(rest) == 0 || rest[0] != '/' {
		return "", "", false, false
	}
	return string(m), string(rest), whole, true
}

// requestLineOf is the request line last read on c, when c is a front
// connection (see lfScan.requestLine).
func requestLineOf(c net.Conn) (method, target string, whole, ok bool) {
	switch c := c.(type) {
	case *frontConn:
		return c.scan.requestLine()
	case *frontTLSConn:
		return c.scan.requestLine()
	}
	return "", "", false, false
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
	// raw reads and writes the socket without waking the runtime's
	// monitor (rawio_linux.go); nil: through the TCPConn.
	raw *rawIO
	// linger: the edge ends the connection, and waits for the client's
	// end first (linger.go).
	linger linger
}

func (c *frontConn) Read(p []byte) (int, error) {
	n, err := c.raw.readOr(c.TCPConn, p)
	return c.scan.read(p[:n], err)
}

func (c *frontConn) Close() error {
	c.linger.closeAfter(c.TCPConn)
	err := c.TCPConn.Close()
	c.slot.release()
	return err
}

func (c *frontConn) Write(p []byte) (int, error) {
	if c.more {
		c.more = false
		return sendMore(c.TCPConn, p)
	}
	return c.raw.writeOr(c.TCPConn, p)
}

// frontTLSConn is a TLS connection of the front: fasthttp reads it as TLS
// (ALPN, IsTLS) through the embedded *tls.Conn.
type frontTLSConn struct {
	*tls.Conn
	scan lfScan
	// handedOff: the HTTP/2 server serves the connection on a goroutine
	// of its own (serve.go), and closes it; fasthttp's Close, once the
	// handler it called returns, is not the connection's end.
	handedOff atomic.Bool
	linger    linger // as frontConn's
}

func (c *frontTLSConn) Close() error {
	if c.handedOff.Load() {
		return nil
	}
	c.linger.closeAfter(c.Conn)
	return c.Conn.Close()
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
type frontListener struct {
	net.Listener
	lingers *lingerStats // counts the connections' lingering closes; nil: not counted
}

func (l frontListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	switch c := c.(type) {
	case *capConn:
		return &frontConn{TCPConn: c.TCPConn, slot: c.slot, raw: newRawIO(c.TCPConn), linger: linger{stats: l.lingers}}, nil
	case *net.TCPConn:
		return &frontConn{TCPConn: c, raw: newRawIO(c), linger: linger{stats: l.lingers}}, nil
	case *tls.Conn:
		return &frontTLSConn{Conn: c, linger: linger{stats: l.lingers}}, nil
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
