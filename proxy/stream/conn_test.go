package stream

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// listener records a ConnSink's signals.
type listener struct {
	mu      sync.Mutex
	drained int
	gone    chan struct{}
	once    sync.Once
}

func (l *listener) Drained()     { l.mu.Lock(); l.drained++; l.mu.Unlock() }
func (l *listener) Gone(_ error) { l.once.Do(func() { close(l.gone) }) }

// tcpPair is a loopback connection: the server's end and the client's.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { s.Close(); c.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// A chunk written while nothing is queued goes to the socket at once,
// with no writing goroutine; a chunk the socket cannot take whole (the
// client reads nothing) leaves its rest queued, and the client gets every
// chunk, whole and in order, once it reads.
func TestConnSinkWritesAtOnceAndQueuesTheRest(t *testing.T) {
	srv, cli := tcpPair(t)
	_ = srv.SetWriteBuffer(16 << 10)
	_ = cli.SetReadBuffer(16 << 10)
	l := &listener{gone: make(chan struct{})}
	head := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	s := NewConnSink(srv, srv, head, l, 10*time.Second)
	idle := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.writing && len(s.buf) == 0
	}
	deadline := time.Now().Add(5 * time.Second)
	for !idle() {
		if time.Now().After(deadline) {
			t.Fatal("the head was not written")
		}
		time.Sleep(time.Millisecond)
	}
	small := []byte("data: one\n\n")
	if n, err := s.Write(small); err != nil || n != 0 {
		t.Fatalf("a small write: %d pending, %v; want 0, written at once", n, err)
	}
	if !idle() {
		t.Fatal("a small write started the writing goroutine, or queued")
	}
	// Far more than the socket buffers hold, the client reading nothing.
	big := bytes.Repeat([]byte("x"), 4<<20)
	n, err := s.Write(big)
	if err != nil || n == 0 || n >= len(big)+16 {
		t.Fatalf("a big write: %d pending, %v; want its rest queued", n, err)
	}
	last := []byte("data: last\n\n")
	if _, err := s.Write(last); err != nil {
		t.Fatal(err)
	}
	s.End()

	resp, err := http.ReadResponse(bufio.NewReader(cli), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), small...), big...), last...)
	if !bytes.Equal(body, want) {
		t.Fatalf("the client got %d bytes, want %d in order", len(body), len(want))
	}
	select {
	case <-l.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("no Gone after End")
	}
}
