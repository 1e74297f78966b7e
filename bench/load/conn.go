package load

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is one keep-alive HTTP/1.1 client connection. It is a minimal
// client on purpose: the load generator has one CPU to drive a server that
// has one too, and net/http's client spends about as much per request as
// the server under test, which would make the generator the bottleneck.
// It writes prebuilt requests and reads just enough of each answer to
// frame it: status, Content-Length or chunked framing, Connection: close,
// and X-Cache when asked.
type conn struct {
	addr string
	nc   net.Conn
	br   *bufio.Reader
	// resumed: a TLS connection whose handshake resumed a session.
	resumed bool
}

// response is what the load generator keeps of one answer.
type response struct {
	status int
	cache  string // X-Cache, read only when asked for
	body   int64  // body bytes read
	close  bool   // the server will close the connection
}

var errFraming = errors.New("malformed HTTP response")

// dial connects to addr; with tc, it also completes a TLS handshake.
func dial(addr string, tc *tls.Config) (*conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	// Requests are written whole, one at a time: Nagle would only delay
	// them (Go sets TCP_NODELAY by default; this keeps it explicit).
	if t, ok := nc.(*net.TCPConn); ok {
		_ = t.SetNoDelay(true)
	}
	c := &conn{addr: addr, nc: nc}
	if tc != nil {
		tlsConn := tls.Client(nc, tc)
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tlsConn.Handshake(); err != nil {
			nc.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		c.nc, c.resumed = tlsConn, tlsConn.ConnectionState().DidResume
	}
	c.br = bufio.NewReaderSize(c.nc, 64<<10)
	return c, nil
}

func (c *conn) close() {
	if c != nil && c.nc != nil {
		_ = c.nc.Close()
	}
}

// roundTrip sends req (a whole GET request) and reads the answer. The
// deadline bounds the whole exchange, so a hung server cannot hang the run.
func (c *conn) roundTrip(req []byte, deadline time.Time, wantCache bool) (response, error) {
	_ = c.nc.SetDeadline(deadline)
	if _, err := c.nc.Write(req); err != nil {
		return response{}, err
	}
	return readResponse(c.br, wantCache)
}

// readResponse reads one HTTP/1.1 answer to a GET from br, discarding the
// body. It allocates nothing unless wantCache finds an X-Cache header.
func readResponse(br *bufio.Reader, wantCache bool) (response, error) {
	var r response
	line, err := br.ReadSlice('\n')
	if err != nil {
		return r, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return r, fmt.Errorf("%w: status line %q", errFraming, trimCRLF(line))
	}
	r.status = atoi3(line[9:12])
	if r.status < 100 {
		return r, fmt.Errorf("%w: status line %q", errFraming, trimCRLF(line))
	}
	r.close = line[7] == '0' // HTTP/1.0 closes unless told otherwise; servers under test answer 1.1
	length, chunked := int64(-1), false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return r, err
		}
		line = trimCRLF(line)
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return r, fmt.Errorf("%w: header %q", errFraming, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case equalFold(name, "content-length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return r, fmt.Errorf("%w: Content-Length %q", errFraming, value)
			}
			length = n
		case equalFold(name, "transfer-encoding"):
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case equalFold(name, "connection"):
			r.close = r.close || bytes.EqualFold(value, []byte("close"))
		case wantCache && equalFold(name, "x-cache"):
			r.cache = string(value)
		}
	}
	switch {
	case r.status == 204 || r.status == 304 || r.status < 200:
		return r, nil
	case chunked:
		r.body, err = discardChunked(br)
	case length >= 0:
		var n int
		n, err = br.Discard(int(length))
		r.body = int64(n)
	default:
		// No framing: the body runs to the end of the connection.
		var n int64
		n, err = io.Copy(io.Discard, br)
		r.body, r.close = n, true
	}
	return r, err
}

// discardChunked reads a chunked body and its trailer.
func discardChunked(br *bufio.Reader) (int64, error) {
	var total int64
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return total, err
		}
		sizeField, _, _ := bytes.Cut(trimCRLF(line), []byte{';'})
		size, err := strconv.ParseInt(string(bytes.TrimSpace(sizeField)), 16, 64)
		if err != nil || size < 0 {
			return total, fmt.Errorf("%w: chunk size %q", errFraming, line)
		}
		if size == 0 {
			for { // trailer fields, then the empty line
				line, err = br.ReadSlice('\n')
				if err != nil {
					return total, err
				}
				if len(trimCRLF(line)) == 0 {
					return total, nil
				}
			}
		}
		n, err := br.Discard(int(size))
		total += int64(n)
		if err != nil {
			return total, err
		}
		if line, err = br.ReadSlice('\n'); err != nil || len(trimCRLF(line)) != 0 {
			return total, fmt.Errorf("%w: no CRLF after a chunk", errFraming)
		}
	}
}

func trimCRLF(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

func atoi3(b []byte) int {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// equalFold compares a header name with a lower-case literal without
// allocating.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
