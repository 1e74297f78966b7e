package proxy

import (
	"crypto/tls"
	"net"
	"runtime"
	"sync"
	"time"
)

// HTTP/2 connections write through an h2conn: golang.org/x/net/http2's
// server flushes its buffered writer whenever its queue of frames runs
// empty, which under load is after nearly every answer, and each flush
// into a tls.Conn is a TLS record and a write(2) of its own. h2conn takes
// those flushes into a buffer of its own and writes what a burst of them
// collected as one record and one system call:
//
//   - a Write that brings the buffer to h2CoalesceBytes (a full TLS
//     record) writes it at once, topped up to a record from the Write's
//     bytes, and the rest of those as they are (not copied), in the
//     caller's goroutine: a large answer goes out as it is framed, and a
//     client that does not read holds the writer back as it would without
//     h2conn;
//   - a smaller Write returns at once, and a flusher goroutine started for
//     the burst writes the buffer once the goroutines that were ready to
//     run (the connection's serve loop, the handlers of its other streams)
//     have had their turn and added nothing more, or after h2MaxYields
//     turns. No timer: a quiet connection is flushed as soon as the
//     scheduler comes back to the flusher, in microseconds.
//
// A write that fails is remembered: every later Write returns the error,
// and the connection is closed, as x/net/http2 closes it on a write error
// of its own. Close writes what is still buffered first, within
// h2CloseFlushTimeout, unless a write is under way (then Close is there
// to break it, as for tls.Conn).
type h2conn struct {
	net.Conn // the TLS connection: reads, deadlines, addresses pass through

	mu       sync.Mutex
	buf      *[]byte // bytes written to h2conn and not yet to Conn; nil when none
	flushing bool    // a flusher goroutine will write buf
	err      error   // the first write error
	closed   bool

	// wmu is held while a buffer is written to Conn: writes leave in the
	// order they were taken from buf.
	wmu sync.Mutex
}

const (
	// h2CoalesceBytes is the most h2conn holds back: one TLS record's
	// worth of plaintext (RFC 8446 section 5.1).
	h2CoalesceBytes = 16 << 10
	// h2MaxYields bounds how many times a flusher lets other goroutines
	// run before it writes, however busy the connection keeps it.
	h2MaxYields = 1
	// h2CloseFlushTimeout bounds the last write of Close, as tls.Conn
	// bounds its close_notify alert.
	h2CloseFlushTimeout = 5 * time.Second
)

// h2bufs are buffers between bursts, so that an idle connection holds
// none.
var h2bufs = sync.Pool{New: func() any {
	b := make([]byte, 0, h2CoalesceBytes+4<<10)
	return &b
}}

func newH2Conn(c net.Conn) *h2conn { return &h2conn{Conn: c} }

// ConnectionState is the TLS state x/net/http2 reads (its
// connectionStater) to fill Request.TLS and check the cipher suite.
func (c *h2conn) ConnectionState() tls.ConnectionState {
	if cs, ok := c.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
		return cs.ConnectionState()
	}
	return tls.ConnectionState{}
}

func (c *h2conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if err := c.errLocked(); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if c.buf == nil {
		c.buf = h2bufs.Get().(*[]byte)
	}
	if len(*c.buf)+len(p) >= h2CoalesceBytes {
		c.mu.Unlock()
		return c.writeThrough(p)
	}
	*c.buf = append(*c.buf, p...)
	start := !c.flushing
	c.flushing = true
	c.mu.Unlock()
	if start {
		go c.flushLater()
	}
	return len(p), nil
}

// errLocked is why nothing more can be written, or nil; mu is held.
func (c *h2conn) errLocked() error {
	if c.err != nil {
		return c.err
	}
	if c.closed {
		return net.ErrClosed
	}
	return nil
}

// writeThrough writes the buffer, topped up from p to a full record, and
// then the rest of p as it is, without copying a large p.
func (c *h2conn) writeThrough(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := c.take()
	n := 0
	if b != nil {
		if err == nil {
			n = min(len(p), max(h2CoalesceBytes-len(*b), 0))
			*b = append(*b, p[:n]...)
			err = c.write(*b)
		}
		putH2Buf(b)
	}
	if err == nil && n < len(p) {
		err = c.write(p[n:])
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// flushLater is a burst's flusher: it lets the goroutines ready to run
// take their turn while they add to the buffer, then writes it.
func (c *h2conn) flushLater() {
	for range h2MaxYields {
		n := c.buffered()
		runtime.Gosched()
		if c.buffered() == n {
			break
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.flushLocked()
}

// buffered is how many bytes wait in buf.
func (c *h2conn) buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return 0
	}
	return len(*c.buf)
}

// take empties buf and returns what it held (nil: nothing) and the
// connection's write error.
func (c *h2conn) take() (*[]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	c.buf, c.flushing = nil, false
	if b != nil && len(*b) == 0 {
		putH2Buf(b)
		b = nil
	}
	return b, c.err
}

// flushLocked writes what buf holds to Conn; wmu is held.
func (c *h2conn) flushLocked() {
	b, err := c.take()
	if b == nil {
		return
	}
	if err == nil {
		_ = c.write(*b)
	}
	putH2Buf(b)
}

// write writes p to Conn; wmu is held. A failure is kept for every later
// Write, and closes the connection.
func (c *h2conn) write(p []byte) error {
	_, err := c.Conn.Write(p)
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		_ = c.Conn.Close()
	}
	return err
}

func putH2Buf(b *[]byte) {
	*b = (*b)[:0]
	h2bufs.Put(b)
}

// Close writes what is buffered, unless a write is under way, and closes
// the connection.
func (c *h2conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closed = true
	c.mu.Unlock()
	if c.wmu.TryLock() {
		if c.buffered() > 0 {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(h2CloseFlushTimeout))
			c.flushLocked()
		}
		c.wmu.Unlock()
	}
	return c.Conn.Close()
}
