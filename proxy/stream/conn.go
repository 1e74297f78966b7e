package stream

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
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
	raw     syscall.RawConn // the socket, for a write that does not wait; nil when none (TLS)
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
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
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

// Write queues p as one chunk. When nothing is queued or being written,
// it writes the chunk at once, as far as the socket takes it without
// waiting, and queues only the rest for the writing goroutine: a hub
// hands each of thousands of subscribers its events in turn, and a
// goroutine started, scheduled and given a write deadline for each, only
// to make one write the socket takes whole, would cost more than the
// write itself (docs/BENCHMARKS.md, Fanout).
func (s *ConnSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ending {
		return 0, errSinkClosed
	}
	if len(p) == 0 {
		return len(s.buf) + s.inflight, nil
	}
	if !s.writing && s.raw != nil {
		bp := chunkBufs.Get().(*[]byte)
		chunk := appendChunk((*bp)[:0], p)
		n := s.writeNowLocked(chunk)
		if n < len(chunk) {
			s.buf = append(s.buf, chunk[n:]...)
			s.startLocked()
		}
		if cap(chunk) <= maxPooledChunk {
			*bp = chunk
			chunkBufs.Put(bp)
		}
		return len(s.buf) + s.inflight, nil
	}
	s.buf = appendChunk(s.buf, p)
	s.startLocked()
	return len(s.buf) + s.inflight, nil
}

// appendChunk appends p framed as one chunk.
func appendChunk(b, p []byte) []byte {
	b = strconv.AppendInt(b, int64(len(p)), 16)
	b = append(b, '\r', '\n')
	b = append(b, p...)
	return append(b, '\r', '\n')
}

// chunkBufs frame the chunks written at once; what the socket does not
// take is copied to the sink's own queue. Chunks past maxPooledChunk are
// not kept.
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledChunk = 64 << 10

// writeNowLocked writes b with one write call that does not wait for the
// socket, and returns how much of it went. An error (the socket full, or
// failed) writes nothing here: the writing goroutine meets it, waiting
// for the socket or ending the stream, since closing here would call the
// Listener while the caller (a hub) holds its lock.
func (s *ConnSink) writeNowLocked(b []byte) int { return writeNoWait(s.raw, b) }

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
