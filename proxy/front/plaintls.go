package front

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
)

// A client that speaks plain HTTP to the TLS port gets a plain-text 400
// saying so, as net/http answers it, rather than a dropped connection it
// cannot explain; never an API answer, which must not travel in the clear.

// plainHTTPListener wraps the TLS port's listener: each connection's first
// bytes are checked before the TLS handshake reads them.
type plainHTTPListener struct{ net.Listener }

func (l plainHTTPListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, raw: newRawIO(c)}, nil
}

// sniffConn checks the first read of a connection for an HTTP request line.
// Under TLS, it is what reads and writes the socket: raw, when set, does
// so without waking the runtime's monitor (rawio_linux.go).
type sniffConn struct {
	net.Conn
	raw  *rawIO
	once sync.Once
	err  error
}

var errPlainHTTP = errors.New("plain HTTP request on the TLS port")

const plainHTTPAnswer = "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" +
	"Client sent an HTTP request to an HTTPS server.\n"

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.raw.readOr(c.Conn, p)
	c.once.Do(func() {
		// A TLS record starts with its type (22, a handshake); a request
		// line starts with a method. Five bytes tell them apart, as in
		// net/http; a first read shorter than that is let through.
		if n >= 5 && looksLikeHTTP(p[:5]) {
			_, _ = io.WriteString(c.Conn, plainHTTPAnswer)
			c.err = errPlainHTTP
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return n, err
}

func (c *sniffConn) Write(p []byte) (int, error) { return c.raw.writeOr(c.Conn, p) }

func looksLikeHTTP(b []byte) bool {
	switch string(b) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE", "TRACE":
		return true
	}
	return false
}

// CloseWrite is the socket's: a TLS connection's lingering close ends
// its TCP stream's sending side with it (linger.go).
func (c *sniffConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// SyscallConn is the socket's, which the HTTP/2 server waits on while a
// connection idles (proxy/h2edge, park.go).
func (c *sniffConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
