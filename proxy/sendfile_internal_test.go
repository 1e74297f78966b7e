//go:build linux

package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return server, client
}

// corked reads TCP_CORK off conn.
func corked(t *testing.T, conn net.Conn) bool {
	t.Helper()
	rc, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return v != 0
}

func pageFileOf(t *testing.T, b []byte) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "page")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestFileBodySends: the file goes straight to the socket, past fasthttp's
// writer, at explicit offsets (the file's own offset never moves), also
// when the client reads slowly and the socket fills; a file closed before
// the answer could take it is sent from the heap through the writer. The
// socket is corked from newFileBody to the end of WriteTo, either way.
func TestFileBodySends(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 4<<16) // 4 MiB: fills the socket
	f := pageFileOf(t, body)
	server, client := tcpPair(t)
	got := make(chan []byte)
	go func() {
		// A slow reader, the condition under test: the sender meets a
		// full socket. Nothing waits on this pause; the answers are
		// checked whenever it ends.
		time.Sleep(50 * time.Millisecond)
		b := make([]byte, 2*len(body))
		_, _ = io.ReadFull(client, b)
		got <- b
	}()
	var w bytes.Buffer
	for i := range 2 {
		b := newFileBody(f, server, body)
		if !corked(t, server) {
			t.Fatalf("answer %d: the socket is not corked for the header block", i)
		}
		n, err := b.WriteTo(&w)
		if err != nil || n != int64(len(body)) || w.Len() != 0 {
			t.Fatalf("answer %d: sent %d (%v), %d bytes through the writer", i, n, err, w.Len())
		}
		if corked(t, server) {
			t.Fatalf("answer %d: the socket stays corked after the page", i)
		}
	}
	if b := <-got; !bytes.Equal(b[:len(body)], body) || !bytes.Equal(b[len(body):], body) {
		t.Fatal("the client read other bytes than the page, twice")
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 0 {
		t.Errorf("the file's offset moved to %d", off)
	}

	_ = f.Close()
	n, err := newFileBody(f, server, body).WriteTo(&w)
	if err != nil || n != int64(len(body)) || !bytes.Equal(w.Bytes(), body) {
		t.Errorf("closed file: %d bytes (%v), %d through the writer; want the heap's", n, err, w.Len())
	}
	if corked(t, server) {
		t.Error("closed file: the socket stays corked for the heap's bytes")
	}

	// An answer dropped before its body (fasthttp closes the stream).
	b := newFileBody(f, server, body)
	if err := b.Close(); err != nil || corked(t, server) {
		t.Errorf("Close: %v, corked %v", err, corked(t, server))
	}
}

// TestFileBodyDeadline: a client that stops reading is cut off by the
// connection's write deadline, as an answer from the heap would be.
func TestFileBodyDeadline(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 16<<20)
	f := pageFileOf(t, body)
	server, _ := tcpPair(t)
	_ = server.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	b := newFileBody(f, server, body)
	n, err := b.WriteTo(io.Discard)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n >= int64(len(body)) {
		t.Fatalf("sent %d of %d: %v, want the deadline", n, len(body), err)
	}
	if err := b.Close(); err != nil || corked(t, server) {
		t.Errorf("Close after the deadline: %v, corked %v", err, corked(t, server))
	}
}
