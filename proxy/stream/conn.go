package stream

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// ConnSink is the Sink of an HTTP/1.1 connection the front took over from
// its server (fasthttp's Hijack): the answer's head, then the body as
// chunks (RFC 9112 section 7.1), the last chunk and the connection's
// close once the stream ends.
//
// Why not fasthttp's SetBodyStreamWriter: it keeps, for as long as the
// stream lasts, the connection's serving goroutine, its read and write
// buffers (16 KiB each here), a second goroutine and a pipe between them,
// and fasthttp's write timeout bounds the whole body, which would cut a
// healthy stream. Taken over, an idle stream holds the connection, a
// small reading goroutine that notices the client leave at once, and
// nothing else; the writing goroutine runs only while there is something
// to write, each write bounded by streams.write_timeout.
type ConnSink struct {
	conn    net.Conn
	l       Listener
	timeout time.Duration

	mu       sync.Mutex
	buf      []byte // queued, framed; nil when none
	inflight int    // bytes of the write under way
	writing  bool   // the writing goroutine runs
	ending   bool   // End: the last chunk after buf, then close
	closed   bool
}

var errSinkClosed = errors.New("stream: connection closed")

// NewConnSink starts a sink on conn, whose head (status line and header
// fields, ending in an empty line) it writes first. read is what tells
// the client's leaving: the connection itself, or what reads it; what it
// reads is dropped. writeTimeout bounds each write.
func NewConnSink(conn net.Conn, read io.Reader, head []byte, l Listener, writeTimeout time.Duration) *ConnSink {
	s := &ConnSink{conn: conn, l: l, timeout: writeTimeout}
	s.mu.Lock()
	s.buf = append(make([]byte, 0, len(head)+256), head...)
	s.writing = true
	s.mu.Unlock()
	go s.run()
	go s.watch(read)
	return s
}

// watch reads until the connection fails or the client closes it.
func (s *ConnSink) watch(r io.Reader) {
	var b [64]byte
	for {
		if _, err := r.Read(b[:]); err != nil {
			s.closeWith(err)
			return
		}
	}
}

// Write queues p as one chunk.
func (s *ConnSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ending {
		return 0, errSinkClosed
	}
	if len(p) > 0 {
		s.buf = strconv.AppendInt(s.buf, int64(len(p)), 16)
		s.buf = append(s.buf, '\r', '\n')
		s.buf = append(s.buf, p...)
		s.buf = append(s.buf, '\r', '\n')
		s.startLocked()
	}
	return len(s.buf) + s.inflight, nil
}

func (s *ConnSink) startLocked() {
	if !s.writing {
		s.writing = true
		go s.run()
	}
}

// End writes what is queued and the last chunk, then closes.
func (s *ConnSink) End() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ending {
		return
	}
	s.ending = true
	s.buf = append(s.buf, "0\r\n\r\n"...)
	s.startLocked()
}

// Cut closes the connection at once.
func (s *ConnSink) Cut() { s.closeWith(nil) }

func (s *ConnSink) closeWith(err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.buf = true, nil
	s.mu.Unlock()
	_ = s.conn.Close() // the reading goroutine ends with it
	s.l.Gone(err)
}

// run writes what is queued until nothing is, then ends; after End's last
// chunk it closes the connection.
func (s *ConnSink) run() {
	for {
		s.mu.Lock()
		b := s.buf
		if len(b) == 0 || s.closed {
			s.writing = false
			done := s.ending && !s.closed
			s.mu.Unlock()
			if done {
				s.closeWith(nil)
			}
			return
		}
		s.buf, s.inflight = nil, len(b)
		s.mu.Unlock()
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
		_, err := s.conn.Write(b)
		s.mu.Lock()
		s.inflight = 0
		s.mu.Unlock()
		if err != nil {
			s.closeWith(err)
			return
		}
		s.l.Drained()
	}
}
